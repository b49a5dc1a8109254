/* action_event.c - the event a rule trigger produces, and the safe text
 * forms of it every action uses: one-line fields for headers and argv,
 * message bodies, the JSON hooks receive, and argv templates.  Nothing
 * from a trial (tensor names, messages) reaches a header, an argument or
 * a body without passing through here. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action/action_int.h"
#include "base/jsonw.h"

#define MAX_LISTED_VIOLATIONS 20

const char *smr_act_rc_name(smr_act_rc rc) {
  switch (rc) {
  case SMR_ACT_OK:
    return "ok";
  case SMR_ACT_REFUSED:
    return "refused";
  case SMR_ACT_SKIPPED:
    return "skipped";
  case SMR_ACT_DRY_RUN:
    return "dry-run";
  default:
    return "failed";
  }
}

smr_act_rc smr_act_set(smr_act_result *r, smr_act_rc rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->detail, sizeof r->detail, fmt, ap);
  va_end(ap);
  r->rc = rc;
  return rc;
}

const char *smr_act_arg(const smr_act_args *a, const char *name) {
  for (size_t i = 0; a && i < a->names.n; i++)
    if (strcmp(a->names.v[i], name) == 0)
      return a->values.v[i];
  return NULL;
}

/* ---------------------------------------------------------- safe text */

/* Length of the valid UTF-8 sequence at p (at most rem bytes), 0 if the
 * bytes there are not one. */
static size_t utf8_len(const unsigned char *p, size_t rem) {
  size_t n = p[0] < 0x80             ? 1
             : (p[0] & 0xE0) == 0xC0 ? 2
             : (p[0] & 0xF0) == 0xE0 ? 3
             : (p[0] & 0xF8) == 0xF0 ? 4
                                     : 0;
  if (n == 0 || n > rem || (n == 2 && p[0] < 0xC2) || (n == 4 && p[0] > 0xF4))
    return 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80)
      return 0;
  if (n == 3 &&
      ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
    return 0; /* overlong or surrogate */
  if (n == 4 &&
      ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
    return 0;
  return n;
}

static char *clean(const char *s, size_t max, bool keep_newlines) {
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  size_t rem = strlen((const char *)p);
  while (rem && b.len < max) {
    size_t n = utf8_len(p, rem);
    if (n == 0) {
      smr_buf_puts(&b, "?");
      n = 1;
    } else if (n == 1 && (p[0] < 0x20 || p[0] == 0x7f)) {
      if (keep_newlines && (p[0] == '\n' || p[0] == '\t'))
        smr_buf_append(&b, p, 1);
      else if (keep_newlines)
        smr_buf_printf(&b, "\\x%02x", p[0]);
      else
        smr_buf_puts(&b, " ");
    } else if (b.len + n <= max) {
      smr_buf_append(&b, p, n);
    } else {
      break;
    }
    p += n;
    rem -= n;
  }
  return b.data;
}

char *smr_act_oneline(const char *s, size_t max) {
  return clean(s, max, false);
}

char *smr_act_multiline(const char *s, size_t max) {
  return clean(s, max, true);
}

char *smr_act_redact_url(const char *url) {
  const char *sep = strstr(url, "://");
  if (!sep)
    return smr_xstrdup("(url)");
  const char *host = sep + 3, *end = host + strcspn(host, "/?#");
  const char *at = memchr(host, '@', (size_t)(end - host));
  if (at)
    host = at + 1; /* user:password@ never shown */
  char *raw = smr_xasprintf("%.*s://%.*s", (int)(sep - url), url,
                            (int)(end - host), host);
  char *safe = smr_act_oneline(raw, 256);
  free(raw);
  return safe;
}

/* ------------------------------------------------------------- event */

void smr_act_event_free(smr_act_event *e) {
  if (!e)
    return;
  free(e->rule);
  free(e->rule_type);
  free(e->status);
  free(e->trial);
  free(e->job);
  free(e->time);
  free(e->summary);
  free(e->details);
  free(e->violations);
  free(e);
}

/* "key=value, key=value" of one violation, on one line. */
static char *violation_text(const cJSON *v) {
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  const cJSON *f, *obj = cJSON_IsObject(v) ? v : NULL;
  if (!obj) {
    char *raw = cJSON_PrintUnformatted(v);
    smr_buf_puts(&b, raw ? raw : "?");
    cJSON_free(raw);
  }
  cJSON_ArrayForEach(f, obj) {
    char *val = cJSON_IsString(f) ? NULL : cJSON_PrintUnformatted(f);
    smr_buf_printf(&b, "%s%s=%s", b.len ? ", " : "", f->string,
                   val ? val : f->valuestring);
    cJSON_free(val);
  }
  char *line = smr_act_oneline(b.data, 400);
  smr_buf_free(&b);
  return line;
}

static void violations_of(const char *report, int64_t step, smr_act_event *e,
                          char **first, int *count) {
  cJSON *root = report ? cJSON_Parse(report) : NULL;
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(root, "Details"), "last_trigger");
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(lt, "step");
  const cJSON *vs = cJSON_GetObjectItemCaseSensitive(lt, "violations");
  if (!cJSON_IsNumber(st) || (int64_t)st->valuedouble != step ||
      !cJSON_IsArray(vs))
    vs = NULL;
  char *arr = vs ? cJSON_PrintUnformatted(vs) : NULL;
  e->violations = smr_xstrdup(arr ? arr : "[]");
  cJSON_free(arr);
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  const cJSON *v;
  *count = 0;
  cJSON_ArrayForEach(v, vs) {
    if (*count < MAX_LISTED_VIOLATIONS) {
      char *line = violation_text(v);
      smr_buf_printf(&b, "  - %s\n", line);
      if (!*first)
        *first = line;
      else
        free(line);
    }
    (*count)++;
  }
  if (*count > MAX_LISTED_VIOLATIONS)
    smr_buf_printf(&b, "  ... and %d more\n", *count - MAX_LISTED_VIOLATIONS);
  e->details = b.data;
  cJSON_Delete(root);
}

static char *now_iso(void) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return smr_xstrdup(buf);
}

smr_act_event *smr_act_event_new(const char *rule, const char *rule_type,
                                 int64_t step, int64_t trigger,
                                 const char *trial, const char *job,
                                 const char *report) {
  smr_act_event *e = smr_xcalloc(1, sizeof *e);
  e->rule = smr_act_oneline(rule, 256);
  e->rule_type = smr_act_oneline(rule_type ? rule_type : rule, 256);
  e->status = smr_xstrdup("IssuesFound");
  e->trial = smr_act_oneline(trial, 1024);
  e->job = smr_act_oneline(job, 256);
  e->time = now_iso();
  e->step = step;
  e->trigger = trigger;
  char *first = NULL;
  int count = 0;
  violations_of(report, step, e, &first, &count);
  smr_buf b = {0};
  smr_buf_printf(&b, "rule %s (%s) triggered at step %lld", e->rule,
                 e->rule_type, (long long)step);
  if (first)
    smr_buf_printf(&b, ": %s", first);
  if (count > 1)
    smr_buf_printf(&b, " (%d violations)", count);
  e->summary = smr_act_oneline(b.data, 480);
  smr_buf_free(&b);
  free(first);
  return e;
}

char *smr_act_event_json(const smr_act_event *e, const char *action,
                         const smr_act_args *args) {
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "event");
  smr_jw_str(&w, "rule_triggered");
  const char *keys[] = {"rule", "rule_type", "status",  "trial",  "job",
                        "time", "action",    "message", "details"};
  const char *vals[] = {e->rule, e->rule_type, e->status,  e->trial,  e->job,
                        e->time, action,       e->summary, e->details};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    smr_jw_key(&w, keys[i]);
    smr_jw_str(&w, vals[i] ? vals[i] : "");
  }
  smr_jw_key(&w, "step");
  smr_jw_int(&w, e->step);
  smr_jw_key(&w, "trigger");
  smr_jw_int(&w, e->trigger);
  smr_jw_key(&w, "violations");
  smr_jw_raw(&w, e->violations ? e->violations : "[]");
  smr_jw_key(&w, "args");
  smr_jw_obj(&w);
  for (size_t i = 0; args && i < args->names.n; i++) {
    smr_jw_key(&w, args->names.v[i]);
    smr_jw_str(&w, args->values.v[i]);
  }
  smr_jw_obj_end(&w);
  smr_jw_obj_end(&w);
  return smr_jw_finish(&w);
}

/* --------------------------------------------------------- templates */

static const char *const PLACEHOLDERS[] = {
    "rule", "rule_type", "step",    "trigger", "status", "trial",
    "job",  "action",    "message", "time",    NULL};

static const char *placeholder(const char *name, const smr_act_event *e,
                               const char *action, const smr_act_args *args,
                               char *num, size_t nlen) {
  if (strncmp(name, "args.", 5) == 0) {
    const char *v = smr_act_arg(args, name + 5);
    return v ? v : "";
  }
  if (!strcmp(name, "step") || !strcmp(name, "trigger")) {
    snprintf(num, nlen, "%lld",
             (long long)(name[0] == 's' ? e->step : e->trigger));
    return num;
  }
  const char *vals[] = {e->rule,  e->rule_type, NULL,   NULL,       e->status,
                        e->trial, e->job,       action, e->summary, e->time};
  for (size_t i = 0; PLACEHOLDERS[i]; i++)
    if (strcmp(name, PLACEHOLDERS[i]) == 0)
      return vals[i] ? vals[i] : "";
  return NULL;
}

static bool known_placeholder(const char *name, smr_strv *arg_names) {
  if (strncmp(name, "args.", 5) == 0 && name[5]) {
    if (arg_names && !smr_strv_contains(arg_names, name + 5))
      smr_strv_push(arg_names, name + 5);
    return true;
  }
  for (size_t i = 0; PLACEHOLDERS[i]; i++)
    if (strcmp(name, PLACEHOLDERS[i]) == 0)
      return true;
  return false;
}

/* Walks a template; with an event appends the expansion to `out`.
 * Returns NULL or the unknown placeholder name (owned). */
static char *walk(const char *t, const smr_act_event *e, const char *action,
                  const smr_act_args *args, smr_buf *out, smr_strv *arg_names) {
  while (*t) {
    if ((t[0] == '{' && t[1] == '{') || (t[0] == '}' && t[1] == '}')) {
      if (out)
        smr_buf_append(out, t, 1);
      t += 2;
      continue;
    }
    if (t[0] != '{') {
      if (out)
        smr_buf_append(out, t, 1);
      t++;
      continue;
    }
    const char *close = strchr(t + 1, '}');
    if (!close)
      return smr_xstrdup(t + 1);
    char *name = smr_xstrndup(t + 1, (size_t)(close - t - 1));
    char num[32];
    const char *v =
        e ? placeholder(name, e, action, args, num, sizeof num) : NULL;
    if (!e && known_placeholder(name, arg_names))
      v = "";
    if (!v)
      return name;
    free(name);
    if (out)
      smr_buf_puts(out, v);
    t = close + 1;
  }
  return NULL;
}

char *smr_act_expand(const char *tmpl, const smr_act_event *e,
                     const char *action, const smr_act_args *args, char **bad) {
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  *bad = walk(tmpl, e, action, args, &b, NULL);
  if (*bad) {
    smr_buf_free(&b);
    return NULL;
  }
  return b.data;
}

char *smr_act_check_template(const char *tmpl, smr_strv *arg_names) {
  return walk(tmpl, NULL, NULL, NULL, NULL, arg_names);
}
