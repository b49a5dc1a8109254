/* action_plan.c - rules.yaml `actions` (top-level settings and each rule's
 * list) turned into the plan the dispatcher runs.  The schema has already
 * checked the shape; here come the checks it cannot express (addresses,
 * phone numbers, prefixes, signals, placeholders, which settings go
 * together, that every named action is configured), each with the line
 * and column of the offending value. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "action/action_int.h"

#define MAX_TIMEOUT 3600.0
#define MAX_RETRIES 10

typedef struct pctx {
  const smr_config *cfg;
  const smr_actions_opts *o;
  smr_act_plan *p;
  smr_error *err;
} pctx;

static int perr(pctx *c, const smr_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Values quoted in messages come from rules.yaml: no control characters
 * reach the terminal. */
static void printable(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      *s = ' ';
}

static int perr(pctx *c, const smr_node *at, const char *fmt, ...) {
  char what[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  printable(what);
  return smr_error_set(c->err, SMR_ERR_USAGE, c->cfg->path, -1,
                       "line %d, column %d: %s", at ? at->line : 0,
                       at ? at->col : 0, what);
}

static void pwarn(pctx *c, const smr_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pwarn(pctx *c, const smr_node *at, const char *fmt, ...) {
  char what[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  printable(what);
  fprintf(stderr, "smrules: warning: %s: line %d, column %d: %s\n",
          c->cfg->path, at ? at->line : 0, at ? at->col : 0, what);
}

/* ------------------------------------------------------ simple checks */

static bool has_space_or_control(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s <= ' ' || *s == 0x7f)
      return true;
  return false;
}

/* A host name: dot-separated labels of letters, digits and '-' (not at
 * either end of a label), 1-63 characters each.  One label is a name too:
 * RFC 5321 allows user@localhost, and local relays use it. */
static bool valid_domain(const char *d) {
  size_t label = 0;
  char prev = '.';
  for (const char *q = d;; q++) {
    if (*q == '.' || *q == '\0') {
      if (label == 0 || prev == '-')
        return false;
      if (*q == '\0')
        return true;
      label = 0;
    } else if (isalnum((unsigned char)*q) || (*q == '-' && label > 0)) {
      if (++label > 63)
        return false;
    } else {
      return false;
    }
    prev = *q;
  }
}

/* A local part without spaces, quotes or brackets, '@', a host name: nothing
 * that could break out of an address in a mail header or SMTP command. */
bool smr_act_valid_email(const char *s) {
  const char *at = strchr(s, '@');
  if (!at || at == s || strchr(at + 1, '@') || has_space_or_control(s) ||
      strpbrk(s, "<>,;:\"()[]\\"))
    return false;
  return valid_domain(at + 1);
}

static bool word_chars(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_')
      return false;
  return n > 0;
}

/* SageMaker: ^[a-z0-9]+[@]\w+[.]\w{2,3}$ on the lower-cased text. */
bool smr_act_sagemaker_email(const char *s) {
  const char *at = strchr(s, '@');
  if (!at || at == s)
    return false;
  for (const char *q = s; q < at; q++)
    if (!islower((unsigned char)*q) && !isdigit((unsigned char)*q) &&
        !isupper((unsigned char)*q))
      return false;
  const char *dot = strchr(at + 1, '.');
  if (!dot || !word_chars(at + 1, (size_t)(dot - at - 1)))
    return false;
  size_t tld = strlen(dot + 1);
  return tld >= 2 && tld <= 3 && word_chars(dot + 1, tld);
}

bool smr_act_valid_phone(const char *s) {
  if (s[0] != '+')
    return false;
  size_t n = 0;
  for (const char *q = s + 1; *q; q++, n++)
    if (!isdigit((unsigned char)*q))
      return false;
  return n >= 1 && n <= 15;
}

bool smr_act_valid_prefix(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '-')
      return false;
  return true;
}

static bool valid_name_token(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
      return false;
  return true;
}

static bool valid_env_name(const char *s) {
  if (!isalpha((unsigned char)s[0]) && s[0] != '_')
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_')
      return false;
  return true;
}

static bool has_scheme(const char *url, const char *const *schemes) {
  for (size_t i = 0; schemes[i]; i++) {
    size_t n = strlen(schemes[i]);
    if (strncasecmp(url, schemes[i], n) == 0 && url[n] && url[n] != '/')
      return !has_space_or_control(url);
  }
  return false;
}

static const struct {
  const char *name;
  int sig;
} SIGNALS[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
               {"ABRT", SIGABRT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
               {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
               {"STOP", SIGSTOP}, {"ALRM", SIGALRM}};

int smr_act_signal_number(const char *name) {
  if (isdigit((unsigned char)name[0])) {
    char *end;
    long v = strtol(name, &end, 10);
    return *end || v < 1 || v > 64 ? -1 : (int)v;
  }
  if (strncasecmp(name, "SIG", 3) == 0)
    name += 3;
  for (size_t i = 0; i < sizeof SIGNALS / sizeof *SIGNALS; i++)
    if (strcasecmp(name, SIGNALS[i].name) == 0)
      return SIGNALS[i].sig;
  return -1;
}

const char *smr_act_signal_name(int sig) {
  for (size_t i = 0; i < sizeof SIGNALS / sizeof *SIGNALS; i++)
    if (SIGNALS[i].sig == sig)
      return SIGNALS[i].name;
  return NULL;
}

int smr_act_check_secret_file(const char *path, smr_error *err) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return smr_error_set(
        err, SMR_ERR_USAGE, path, -1, "cannot open the credentials file: %s%s",
        strerror(errno), errno == ELOOP ? " (symbolic links are refused)" : "");
  struct stat st;
  int rc = fstat(fd, &st);
  close(fd);
  if (rc != 0 || !S_ISREG(st.st_mode))
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "the credentials file is not a regular file");
  if (st.st_uid != geteuid())
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "the credentials file must be owned by the user "
                         "running smrules (uid %u), not uid %u",
                         (unsigned)geteuid(), (unsigned)st.st_uid);
  if (st.st_mode & 077)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "the credentials file is readable or writable by "
                         "others (mode %03o); make it private: chmod 600",
                         (unsigned)(st.st_mode & 0777));
  return SMR_OK;
}

/* ------------------------------------------------------ node access */

static const smr_node *child(const smr_node *map, const char *key) {
  if (!map || map->type != SMR_NODE_MAP)
    return NULL;
  const smr_node *v = smr_node_get(map, key);
  return v && v->type != SMR_NODE_NULL ? v : NULL;
}

static int get_str(pctx *c, const smr_node *map, const char *key, char **out) {
  const smr_node *v = child(map, key);
  if (!v)
    return SMR_OK;
  if (v->type != SMR_NODE_STRING || !v->s[0])
    return perr(c, v, "%s: expected a non-empty string", key);
  free(*out);
  *out = smr_xstrdup(v->s);
  return SMR_OK;
}

static int get_num(pctx *c, const smr_node *map, const char *key, double lo,
                   double hi, double *out) {
  const smr_node *v = child(map, key);
  if (!v)
    return SMR_OK;
  double x = v->type == SMR_NODE_INT     ? (double)v->i
             : v->type == SMR_NODE_FLOAT ? v->f
                                         : -1e300;
  if (x < lo || x > hi)
    return perr(c, v, "%s: expected a number from %g to %g", key, lo, hi);
  *out = x;
  return SMR_OK;
}

static int get_bool(pctx *c, const smr_node *map, const char *key, bool *out) {
  const smr_node *v = child(map, key);
  if (!v)
    return SMR_OK;
  if (v->type != SMR_NODE_BOOL)
    return perr(c, v, "%s: expected true or false", key);
  *out = v->b;
  return SMR_OK;
}

/* A string or a list of strings. */
static int get_strlist(pctx *c, const smr_node *map, const char *key,
                       smr_strv *out) {
  const smr_node *v = child(map, key);
  if (!v)
    return SMR_OK;
  if (v->type == SMR_NODE_STRING) {
    smr_strv_push(out, v->s);
    return SMR_OK;
  }
  if (v->type != SMR_NODE_LIST || v->n == 0)
    return perr(c, v, "%s: expected a string or a non-empty list of strings",
                key);
  for (size_t i = 0; i < v->n; i++) {
    if (v->items[i]->type != SMR_NODE_STRING)
      return perr(c, v->items[i], "%s: expected a string", key);
    smr_strv_push(out, v->items[i]->s);
  }
  return SMR_OK;
}

static char *resolve(const smr_config *cfg, const char *p) {
  if (p[0] == '/' || !cfg->base_dir || !cfg->base_dir[0])
    return smr_xstrdup(p);
  return smr_xasprintf("%s/%s", cfg->base_dir, p);
}

static int get_retry(pctx *c, const smr_node *map, smr_act_retry *r) {
  double retries = r->retries;
  int rc = get_num(c, map, "retries", 0, MAX_RETRIES, &retries);
  if (!rc && child(map, "retries") &&
      child(map, "retries")->type != SMR_NODE_INT)
    rc = perr(c, child(map, "retries"), "retries: expected an integer");
  r->retries = (int)retries;
  return rc ? rc
            : get_num(c, map, "retry_delay_seconds", 0, MAX_TIMEOUT, &r->delay);
}

static int check_addresses(pctx *c, const smr_node *at, const smr_strv *v,
                           const char *what) {
  for (size_t i = 0; i < v->n; i++) {
    if (!smr_act_valid_email(v->v[i])) {
      char *shown = smr_act_oneline(v->v[i], 200);
      int rc = perr(c, at,
                    "%s: '%s' is not an e-mail address (expected "
                    "name@host.domain or name@host, without spaces, quotes "
                    "or brackets)",
                    what, shown);
      free(shown);
      return rc;
    }
    if (!smr_act_sagemaker_email(v->v[i]))
      pwarn(c, at,
            "%s: SageMaker would have rejected '%s' (its pattern is "
            "^[a-z0-9]+@\\w+\\.\\w{2,3}$); smrules accepts it",
            what, v->v[i]);
  }
  return SMR_OK;
}

/* ------------------------------------------------------------ repeat */

static int parse_repeat(pctx *c, const smr_node *v, smr_repeat *out) {
  const char *mode = NULL;
  const smr_node *mode_at = v, *n = NULL;
  if (v->type == SMR_NODE_STRING) {
    mode = v->s;
  } else if (v->type == SMR_NODE_MAP) {
    mode_at = child(v, "mode");
    mode = mode_at && mode_at->type == SMR_NODE_STRING ? mode_at->s : NULL;
    n = child(v, "n");
    if (!mode && n)
      mode = "every_nth";
    if (!mode_at)
      mode_at = v;
  }
  if (!mode || (strcmp(mode, "first") && strcmp(mode, "every") &&
                strcmp(mode, "every_nth")))
    return perr(c, mode_at,
                "repeat: expected first, every, or "
                "{mode: every_nth, n: N}");
  if (strcmp(mode, "every_nth") == 0) {
    if (!n)
      return perr(c, v,
                  "repeat: every_nth needs n, e.g. {mode: every_nth, "
                  "n: 10}");
    if (n->type != SMR_NODE_INT || n->i < 1)
      return perr(c, n, "repeat: n: expected an integer >= 1");
    *out = (smr_repeat){SMR_REPEAT_EVERY_NTH, n->i};
    return SMR_OK;
  }
  if (n)
    return perr(c, n, "repeat: n is only used with mode every_nth");
  *out = (smr_repeat){
      strcmp(mode, "first") ? SMR_REPEAT_EVERY : SMR_REPEAT_FIRST, 0};
  return SMR_OK;
}

bool smr_repeat_due(const smr_repeat *r, int64_t ordinal) {
  switch (r->mode) {
  case SMR_REPEAT_FIRST:
    return ordinal == 1;
  case SMR_REPEAT_EVERY:
    return ordinal >= 1;
  default:
    return ordinal >= 1 && (ordinal - 1) % r->n == 0;
  }
}

/* ------------------------------------------------------------- hooks */

static const char *const RESERVED[] = {"StopTraining", "Email", "SMS", "SNS",
                                       NULL};

static const smr_hook_cfg *find_hook(const smr_act_plan *p, const char *n) {
  for (size_t i = 0; i < p->n_hooks; i++)
    if (strcasecmp(p->hooks[i].name, n) == 0)
      return &p->hooks[i];
  return NULL;
}

static int check_templates(pctx *c, const smr_node *list, smr_strv *argv,
                           smr_strv *arg_names) {
  for (size_t i = 0; i < argv->n; i++) {
    char *bad = smr_act_check_template(argv->v[i], arg_names);
    if (bad) {
      const smr_node *at = list->type == SMR_NODE_LIST ? list->items[i] : list;
      int rc = perr(c, at,
                    "unknown placeholder {%s} (known: {rule}, "
                    "{rule_type}, {step}, {trigger}, {status}, {trial}, "
                    "{job}, {action}, {message}, {time}, {args.NAME}; write "
                    "{{ and }} for literal braces)",
                    bad);
      free(bad);
      return rc;
    }
  }
  return SMR_OK;
}

static int parse_headers(pctx *c, const smr_node *m, smr_strv *out) {
  if (!m)
    return SMR_OK;
  if (m->type != SMR_NODE_MAP)
    return perr(c, m, "headers: expected a map of header names to values");
  for (size_t i = 0; i < m->n; i++) {
    const smr_node *v = m->items[i];
    bool token = m->keys[i][0] != '\0';
    for (const char *q = m->keys[i]; *q; q++)
      token &= isalnum((unsigned char)*q) || *q == '-';
    if (!token)
      return perr(c, v,
                  "headers: '%s' is not a header name (letters, "
                  "digits and '-')",
                  m->keys[i]);
    if (!v->s || v->type == SMR_NODE_LIST || v->type == SMR_NODE_MAP ||
        strpbrk(v->s, "\r\n"))
      return perr(c, v, "headers: %s: expected a one-line value", m->keys[i]);
    smr_strv_take(out, smr_xasprintf("%s: %s", m->keys[i], v->s));
  }
  return SMR_OK;
}

static int parse_hook_body(pctx *c, const smr_node *v, smr_hook_cfg *h) {
  const smr_node *type = child(v, "type"), *argv = child(v, "argv"),
                 *url = child(v, "url");
  if (!type || type->type != SMR_NODE_STRING ||
      (strcmp(type->s, "exec") && strcmp(type->s, "webhook")))
    return perr(c, type ? type : v,
                "hook '%s': type: expected exec or "
                "webhook",
                h->name);
  h->type = strcmp(type->s, "webhook") == 0 ? SMR_HOOK_WEBHOOK : SMR_HOOK_EXEC;
  h->inherit_env = true;
  h->timeout = 30;
  h->retry = (smr_act_retry){2, 1};
  int rc = get_strlist(c, v, "argv", &h->argv);
  if (!rc)
    rc = get_str(c, v, "url", &h->url);
  if (!rc)
    rc = get_num(c, v, "timeout_seconds", 0.001, MAX_TIMEOUT, &h->timeout);
  if (!rc)
    rc = get_bool(c, v, "inherit_env", &h->inherit_env);
  if (!rc)
    rc = get_retry(c, v, &h->retry);
  if (!rc)
    rc = parse_headers(c, child(v, "headers"), &h->headers);
  if (rc)
    return rc;
  if (h->type == SMR_HOOK_EXEC) {
    if (!argv)
      return perr(c, v,
                  "hook '%s': an exec hook needs argv: [program, "
                  "arguments...]",
                  h->name);
    if (url || h->headers.n)
      return perr(c, url ? url : v,
                  "hook '%s': url and headers belong to "
                  "webhook hooks",
                  h->name);
    return check_templates(c, argv, &h->argv, &h->arg_names);
  }
  if (!url)
    return perr(c, v, "hook '%s': a webhook needs url: http(s)://...", h->name);
  static const char *const HTTP[] = {"http://", "https://", NULL};
  if (!has_scheme(h->url, HTTP))
    return perr(c, url, "hook '%s': url: expected http://... or https://...",
                h->name);
  if (argv)
    return perr(c, argv, "hook '%s': argv belongs to exec hooks", h->name);
  return SMR_OK;
}

static int parse_hooks(pctx *c, const smr_node *m) {
  if (!m)
    return SMR_OK;
  smr_act_plan *p = c->p;
  p->hooks = smr_xcalloc(m->n ? m->n : 1, sizeof *p->hooks);
  for (size_t i = 0; i < m->n; i++) {
    const smr_node *v = m->items[i];
    const char *name = m->keys[i];
    smr_node at = {.line = m->key_lines[i], .col = m->key_cols[i]};
    if (!valid_name_token(name))
      return perr(c, &at,
                  "hook name '%s': expected letters, digits, '_', "
                  "'.' or '-'",
                  name);
    for (size_t k = 0; RESERVED[k]; k++)
      if (strcasecmp(name, RESERVED[k]) == 0)
        return perr(c, &at,
                    "hook name '%s' is the name of a built-in action; "
                    "choose another",
                    name);
    if (find_hook(p, name))
      return perr(c, &at,
                  "hook name '%s' is used twice (names are compared "
                  "case-insensitively)",
                  name);
    smr_hook_cfg *h = &p->hooks[p->n_hooks++];
    h->name = smr_xstrdup(name);
    int rc = parse_hook_body(c, v, h);
    if (rc)
      return rc;
  }
  return SMR_OK;
}

static int hook_ref(pctx *c, const smr_node *map, const smr_hook_cfg **out) {
  const smr_node *v = child(map, "hook");
  if (!v)
    return SMR_OK;
  if (v->type != SMR_NODE_STRING || !(*out = find_hook(c->p, v->s)))
    return perr(c, v,
                "hook: expected the name of a hook defined under "
                "actions.hooks");
  return SMR_OK;
}

/* ------------------------------------------------------- StopTraining */

static int parse_stop_target(pctx *c, const smr_node *m, smr_stop_cfg *s) {
  static const char *const KEYS[] = {"pid", "pid_file", "cmdline"};
  const smr_node *first = NULL;
  for (size_t k = 0; k < 3; k++) {
    const smr_node *v = child(m, KEYS[k]);
    if (v && first)
      return perr(c, v,
                  "StopTraining: give only one of pid, pid_file and "
                  "cmdline");
    if (v)
      first = v;
  }
  const smr_node *v;
  if ((v = child(m, "pid"))) {
    if (v->type != SMR_NODE_INT || v->i < 2 || v->i > INT32_MAX)
      return perr(c, v, "pid: expected a process id from 2 to 2147483647");
    s->how = SMR_STOP_PID;
    s->pid = v->i;
  } else if ((v = child(m, "pid_file"))) {
    char *f = NULL;
    int rc = get_str(c, m, "pid_file", &f);
    if (rc)
      return rc;
    s->how = SMR_STOP_PID_FILE;
    s->pid_file = resolve(c->cfg, f);
    free(f);
  } else if ((v = child(m, "cmdline"))) {
    int rc = get_strlist(c, m, "cmdline", &s->cmdline);
    if (rc)
      return rc;
    if (v->type == SMR_NODE_STRING) {
      s->cmdline_text = smr_xstrdup(v->s);
      smr_strv_free(&s->cmdline);
    }
    s->how = SMR_STOP_CMDLINE;
  }
  return SMR_OK;
}

static int parse_stop(pctx *c, const smr_node *m) {
  smr_stop_cfg *s = &c->p->stop;
  if (!m)
    return SMR_OK;
  int rc = parse_stop_target(c, m, s);
  const smr_node *v = child(m, "signal");
  if (!rc && v) {
    s->sig = v->s ? smr_act_signal_number(v->s) : -1;
    if (s->sig < 0)
      return perr(c, v,
                  "signal: expected a signal name (TERM, INT, HUP, "
                  "QUIT, USR1, USR2, KILL, ...) or a number from 1 to 64");
  }
  if (!rc)
    rc = get_num(c, m, "grace_seconds", 0, 86400, &s->grace);
  if (!rc)
    rc = get_bool(c, m, "kill_after_grace", &s->kill_after_grace);
  double uid = -1;
  if (!rc)
    rc = get_num(c, m, "allow_uid", 0, 4294967294.0, &uid);
  if (!rc && uid >= 0 && uid != (double)(int64_t)uid)
    return perr(c, child(m, "allow_uid"), "allow_uid: expected a user id");
  s->allow_uid = (int64_t)uid;
  if (!rc)
    rc = get_str(c, m, "training_job_prefix", &s->prefix);
  if (!rc && s->prefix && !smr_act_valid_prefix(s->prefix))
    return perr(c, child(m, "training_job_prefix"),
                "training_job_prefix: expected letters, digits and '-' "
                "(SageMaker's ^[A-Za-z0-9\\-]+$)");
  char *job = NULL;
  if (!rc)
    rc = get_str(c, m, "job_name", &job);
  if (job) {
    free(s->job_name);
    s->job_name = smr_act_oneline(job, 256);
    free(job);
  }
  return rc;
}

/* ------------------------------------------------------- Email, SNS */

static int parse_email_auth(pctx *c, const smr_node *m, smr_email_cfg *e) {
  int rc = get_str(c, m, "username_env", &e->username_env);
  if (!rc)
    rc = get_str(c, m, "password_env", &e->password_env);
  if (!rc)
    rc = get_str(c, m, "credentials_file", &e->credentials_file);
  if (rc)
    return rc;
  const char *names[] = {"username_env", "password_env"};
  char *vals[] = {e->username_env, e->password_env};
  for (int k = 0; k < 2; k++)
    if (vals[k] && !valid_env_name(vals[k]))
      return perr(c, child(m, names[k]),
                  "%s: expected the name of an "
                  "environment variable (letters, digits, '_')",
                  names[k]);
  if (!e->username_env != !e->password_env)
    return perr(c, m, "Email: give both username_env and password_env");
  if (e->username_env && e->credentials_file)
    return perr(c, child(m, "credentials_file"),
                "Email: give either "
                "username_env/password_env or credentials_file, not both");
  if (e->credentials_file) {
    char *path = resolve(c->cfg, e->credentials_file);
    free(e->credentials_file);
    e->credentials_file = path;
    smr_error why;
    if (smr_act_check_secret_file(path, &why) != SMR_OK)
      return perr(c, child(m, "credentials_file"), "credentials_file %s: %s",
                  path, why.msg);
  }
  return SMR_OK;
}

static int parse_email_transport(pctx *c, const smr_node *m, smr_email_cfg *e) {
  const smr_node *url = child(m, "smtp_url"), *sm = child(m, "sendmail"),
                 *hk = child(m, "hook");
  if ((url != NULL) + (sm != NULL) + (hk != NULL) != 1)
    return perr(c,
                url && sm   ? sm
                : url && hk ? hk
                : sm && hk  ? hk
                            : m,
                "Email: give exactly one of smtp_url, sendmail and hook");
  int rc = get_str(c, m, "smtp_url", &e->smtp_url);
  if (!rc)
    rc = hook_ref(c, m, &e->hook);
  if (!rc)
    rc = get_strlist(c, m, "sendmail", &e->sendmail);
  if (rc)
    return rc;
  static const char *const SMTP[] = {"smtp://", "smtps://", NULL};
  if (e->smtp_url && !has_scheme(e->smtp_url, SMTP))
    return perr(c, url,
                "smtp_url: expected smtp://host[:port] or "
                "smtps://host[:port]");
  if (sm && sm->type == SMR_NODE_STRING) {
    smr_strv_push(&e->sendmail, "-t");
    smr_strv_push(&e->sendmail, "-i");
  }
  if (sm)
    rc = check_templates(c, sm, &e->sendmail, NULL);
  if (!rc && e->smtp_url && !child(m, "from"))
    return perr(c, m,
                "Email: sending through smtp_url needs from: "
                "sender@example.com");
  return rc;
}

static int parse_email(pctx *c, const smr_node *m) {
  smr_email_cfg *e = &c->p->email;
  if (!m)
    return SMR_OK;
  e->present = true;
  int rc = parse_email_transport(c, m, e);
  if (!rc)
    rc = get_str(c, m, "from", &e->from);
  if (!rc && e->from && !smr_act_valid_email(e->from))
    return perr(c, child(m, "from"), "from: '%s' is not an e-mail address",
                e->from);
  if (!rc)
    rc = get_strlist(c, m, "to", &e->to);
  if (!rc)
    rc = check_addresses(c, child(m, "to"), &e->to, "to");
  if (!rc)
    rc = parse_email_auth(c, m, e);
  const smr_node *tls = child(m, "tls");
  if (!rc && tls) {
    if (tls->type != SMR_NODE_STRING ||
        (strcmp(tls->s, "try") && strcmp(tls->s, "required") &&
         strcmp(tls->s, "none")))
      return perr(c, tls, "tls: expected try, required or none");
    e->tls = tls->s[0] == 't'   ? SMR_TLS_TRY
             : tls->s[0] == 'r' ? SMR_TLS_REQUIRED
                                : SMR_TLS_NONE;
  }
  char *ca = NULL;
  if (!rc)
    rc = get_str(c, m, "ca_file", &ca);
  if (ca) {
    e->ca_file = resolve(c->cfg, ca);
    free(ca);
  }
  if (!rc)
    rc = get_num(c, m, "timeout_seconds", 0.001, MAX_TIMEOUT, &e->timeout);
  return rc ? rc : get_retry(c, m, &e->retry);
}

static int parse_sns(pctx *c, const smr_node *m) {
  smr_sns_cfg *s = &c->p->sns;
  if (!m)
    return SMR_OK;
  s->present = true;
  int rc = get_str(c, m, "topic_arn", &s->topic_arn);
  if (!rc)
    rc = get_str(c, m, "region", &s->region);
  if (!rc)
    rc = get_str(c, m, "endpoint", &s->endpoint);
  if (!rc)
    rc = get_str(c, m, "phone_number", &s->phone_number);
  if (!rc)
    rc = get_str(c, m, "profile", &s->profile);
  if (!rc)
    rc = hook_ref(c, m, &s->hook);
  if (!rc)
    rc = get_num(c, m, "timeout_seconds", 0.001, MAX_TIMEOUT, &s->timeout);
  if (!rc)
    rc = get_retry(c, m, &s->retry);
  if (rc)
    return rc;
  static const char *const HTTP[] = {"http://", "https://", NULL};
  if (s->topic_arn && (strncmp(s->topic_arn, "arn:", 4) != 0 ||
                       strstr(s->topic_arn, ":sns:") == NULL ||
                       has_space_or_control(s->topic_arn)))
    return perr(c, child(m, "topic_arn"),
                "topic_arn: expected "
                "arn:aws:sns:<region>:<account>:<topic>");
  if (s->region && !valid_name_token(s->region))
    return perr(c, child(m, "region"),
                "region: expected a region name "
                "such as us-east-1");
  if (s->endpoint && !has_scheme(s->endpoint, HTTP))
    return perr(c, child(m, "endpoint"),
                "endpoint: expected http://... or "
                "https://...");
  if (s->phone_number && !smr_act_valid_phone(s->phone_number))
    return perr(c, child(m, "phone_number"),
                "phone_number: expected an "
                "E.164 number such as \"+15555550100\"");
  if (s->profile && !valid_name_token(s->profile))
    return perr(c, child(m, "profile"), "profile: expected a profile name");
  return SMR_OK;
}

/* ------------------------------------------------------ rule items */

typedef struct item_src {
  const char *name;
  const smr_node *value; /* NULL when the item is a bare name */
  const smr_node *at;    /* where the action is named */
} item_src;

static void item_free(smr_act_item *it) {
  free(it->key);
  free(it->label);
  free(it->target);
  smr_strv_free(&it->to);
  free(it->phone);
  free(it->topic);
  free(it->prefix);
  smr_strv_free(&it->args.names);
  smr_strv_free(&it->args.values);
}

/* The value of a map-form item: its `repeat` key (if any) and the checks
 * that only the listed keys appear. */
static int item_map(pctx *c, const item_src *s, const char *const *keys,
                    smr_act_item *it) {
  const smr_node *v = s->value;
  for (size_t i = 0; i < v->n; i++) {
    bool known = strcmp(v->keys[i], "repeat") == 0;
    for (size_t k = 0; keys && keys[k]; k++)
      known |= strcmp(v->keys[i], keys[k]) == 0;
    if (!known)
      return perr(c, v->items[i], "%s: unknown key '%s'", s->name, v->keys[i]);
  }
  const smr_node *r = child(v, "repeat");
  return r ? parse_repeat(c, r, &it->repeat) : SMR_OK;
}

static char *stop_target_text(const smr_stop_cfg *s) {
  switch (s->how) {
  case SMR_STOP_PID:
    return smr_xasprintf("%s %lld",
                         s->launched   ? "launched command, pid"
                         : s->from_cli ? "--training-pid"
                                       : "pid",
                         (long long)s->pid);
  case SMR_STOP_PID_FILE:
    return smr_xasprintf("pid file %s", s->pid_file);
  case SMR_STOP_CMDLINE: {
    if (s->cmdline_text)
      return smr_xasprintf("cmdline '%s'", s->cmdline_text);
    smr_buf b = {0};
    smr_buf_puts(&b, "cmdline [");
    for (size_t i = 0; i < s->cmdline.n; i++)
      smr_buf_printf(&b, "%s'%s'", i ? ", " : "", s->cmdline.v[i]);
    smr_buf_puts(&b, "]");
    return b.data;
  }
  default:
    return smr_xstrdup("(no target)");
  }
}

static int item_stop(pctx *c, const item_src *s, smr_act_item *it) {
  static const char *const KEYS[] = {"training_job_prefix", NULL};
  const smr_node *v = s->value, *pre = NULL;
  if (v && v->type == SMR_NODE_STRING)
    pre = v;
  else if (v) {
    int rc = item_map(c, s, KEYS, it);
    if (rc)
      return rc;
    pre = child(v, "training_job_prefix");
  }
  if (pre && (pre->type != SMR_NODE_STRING || !smr_act_valid_prefix(pre->s)))
    return perr(c, pre,
                "training_job_prefix: expected letters, digits and "
                "'-' (SageMaker's ^[A-Za-z0-9\\-]+$)");
  const char *prefix = pre ? pre->s : c->p->stop.prefix;
  it->prefix = prefix ? smr_xstrdup(prefix) : NULL;
  it->key = smr_xstrdup("StopTraining");
  it->target = stop_target_text(&c->p->stop);
  if (c->p->stop.how != SMR_STOP_NONE || c->o->launched)
    return SMR_OK; /* launched: the command after '--' is the target */
  if (c->o->validate_only) {
    pwarn(c, s->at,
          "StopTraining has no target here: give --training-pid "
          "to smrules run, or pid, pid_file or cmdline under "
          "actions.StopTraining");
    return SMR_OK;
  }
  return perr(c, s->at,
              "StopTraining needs a target: --training-pid N, or "
              "pid, pid_file or cmdline under actions.StopTraining");
}

static char *joined(const smr_strv *v) {
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  for (size_t i = 0; i < v->n; i++)
    smr_buf_printf(&b, "%s%s", i ? "," : "", v->v[i]);
  return b.data;
}

static int item_email(pctx *c, const item_src *s, smr_act_item *it) {
  static const char *const KEYS[] = {"to", NULL};
  const smr_node *v = s->value, *at = s->at;
  int rc = SMR_OK;
  if (v && v->type == SMR_NODE_STRING) {
    smr_strv_push(&it->to, v->s);
    at = v;
  } else if (v) {
    rc = item_map(c, s, KEYS, it);
    if (!rc)
      rc = get_strlist(c, v, "to", &it->to);
    at = child(v, "to") ? child(v, "to") : v;
  }
  if (!rc && !it->to.n)
    for (size_t i = 0; i < c->p->email.to.n; i++)
      smr_strv_push(&it->to, c->p->email.to.v[i]);
  if (!rc && !it->to.n)
    return perr(c, at,
                "Email needs a recipient: 'Email: ml-team@example.com'"
                " or actions.Email.to");
  if (!rc && it->to.n && v)
    rc = check_addresses(c, at, &it->to, "Email");
  if (!rc && !c->p->email.present)
    return perr(c, s->at,
                "Email needs settings: add actions.Email with "
                "smtp_url (and from), sendmail, or hook");
  if (rc)
    return rc;
  it->target = joined(&it->to);
  it->key = smr_xasprintf("Email:%s", it->target);
  return SMR_OK;
}

/* The one string setting of an action item (KEYS[0]): given as the item's
 * scalar value (`SMS: "+1555..."`) or under its key in a map, else
 * `fallback` from the top-level settings.  *at is where to point errors. */
static int item_string(pctx *c, const item_src *s, const char *const *keys,
                       smr_act_item *it, const char *fallback, char **out,
                       const smr_node **at) {
  const smr_node *v = s->value;
  int rc = SMR_OK;
  *at = s->at;
  if (v && v->type == SMR_NODE_STRING) {
    *out = smr_xstrdup(v->s);
    *at = v;
  } else if (v) {
    rc = item_map(c, s, keys, it);
    if (!rc)
      rc = get_str(c, v, keys[0], out);
    *at = child(v, keys[0]) ? child(v, keys[0]) : v;
  }
  if (!rc && !*out && fallback)
    *out = smr_xstrdup(fallback);
  return rc;
}

static int item_sms(pctx *c, const item_src *s, smr_act_item *it) {
  static const char *const KEYS[] = {"phone_number", NULL};
  const smr_node *at;
  int rc = item_string(c, s, KEYS, it, c->p->sns.phone_number, &it->phone, &at);
  if (rc)
    return rc;
  if (!it->phone)
    return perr(c, at,
                "SMS needs a phone number: 'SMS: \"+15555550100\"' or "
                "actions.SNS.phone_number");
  if (!smr_act_valid_phone(it->phone))
    return perr(c, at,
                "SMS: '%s' is not an E.164 phone number (expected "
                "+ and 1 to 15 digits, quoted: \"+15555550100\")",
                it->phone);
  it->target = smr_xstrdup(it->phone);
  it->key = smr_xasprintf("SMS:%s", it->phone);
  return SMR_OK;
}

static int item_sns(pctx *c, const item_src *s, smr_act_item *it) {
  static const char *const KEYS[] = {"topic_arn", NULL};
  const smr_node *at;
  int rc = item_string(c, s, KEYS, it, c->p->sns.topic_arn, &it->topic, &at);
  if (rc)
    return rc;
  if (!it->topic)
    return perr(c, at,
                "SNS needs a topic: 'SNS: arn:aws:sns:...' or "
                "actions.SNS.topic_arn");
  if (strncmp(it->topic, "arn:", 4) != 0 || !strstr(it->topic, ":sns:") ||
      has_space_or_control(it->topic))
    return perr(c, at,
                "SNS: expected a topic ARN arn:aws:sns:<region>:"
                "<account>:<topic>");
  it->target = smr_xstrdup(it->topic);
  it->key = smr_xasprintf("SNS:%s", it->topic);
  return SMR_OK;
}

static int hook_args(pctx *c, const item_src *s, smr_act_item *it) {
  const smr_node *v = s->value;
  if (v && v->type == SMR_NODE_STRING) {
    smr_strv_push(&it->args.names, "value");
    smr_strv_push(&it->args.values, v->s);
  } else if (v) {
    /* every key but `repeat` is an argument of the hook */
    for (size_t i = 0; i < v->n; i++) {
      const smr_node *a = v->items[i];
      if (strcmp(v->keys[i], "repeat") == 0)
        continue;
      if (!valid_env_name(v->keys[i]))
        return perr(c, a,
                    "%s: argument name '%s': expected letters, digits "
                    "and '_'",
                    s->name, v->keys[i]);
      if (a->type == SMR_NODE_LIST || a->type == SMR_NODE_MAP)
        return perr(c, a, "%s: argument %s: expected a single value", s->name,
                    v->keys[i]);
      smr_strv_push(&it->args.names, v->keys[i]);
      smr_strv_push(&it->args.values, a->s ? a->s : "");
    }
  }
  const smr_strv *need = &it->hook->arg_names;
  for (size_t i = 0; i < need->n; i++)
    if (!smr_act_arg(&it->args, need->v[i]))
      return perr(c, v ? v : s->at,
                  "hook '%s' uses {args.%s}: give it here, "
                  "e.g. '%s: {%s: ...}'",
                  it->hook->name, need->v[i], s->name, need->v[i]);
  return SMR_OK;
}

static int item_hook(pctx *c, const item_src *s, smr_act_item *it) {
  it->hook = find_hook(c->p, s->name);
  if (!it->hook) {
    smr_buf b = {0};
    smr_buf_puts(&b, "");
    for (size_t i = 0; i < c->p->n_hooks; i++)
      smr_buf_printf(&b, "%s%s",
                     i ? ", " : "; hooks defined: ", c->p->hooks[i].name);
    int rc = perr(c, s->at,
                  "unknown action '%s' (expected StopTraining, "
                  "Email, SMS, SNS or a hook defined under actions.hooks%s)",
                  s->name, b.data);
    smr_buf_free(&b);
    return rc;
  }
  if (s->value && s->value->type == SMR_NODE_MAP) {
    const smr_node *r = child(s->value, "repeat");
    if (r) {
      int rc = parse_repeat(c, r, &it->repeat);
      if (rc)
        return rc;
    }
  }
  it->target =
      smr_xstrdup(it->hook->type == SMR_HOOK_EXEC ? "exec" : "webhook");
  it->key = smr_xasprintf("hook:%s", it->hook->name);
  return hook_args(c, s, it);
}

static int parse_item(pctx *c, const smr_node *n, smr_act_item *it) {
  item_src s = {.at = n};
  if (n->type == SMR_NODE_STRING) {
    s.name = n->s;
  } else if (n->type == SMR_NODE_MAP && n->n == 1) {
    s.name = n->keys[0];
    s.value = n->items[0]->type == SMR_NODE_NULL ? NULL : n->items[0];
  } else {
    return perr(c, n, "an action is a name or a map with one key");
  }
  if (s.value && s.value->type != SMR_NODE_STRING &&
      s.value->type != SMR_NODE_MAP)
    return perr(c, s.value, "%s: expected a string or a map", s.name);
  it->line = n->line;
  it->col = n->col;
  it->repeat = c->p->repeat;
  static const struct {
    const char *name;
    smr_act_kind kind;
    int (*parse)(pctx *, const item_src *, smr_act_item *);
  } BUILTIN[] = {{"StopTraining", SMR_ACT_STOP, item_stop},
                 {"Email", SMR_ACT_EMAIL, item_email},
                 {"SMS", SMR_ACT_SMS, item_sms},
                 {"SNS", SMR_ACT_SNS, item_sns}};
  for (size_t k = 0; k < sizeof BUILTIN / sizeof *BUILTIN; k++)
    if (strcasecmp(s.name, BUILTIN[k].name) == 0) {
      it->kind = BUILTIN[k].kind;
      it->label = smr_xstrdup(BUILTIN[k].name);
      return BUILTIN[k].parse(c, &s, it);
    }
  it->kind = SMR_ACT_HOOK;
  it->label = smr_xstrdup(s.name);
  return item_hook(c, &s, it);
}

static int add_item(pctx *c, smr_act_rule_plan *rp, const smr_node *at,
                    smr_act_item *it) {
  for (size_t k = 0; k < rp->n; k++)
    if (strcmp(rp->v[k].key, it->key) == 0) {
      int rc = perr(c, at,
                    "this action is listed twice for the rule (first "
                    "at line %d, column %d)",
                    rp->v[k].line, rp->v[k].col);
      item_free(it);
      return rc;
    }
  rp->v = smr_xrealloc(rp->v, (rp->n + 1) * sizeof *rp->v);
  rp->v[rp->n++] = *it;
  c->p->n_items++;
  return SMR_OK;
}

static bool truthy(const smr_node *v) {
  return v && ((v->type == SMR_NODE_BOOL && v->b) ||
               (v->s && strcasecmp(v->s, "true") == 0));
}

/* StalledTrainingRule's stop_training_on_fire is a StopTraining with its
 * training_job_name_prefix (docs/actions.md#differences-from-sagemaker). */
static int implicit_stop(pctx *c, const smr_rule_config *rc,
                         smr_act_rule_plan *rp) {
  if (!rc->rule || strcmp(rc->rule, "StalledTrainingRule") != 0 ||
      !truthy(child(rc->parameters, "stop_training_on_fire")))
    return SMR_OK;
  for (size_t k = 0; k < rp->n; k++)
    if (rp->v[k].kind == SMR_ACT_STOP)
      return SMR_OK;
  const smr_node *at = child(rc->parameters, "stop_training_on_fire");
  const smr_node *pre = child(rc->parameters, "training_job_name_prefix");
  if (pre && (!pre->s || !smr_act_valid_prefix(pre->s)))
    return perr(c, pre,
                "training_job_name_prefix: expected letters, digits "
                "and '-'");
  smr_act_item it = {.kind = SMR_ACT_STOP,
                     .repeat = c->p->repeat,
                     .line = at->line,
                     .col = at->col};
  it.label = smr_xstrdup("StopTraining");
  it.key = smr_xstrdup("StopTraining");
  it.target = stop_target_text(&c->p->stop);
  const char *prefix = pre ? pre->s : c->p->stop.prefix;
  it.prefix = prefix ? smr_xstrdup(prefix) : NULL;
  if (c->p->stop.how == SMR_STOP_NONE)
    pwarn(c, at,
          "stop_training_on_fire: no StopTraining target is "
          "configured (--training-pid, or actions.StopTraining pid, pid_file "
          "or cmdline); the action will be refused");
  return add_item(c, rp, at, &it);
}

static int parse_rule(pctx *c, const smr_rule_config *rc,
                      smr_act_rule_plan *rp) {
  const smr_node *list = rc->actions;
  for (size_t i = 0; list && list->type == SMR_NODE_LIST && i < list->n; i++) {
    smr_act_item it;
    memset(&it, 0, sizeof it);
    int st = parse_item(c, list->items[i], &it);
    if (st) {
      item_free(&it);
      return st;
    }
    if ((st = add_item(c, rp, list->items[i], &it)))
      return st;
  }
  return implicit_stop(c, rc, rp);
}

/* ------------------------------------------------------------- plan */

static char *trial_basename(const char *dir) {
  if (!dir || !*dir)
    return smr_xstrdup("");
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/')
    n--;
  size_t start = n;
  while (start > 0 && dir[start - 1] != '/')
    start--;
  char *raw = smr_xstrndup(dir + start, n - start);
  if (!strcmp(raw, ".") || !strcmp(raw, "..")) {
    free(raw);
    char *abs = realpath(dir, NULL);
    raw = smr_xstrdup(abs && strrchr(abs, '/') ? strrchr(abs, '/') + 1 : "");
    free(abs);
  }
  char *safe = smr_act_oneline(raw, 256);
  free(raw);
  return safe;
}

static void defaults(smr_act_plan *p, const smr_actions_opts *o) {
  p->repeat.mode = SMR_REPEAT_FIRST;
  p->stop.sig = SIGTERM;
  p->stop.grace = 30;
  p->stop.kill_after_grace = true;
  p->stop.allow_uid = -1;
  p->stop.job_name = trial_basename(o->trial_dir);
  p->email.timeout = p->sns.timeout = 30;
  p->email.retry = p->sns.retry = (smr_act_retry){2, 1};
}

static int parse_settings(pctx *c, const smr_node *a) {
  if (!a || a->type != SMR_NODE_MAP)
    return SMR_OK;
  int rc = parse_hooks(c, child(a, "hooks"));
  if (!rc)
    rc = parse_stop(c, child(a, "StopTraining"));
  if (!rc)
    rc = parse_email(c, child(a, "Email"));
  if (!rc)
    rc = parse_sns(c, child(a, "SNS"));
  const smr_node *r = child(a, "repeat");
  if (!rc && r)
    rc = parse_repeat(c, r, &c->p->repeat);
  return rc;
}

int smr_act_plan_build(const smr_config *cfg, const smr_actions_opts *o,
                       smr_act_plan *p, smr_error *err) {
  memset(p, 0, sizeof *p);
  defaults(p, o);
  pctx c = {cfg, o, p, err};
  int rc = parse_settings(&c, cfg->actions);
  if (!rc && o->training_pid > 0) {
    p->stop.how = SMR_STOP_PID;
    p->stop.pid = o->training_pid;
    p->stop.from_cli = true;
    p->stop.launched = o->launched;
  }
  p->rules = smr_xcalloc(cfg->n_rules ? cfg->n_rules : 1, sizeof *p->rules);
  p->n_rules = cfg->n_rules;
  for (size_t i = 0; !rc && i < cfg->n_rules; i++)
    rc = parse_rule(&c, &cfg->rules[i], &p->rules[i]);
  if (rc)
    smr_act_plan_free(p);
  return rc;
}

static void hook_free(smr_hook_cfg *h) {
  free(h->name);
  smr_strv_free(&h->argv);
  free(h->url);
  smr_strv_free(&h->headers);
  smr_strv_free(&h->arg_names);
}

void smr_act_plan_free(smr_act_plan *p) {
  for (size_t i = 0; i < p->n_rules; i++) {
    for (size_t k = 0; k < p->rules[i].n; k++)
      item_free(&p->rules[i].v[k]);
    free(p->rules[i].v);
  }
  free(p->rules);
  for (size_t i = 0; i < p->n_hooks; i++)
    hook_free(&p->hooks[i]);
  free(p->hooks);
  smr_stop_cfg *s = &p->stop;
  free(s->pid_file);
  smr_strv_free(&s->cmdline);
  free(s->cmdline_text);
  free(s->prefix);
  free(s->job_name);
  smr_email_cfg *e = &p->email;
  free(e->smtp_url);
  free(e->from);
  smr_strv_free(&e->to);
  free(e->username_env);
  free(e->password_env);
  free(e->credentials_file);
  smr_strv_free(&e->sendmail);
  free(e->ca_file);
  smr_sns_cfg *n = &p->sns;
  free(n->topic_arn);
  free(n->region);
  free(n->endpoint);
  free(n->phone_number);
  free(n->profile);
  memset(p, 0, sizeof *p);
}
