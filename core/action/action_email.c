/* action_email.c - the Email action: SMTP through libcurl (smtp:// with
 * STARTTLS when offered or required, smtps://), with credentials from
 * environment variables or a private credentials file, or a
 * sendmail-compatible command fed the message on stdin.  Subject and
 * first body line are SageMaker's ("SMDebugRule:<rule> fired"); the body
 * adds the step and the violations.  Header fields hold only checked
 * addresses and sanitized one-line text, so nothing from a trial can add
 * a header or end the message early. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"
#include "base/curl_lazy.h"

#define LINE_MAX_OCTETS 990 /* RFC 5322 allows 998 before CRLF */
#define CREDENTIALS_MAX 4096

/* ------------------------------------------------------------ message */

static void base64(smr_buf *b, const unsigned char *p, size_t n) {
  static const char T[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    char out[4] = {T[v >> 18 & 63], T[v >> 12 & 63],
                   i + 1 < n ? T[v >> 6 & 63] : '=',
                   i + 2 < n ? T[v & 63] : '='};
    smr_buf_append(b, out, 4);
  }
}

/* An unstructured header value: ASCII as is, otherwise one RFC 2047
 * encoded word. */
static void header_text(smr_buf *b, const char *text) {
  bool ascii = true;
  for (const char *p = text; *p; p++)
    ascii &= (unsigned char)*p < 0x80;
  if (ascii) {
    smr_buf_puts(b, text);
    return;
  }
  smr_buf_puts(b, "=?UTF-8?B?");
  base64(b, (const unsigned char *)text, strlen(text));
  smr_buf_puts(b, "?=");
}

char *smr_email_subject(const smr_act_event *e) {
  char *raw = smr_xasprintf("SMDebugRule:%s fired", e->rule);
  char *s = smr_act_oneline(raw, 200);
  free(raw);
  return s;
}

/* Appends text with every line ended by CRLF and cut to the line limit. */
static void body_text(smr_buf *b, const char *text) {
  const char *p = text;
  while (*p) {
    size_t n = strcspn(p, "\n");
    while (n > LINE_MAX_OCTETS) {
      smr_buf_append(b, p, LINE_MAX_OCTETS);
      smr_buf_puts(b, "\r\n");
      p += LINE_MAX_OCTETS;
      n -= LINE_MAX_OCTETS;
    }
    smr_buf_append(b, p, n);
    smr_buf_puts(b, "\r\n");
    p += n + (p[n] == '\n');
  }
}

static void date_header(smr_buf *b) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S +0000", &tm);
  smr_buf_printf(b, "Date: %s\r\n", buf);
}

static void message_id(smr_buf *b, const char *from) {
  static atomic_uint counter;
  const char *at = from ? strchr(from, '@') : NULL;
  smr_buf_printf(b, "Message-ID: <smrules.%lld.%d.%u@%s>\r\n",
                 (long long)time(NULL), (int)getpid(),
                 atomic_fetch_add(&counter, 1u),
                 at ? at + 1 : "smrules.invalid");
}

static char *body(const smr_act_event *e) {
  smr_buf b = {0};
  smr_buf_printf(&b, "SMDebugRule:%s fired. %s\n\n", e->rule, e->summary);
  smr_buf_printf(&b, "Rule:     %s (%s)\nStep:     %lld\n", e->rule,
                 e->rule_type, (long long)e->step);
  smr_buf_printf(&b,
                 "Trigger:  %lld (how many times this rule fired so "
                 "far)\nStatus:   %s\nTrial:    %s\nJob:      %s\n"
                 "Time:     %s\n\n",
                 (long long)e->trigger, e->status, e->trial, e->job, e->time);
  if (e->details && e->details[0])
    smr_buf_printf(&b, "Violations at step %lld:\n%s", (long long)e->step,
                   e->details);
  else
    smr_buf_puts(&b, "The rule reported no violation details.\n");
  smr_buf_puts(&b, "\n-- \nsmrules\n");
  char *safe = smr_act_multiline(b.data, 64 * 1024);
  smr_buf_free(&b);
  return safe;
}

char *smr_email_message(const smr_email_cfg *c, const smr_strv *to,
                        const smr_act_event *e) {
  smr_buf b = {0};
  if (c->from)
    smr_buf_printf(&b, "From: %s\r\n", c->from);
  smr_buf_puts(&b, "To: ");
  for (size_t i = 0; i < to->n; i++)
    smr_buf_printf(&b, "%s%s", i ? ", " : "", to->v[i]);
  smr_buf_puts(&b, "\r\nSubject: ");
  char *subject = smr_email_subject(e);
  header_text(&b, subject);
  free(subject);
  smr_buf_puts(&b, "\r\n");
  date_header(&b);
  message_id(&b, c->from);
  smr_buf_puts(&b, "MIME-Version: 1.0\r\n"
                   "Content-Type: text/plain; charset=utf-8\r\n"
                   "Content-Transfer-Encoding: 8bit\r\n"
                   "Auto-Submitted: auto-generated\r\n");
  smr_buf_printf(&b, "X-Smrules-Step: %lld\r\n\r\n", (long long)e->step);
  char *text = body(e);
  body_text(&b, text);
  free(text);
  return b.data;
}

/* -------------------------------------------------------- credentials */

typedef struct creds {
  char *user, *pass;
} creds;

static void creds_free(creds *c) {
  if (c->pass)
    explicit_bzero(c->pass, strlen(c->pass));
  free(c->user);
  free(c->pass);
}

static char *trimmed(const char *s, size_t n) {
  while (n && (*s == ' ' || *s == '\t'))
    s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    n--;
  return smr_xstrndup(s, n);
}

/* Lines "username = ..." and "password = ..."; '#' starts a comment. */
static smr_act_rc read_credentials(const char *path, creds *out,
                                   smr_act_result *r) {
  smr_error why;
  if (smr_act_check_secret_file(path, &why) != SMR_OK)
    return smr_act_set(r, SMR_ACT_FAILED, "credentials file %s: %s", path,
                       why.msg);
  char *text = NULL;
  size_t len = 0;
  if (smr_read_file(path, CREDENTIALS_MAX, &text, &len, &why) != SMR_OK)
    return smr_act_set(r, SMR_ACT_FAILED,
                       "credentials file %s: cannot read "
                       "it (at most %d bytes)",
                       path, CREDENTIALS_MAX);
  for (char *line = text; line && *line;) {
    char *next = strchr(line, '\n');
    size_t n = next ? (size_t)(next - line) : strlen(line);
    char *eq = memchr(line, '=', n);
    if (eq && line[0] != '#') {
      char *key = trimmed(line, (size_t)(eq - line));
      char **dst = !strcmp(key, "username")   ? &out->user
                   : !strcmp(key, "password") ? &out->pass
                                              : NULL;
      if (dst) {
        free(*dst);
        *dst = trimmed(eq + 1, n - (size_t)(eq + 1 - line));
      }
      free(key);
    }
    line = next ? next + 1 : NULL;
  }
  explicit_bzero(text, len);
  free(text);
  if (!out->user || !out->pass)
    return smr_act_set(r, SMR_ACT_FAILED,
                       "credentials file %s needs "
                       "'username = ...' and 'password = ...' lines",
                       path);
  return SMR_ACT_OK;
}

static smr_act_rc get_credentials(const smr_email_cfg *c, creds *out,
                                  smr_act_result *r) {
  memset(out, 0, sizeof *out);
  if (c->credentials_file)
    return read_credentials(c->credentials_file, out, r);
  if (!c->username_env)
    return SMR_ACT_OK;
  const char *u = getenv(c->username_env), *p = getenv(c->password_env);
  if (!u || !p)
    return smr_act_set(r, SMR_ACT_FAILED,
                       "environment variable %s is not "
                       "set",
                       !u ? c->username_env : c->password_env);
  out->user = smr_xstrdup(u);
  out->pass = smr_xstrdup(p);
  return SMR_ACT_OK;
}

/* --------------------------------------------------------------- SMTP */

typedef struct upload {
  const char *data;
  size_t len, off;
} upload;

static size_t read_cb(char *buf, size_t size, size_t n, void *arg) {
  upload *u = arg;
  size_t k = size * n, left = u->len - u->off;
  if (k > left)
    k = left;
  memcpy(buf, u->data + u->off, k);
  u->off += k;
  return k;
}

static size_t discard(char *p, size_t size, size_t n, void *arg) {
  (void)p;
  (void)arg;
  return size * n;
}

static void smtp_result(CURL *h, CURLcode cc, const char *errbuf,
                        const char *to, const char *where, smr_act_result *r) {
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (cc == CURLE_OK) {
    smr_act_set(r, SMR_ACT_OK, "sent to %s via %s", to, where);
    return;
  }
  bool final = cc == CURLE_LOGIN_DENIED || cc == CURLE_USE_SSL_FAILED ||
               cc == CURLE_UNSUPPORTED_PROTOCOL || code >= 500;
  char reply[48] = "";
  if (code)
    snprintf(reply, sizeof reply, " (server reply %ld)", code);
  smr_act_set(r, final ? SMR_ACT_FAILED : SMR_ACT_RETRY, "SMTP %s: %s%s", where,
              errbuf[0] ? errbuf : curl_easy_strerror(cc), reply);
}

static void smtp_send(const smr_email_cfg *c, const smr_strv *to,
                      const char *msg, const char *where, smr_act_result *r) {
  creds cr;
  if (get_credentials(c, &cr, r) != SMR_ACT_OK)
    return;
  CURL *h = curl_easy_init();
  if (!h) {
    creds_free(&cr);
    smr_act_set(r, SMR_ACT_RETRY, "cannot start libcurl%s%s",
                smr_curl_error()[0] ? ": " : "", smr_curl_error());
    return;
  }
  struct curl_slist *rcpt = NULL;
  for (size_t i = 0; i < to->n; i++) {
    char *a = smr_xasprintf("<%s>", to->v[i]);
    rcpt = curl_slist_append(rcpt, a);
    free(a);
  }
  char *from = smr_xasprintf("<%s>", c->from ? c->from : "");
  upload u = {msg, strlen(msg), 0};
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(h, CURLOPT_URL, c->smtp_url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(h, CURLOPT_MAIL_FROM, from);
  curl_easy_setopt(h, CURLOPT_MAIL_RCPT, rcpt);
  curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
  curl_easy_setopt(h, CURLOPT_READDATA, &u);
  curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  long ssl = c->tls == SMR_TLS_REQUIRED ? (long)CURLUSESSL_ALL
             : c->tls == SMR_TLS_NONE   ? (long)CURLUSESSL_NONE
                                        : (long)CURLUSESSL_TRY;
  if (strncasecmp(c->smtp_url, "smtps://", 8) != 0)
    curl_easy_setopt(h, CURLOPT_USE_SSL, ssl);
  if (c->ca_file)
    curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
  if (cr.user) {
    curl_easy_setopt(h, CURLOPT_USERNAME, cr.user);
    curl_easy_setopt(h, CURLOPT_PASSWORD, cr.pass);
  }
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout * 1000));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode cc = curl_easy_perform(h);
  char *list = smr_xstrdup("");
  for (size_t i = 0; i < to->n; i++) {
    char *next = smr_xasprintf("%s%s%s", list, i ? "," : "", to->v[i]);
    free(list);
    list = next;
  }
  smtp_result(h, cc, errbuf, list, where, r);
  free(list);
  curl_easy_cleanup(h);
  curl_slist_free_all(rcpt);
  free(from);
  creds_free(&cr);
}

/* ----------------------------------------------------------- sendmail */

static void sendmail_send(const smr_email_cfg *c, const char *msg,
                          const smr_act_event *e, smr_act_result *r) {
  smr_strv argv = {0};
  for (size_t i = 0; i < c->sendmail.n; i++) {
    char *bad = NULL,
         *a = smr_act_expand(c->sendmail.v[i], e, "Email", NULL, &bad);
    if (!a) {
      smr_act_set(r, SMR_ACT_FAILED, "sendmail: unknown placeholder {%s}", bad);
      free(bad);
      smr_strv_free(&argv);
      return;
    }
    smr_strv_take(&argv, a);
  }
  smr_strv_take(&argv, NULL);
  argv.n--;
  /* a local command gets local line ends */
  char *lf = smr_xstrdup(msg);
  size_t k = 0;
  for (size_t i = 0; lf[i]; i++)
    if (!(lf[i] == '\r' && lf[i + 1] == '\n'))
      lf[k++] = lf[i];
  lf[k] = '\0';
  smr_exec_req q = {.argv = argv.v,
                    .inherit_env = true,
                    .stdin_text = lf,
                    .timeout = c->timeout};
  char *out = NULL;
  int st = smr_exec(&q, &out, r);
  if (st == 0)
    smr_act_set(r, SMR_ACT_OK, "handed to %s", argv.v[0]);
  else if (st > 0)
    smr_act_set(r, SMR_ACT_RETRY, "%s exited with status %d%s%s", argv.v[0], st,
                out && *out ? ": " : "", out ? out : "");
  free(out);
  free(lf);
  smr_strv_free(&argv);
}

void smr_email_send(const smr_email_cfg *c, const smr_strv *to,
                    const smr_act_event *e, bool dry_run, smr_act_result *r) {
  char *where = c->smtp_url
                    ? smr_act_redact_url(c->smtp_url)
                    : smr_xstrdup(c->sendmail.n ? c->sendmail.v[0] : "?");
  if (dry_run) {
    smr_act_set(r, SMR_ACT_DRY_RUN,
                "would send an e-mail to %zu "
                "recipient%s via %s",
                to->n, to->n == 1 ? "" : "s", where);
  } else {
    char *msg = smr_email_message(c, to, e);
    if (c->smtp_url)
      smtp_send(c, to, msg, where, r);
    else
      sendmail_send(c, msg, e, r);
    free(msg);
  }
  free(where);
}

/* ---------------------------------------------------------- the kind */

static const char *const TLS[] = {"try", "required", "none", NULL};

static const smr_setting SETTINGS[] = {
    {.name = "smtp_url",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_email_cfg, smtp_url),
     .description = "smtp://host[:port] or smtps://host[:port]"},
    {.name = "from",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_email_cfg, from),
     .description = "the sender's address"},
    {.name = "to",
     .type = SMR_SETTING_STRLIST,
     .offset = offsetof(smr_email_cfg, to),
     .description = "recipients when a rule's Email names none"},
    {.name = "username_env",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_email_cfg, username_env),
     .description = "environment variable holding the SMTP user name"},
    {.name = "password_env",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_email_cfg, password_env),
     .description = "environment variable holding the SMTP password"},
    {.name = "credentials_file",
     .type = SMR_SETTING_PATH,
     .offset = offsetof(smr_email_cfg, credentials_file),
     .flags = SMR_SETTING_SECRET_FILE,
     .description = "a private file with username = and password = lines"},
    {.name = "sendmail",
     .type = SMR_SETTING_STRLIST,
     .offset = offsetof(smr_email_cfg, sendmail),
     .description = "a sendmail-compatible program (argv template)"},
    {.name = "hook",
     .type = SMR_SETTING_CUSTOM,
     .offset = offsetof(smr_email_cfg, hook),
     .read = smr_act_read_hook_ref,
     .schema = "{\"type\":\"string\"}",
     .description = "a hook of actions.hooks that sends the e-mail"},
    {.name = "tls",
     .type = SMR_SETTING_ENUM,
     .offset = offsetof(smr_email_cfg, tls),
     .choices = TLS,
     .def = "try",
     .description = "STARTTLS: try, required or none"},
    {.name = "ca_file",
     .type = SMR_SETTING_PATH,
     .offset = offsetof(smr_email_cfg, ca_file),
     .description = "certificates to verify the server with"},
    SMR_ACT_TIMEOUT_SETTING(smr_email_cfg),
    SMR_ACT_RETRY_SETTINGS(smr_email_cfg),
    {.type = SMR_SETTING_END}};

static int check_addresses(smr_act_parse *c, const smr_node *at,
                           const smr_strv *v, const char *what) {
  for (size_t i = 0; i < v->n; i++) {
    if (!smr_act_valid_email(v->v[i])) {
      char *shown = smr_act_oneline(v->v[i], 200);
      int rc = smr_settings_error(
          &c->sc, at,
          "%s: '%s' is not an e-mail address (expected name@host.domain or "
          "name@host, without spaces, quotes or brackets)",
          what, shown);
      free(shown);
      return rc;
    }
    if (!smr_act_sagemaker_email(v->v[i]))
      smr_settings_warn(&c->sc, at,
                        "%s: SageMaker would have rejected '%s' (its pattern "
                        "is ^[a-z0-9]+@\\w+\\.\\w{2,3}$); smrules accepts it",
                        what, v->v[i]);
  }
  return SMR_OK;
}

static int check_transport(smr_act_parse *c, const smr_node *m,
                           smr_email_cfg *e) {
  const smr_node *url = smr_node_value(m, "smtp_url"),
                 *sm = smr_node_value(m, "sendmail"),
                 *hk = smr_node_value(m, "hook");
  if ((url != NULL) + (sm != NULL) + (hk != NULL) != 1)
    return smr_settings_error(
        &c->sc,
        url && sm   ? sm
        : url && hk ? hk
        : sm && hk  ? hk
                    : m,
        "Email: give exactly one of smtp_url, sendmail and hook");
  static const char *const SMTP[] = {"smtp://", "smtps://", NULL};
  if (e->smtp_url && !smr_act_has_scheme(e->smtp_url, SMTP))
    return smr_settings_error(&c->sc, url,
                              "smtp_url: expected smtp://host[:port] or "
                              "smtps://host[:port]");
  if (sm && sm->type == SMR_NODE_STRING) {
    smr_strv_push(&e->sendmail, "-t");
    smr_strv_push(&e->sendmail, "-i");
  }
  int rc = sm ? smr_act_check_templates(c, sm, &e->sendmail, NULL) : SMR_OK;
  if (!rc && e->smtp_url && !e->from)
    return smr_settings_error(&c->sc, m,
                              "Email: sending through smtp_url needs from: "
                              "sender@example.com");
  return rc;
}

static int check_auth(smr_act_parse *c, const smr_node *m, smr_email_cfg *e) {
  const char *names[] = {"username_env", "password_env"};
  char *vals[] = {e->username_env, e->password_env};
  for (int k = 0; k < 2; k++)
    if (vals[k] && !smr_act_valid_env_name(vals[k]))
      return smr_settings_error(&c->sc, smr_node_value(m, names[k]),
                                "%s: expected the name of an environment "
                                "variable (letters, digits, '_')",
                                names[k]);
  if (!e->username_env != !e->password_env)
    return smr_settings_error(&c->sc, m,
                              "Email: give both username_env and "
                              "password_env");
  if (e->username_env && e->credentials_file)
    return smr_settings_error(&c->sc, smr_node_value(m, "credentials_file"),
                              "Email: give either username_env/password_env "
                              "or credentials_file, not both");
  return SMR_OK;
}

static int configure(smr_act_parse *c, const smr_node *m, void *settings) {
  smr_email_cfg *e = settings;
  if (!m)
    return SMR_OK;
  e->present = true;
  int rc = check_transport(c, m, e);
  if (!rc && e->from && !smr_act_valid_email(e->from))
    return smr_settings_error(&c->sc, smr_node_value(m, "from"),
                              "from: '%s' is not an e-mail address", e->from);
  if (!rc)
    rc = check_addresses(c, smr_node_value(m, "to"), &e->to, "to");
  return rc ? rc : check_auth(c, m, e);
}

static char *joined(const smr_strv *v) {
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  for (size_t i = 0; i < v->n; i++)
    smr_buf_printf(&b, "%s%s", i ? "," : "", v->v[i]);
  return b.data;
}

/* The item's data: its recipients (a smr_strv). */
static int parse(smr_act_parse *c, const smr_act_src *s, smr_act_item *it) {
  const smr_email_cfg *e = smr_act_plan_settings(c->p, &smr_action_email);
  smr_strv *to = it->data = smr_xcalloc(1, sizeof *to);
  const smr_node *v = s->value, *at = s->at;
  int rc = SMR_OK;
  if (v && v->type == SMR_NODE_STRING) {
    smr_strv_push(to, v->s);
    at = v;
  } else if (v) {
    static const smr_setting TO[] = {
        {.name = "to", .type = SMR_SETTING_STRLIST, .offset = 0},
        {.type = SMR_SETTING_END}};
    rc = smr_settings_read(&c->sc, TO, v, to);
    at = smr_node_value(v, "to") ? smr_node_value(v, "to") : v;
  }
  for (size_t i = 0; !rc && !to->n && i < e->to.n; i++)
    smr_strv_push(to, e->to.v[i]);
  if (!rc && !to->n)
    return smr_settings_error(&c->sc, at,
                              "Email needs a recipient: 'Email: "
                              "ml-team@example.com' or actions.Email.to");
  if (!rc && v)
    rc = check_addresses(c, at, to, "Email");
  if (!rc && !e->present)
    return smr_settings_error(&c->sc, s->at,
                              "Email needs settings: add actions.Email with "
                              "smtp_url (and from), sendmail, or hook");
  if (rc)
    return rc;
  it->retry = e->hook ? e->hook->retry : e->retry;
  it->target = joined(to);
  it->key = smr_xasprintf("Email:%s", it->target);
  return SMR_OK;
}

static void free_item(void *data) {
  smr_strv_free(data);
  free(data);
}

static void run(const smr_act_exec *x, const smr_act_item *it,
                const smr_act_event *e, smr_act_result *r) {
  const smr_email_cfg *c = smr_act_plan_settings(x->plan, &smr_action_email);
  if (!c->hook) {
    smr_email_send(c, it->data, e, x->dry_run, r);
    return;
  }
  smr_act_args args = {0};
  char *subject = smr_email_subject(e),
       *body = smr_email_message(c, it->data, e);
  const char *names[] = {"to", "subject", "message"};
  const char *values[] = {it->target, subject, body};
  for (size_t i = 0; i < 3; i++) {
    smr_strv_push(&args.names, names[i]);
    smr_strv_push(&args.values, values[i]);
  }
  smr_act_via_hook(x, c->hook, it, &args, e, r);
  free(subject);
  free(body);
  smr_strv_free(&args.names);
  smr_strv_free(&args.values);
}

static const char *const ITEM_KEYS[] = {"to", NULL};

const smr_action_kind smr_action_email = {
    .name = "Email",
    .settings_key = "Email",
    .settings = SETTINGS,
    .settings_size = sizeof(smr_email_cfg),
    .configure = configure,
    .item_keys = ITEM_KEYS,
    .parse = parse,
    .free_item = free_item,
    .default_repeat = {SMR_REPEAT_FIRST, 0},
    .run = run,
};
