/* action_alertmanager.c - the Alertmanager action: POSTs an alert to
 * Alertmanager's v2 API (POST {url}/api/v2/alerts, a JSON array of
 * {labels, annotations, startsAt, endsAt}).  Its labels identify the alert
 * (alertname = the rule instance, job, trial, severity and the labels of
 * the settings), so Alertmanager groups, silences and deduplicates it.
 *
 * An alert without endsAt expires after Alertmanager's resolve_timeout
 * (5 minutes by default): the action repeats at every trigger by default,
 * so the alert stays firing while the rule keeps firing, and `finish`
 * sends every alert it sent again with endsAt = now when the run ends, so
 * Alertmanager shows it resolved.  Credentials (bearer token, basic auth
 * password) come from a private file or an environment variable named in
 * the settings, never from rules.yaml itself. */
#include <cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"

#define SECRET_MAX 4096
#define LABELS_MAX 32

/* An alert sent in this run: what resolving it needs. */
typedef struct am_alert {
  char *rule;
  cJSON *labels;      /* exactly as sent: the alert's identity */
  char *starts_at;    /* the first trigger's time */
  cJSON *annotations; /* the last ones sent */
} am_alert;

typedef struct smr_am_cfg {
  char *url; /* base URL: http(s)://host:port[/prefix] */
  char *severity;
  smr_strv labels; /* name, value, name, value ... */
  char *ca_file;
  char *bearer_token_file, *bearer_token_env;
  char *username, *password_file, *password_env;
  double timeout;
  smr_act_retry retry;
  /* run time (the action worker thread only) */
  am_alert *alerts;
  size_t n_alerts;
} smr_am_cfg;

/* ------------------------------------------------------------ secrets */

static char *read_secret_file(const char *path, const char *what,
                              smr_act_result *r) {
  smr_error why;
  char *text = NULL;
  size_t len = 0;
  if (smr_act_check_secret_file(path, &why) != SMR_OK) {
    smr_act_set(r, SMR_ACT_FAILED, "%s %s: %s", what, path, why.msg);
    return NULL;
  }
  if (smr_read_file(path, SECRET_MAX, &text, &len, &why) != SMR_OK) {
    smr_act_set(r, SMR_ACT_FAILED, "%s %s: cannot read it (at most %d bytes)",
                what, path, SECRET_MAX);
    return NULL;
  }
  while (len && isspace((unsigned char)text[len - 1]))
    text[--len] = '\0';
  return text;
}

static char *read_secret_env(const char *name, const char *what,
                             smr_act_result *r) {
  const char *v = getenv(name);
  if (!v || !*v) {
    smr_act_set(r, SMR_ACT_FAILED, "%s: environment variable %s is not set",
                what, name);
    return NULL;
  }
  return smr_xstrdup(v);
}

static void wipe(char *s) {
  if (s)
    explicit_bzero(s, strlen(s));
  free(s);
}

/* ------------------------------------------------------------- the POST */

static char *alerts_url(const char *base) {
  size_t n = strlen(base);
  while (n && base[n - 1] == '/')
    n--;
  return smr_xasprintf("%.*s/api/v2/alerts", (int)n, base);
}

/* One POST of `body` with the configured TLS and credentials. */
static void post(const smr_am_cfg *c, const char *body, smr_act_result *r) {
  char *bearer = NULL, *password = NULL;
  if (c->bearer_token_file)
    bearer = read_secret_file(c->bearer_token_file, "bearer_token_file", r);
  else if (c->bearer_token_env)
    bearer = read_secret_env(c->bearer_token_env, "bearer_token_env", r);
  if (c->password_file)
    password = read_secret_file(c->password_file, "password_file", r);
  else if (c->password_env)
    password = read_secret_env(c->password_env, "password_env", r);
  bool need_bearer = c->bearer_token_file || c->bearer_token_env;
  bool need_password = c->password_file || c->password_env;
  if ((need_bearer && !bearer) || (need_password && !password)) {
    wipe(bearer);
    wipe(password);
    return; /* r says why */
  }
  char *url = alerts_url(c->url);
  smr_http_post q = {.who = "Alertmanager",
                     .url = url,
                     .body = body,
                     .timeout = c->timeout,
                     .ca_file = c->ca_file,
                     .bearer = bearer,
                     .username = c->username,
                     .password = password};
  smr_act_http_post(&q, r);
  free(url);
  wipe(bearer);
  wipe(password);
}

static char *now_rfc3339(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return smr_xasprintf("%s.%03ldZ", buf, ts.tv_nsec / 1000000);
}

/* ------------------------------------------------------------ alerts */

static cJSON *make_labels(const smr_am_cfg *c, const smr_act_event *e) {
  cJSON *l = cJSON_CreateObject();
  cJSON_AddStringToObject(l, "alertname", e->rule);
  cJSON_AddStringToObject(l, "job", e->job);
  cJSON_AddStringToObject(l, "trial", e->trial);
  cJSON_AddStringToObject(l, "severity", c->severity);
  cJSON_AddStringToObject(l, "rule_type", e->rule_type);
  for (size_t i = 0; i + 1 < c->labels.n; i += 2)
    cJSON_AddStringToObject(l, c->labels.v[i], c->labels.v[i + 1]);
  return l;
}

static cJSON *make_annotations(const smr_act_event *e) {
  cJSON *a = cJSON_CreateObject();
  char num[32];
  cJSON_AddStringToObject(a, "message", e->summary);
  snprintf(num, sizeof num, "%lld", (long long)e->step);
  cJSON_AddStringToObject(a, "step", num);
  snprintf(num, sizeof num, "%lld", (long long)e->trigger);
  cJSON_AddStringToObject(a, "trigger", num);
  cJSON_AddStringToObject(a, "status", e->status);
  return a;
}

static am_alert *find_or_add(smr_am_cfg *c, const smr_act_event *e) {
  for (size_t i = 0; i < c->n_alerts; i++)
    if (strcmp(c->alerts[i].rule, e->rule) == 0)
      return &c->alerts[i];
  c->alerts = smr_xrealloc(c->alerts, (c->n_alerts + 1) * sizeof *c->alerts);
  am_alert *a = &c->alerts[c->n_alerts++];
  a->rule = smr_xstrdup(e->rule);
  a->labels = make_labels(c, e);
  a->starts_at = smr_xstrdup(e->time);
  a->annotations = NULL;
  return a;
}

static cJSON *alert_json(const am_alert *a, const char *ends_at) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "labels", cJSON_Duplicate(a->labels, 1));
  if (a->annotations)
    cJSON_AddItemToObject(o, "annotations", cJSON_Duplicate(a->annotations, 1));
  cJSON_AddStringToObject(o, "startsAt", a->starts_at);
  if (ends_at)
    cJSON_AddStringToObject(o, "endsAt", ends_at);
  return o;
}

static char *print_array(cJSON *arr) {
  char *raw = cJSON_PrintUnformatted(arr);
  char *out = smr_xstrdup(raw ? raw : "[]");
  cJSON_free(raw);
  cJSON_Delete(arr);
  return out;
}

/* ------------------------------------------------------------ running */

static smr_am_cfg *am_cfg(const smr_act_plan *p) {
  return smr_act_plan_settings(p, &smr_action_alertmanager);
}

static void run(const smr_act_exec *x, const smr_act_item *it,
                const smr_act_event *e, smr_act_result *r) {
  (void)it;
  smr_am_cfg *c = am_cfg(x->plan);
  char *where = smr_act_redact_url(c->url);
  if (x->dry_run) {
    smr_act_set(r, SMR_ACT_DRY_RUN,
                "would POST alert %s (severity %s) to Alertmanager %s", e->rule,
                c->severity, where);
    free(where);
    return;
  }
  free(where);
  am_alert *a = find_or_add(c, e);
  cJSON_Delete(a->annotations);
  a->annotations = make_annotations(e);
  cJSON *arr = cJSON_CreateArray();
  cJSON_AddItemToArray(arr, alert_json(a, NULL));
  char *body = print_array(arr);
  post(c, body, r);
  free(body);
}

static void start(const smr_act_exec *x, size_t n_items) {
  (void)n_items;
  smr_am_cfg *c = am_cfg(x->plan);
  if (c)
    c->n_alerts = 0;
}

/* The run ended: every alert sent is resolved (endsAt = now), retried as
 * the action is; the outcome goes to stderr (the summary lists triggers). */
static void finish(const smr_act_exec *x) {
  smr_am_cfg *c = am_cfg(x->plan);
  if (!c || !c->n_alerts || x->dry_run)
    return;
  char *now = now_rfc3339();
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; i < c->n_alerts; i++)
    cJSON_AddItemToArray(arr, alert_json(&c->alerts[i], now));
  char *body = print_array(arr);
  smr_act_result r = {0};
  double delay = c->retry.delay;
  for (int64_t attempt = 0;; attempt++) {
    r.rc = SMR_ACT_OK;
    r.detail[0] = '\0';
    post(c, body, &r);
    if (r.rc != SMR_ACT_RETRY || attempt >= c->retry.retries)
      break;
    struct timespec ts = {(time_t)delay,
                          (long)((delay - (double)(time_t)delay) * 1e9)};
    nanosleep(&ts, NULL);
    delay = delay * 2 > 60 ? 60 : delay * 2; /* as the dispatcher's */
  }
  if (r.rc != SMR_ACT_OK)
    fprintf(stderr,
            "smrules: Alertmanager: could not resolve %zu alert%s: %s\n",
            c->n_alerts, c->n_alerts == 1 ? "" : "s", r.detail);
  else if (x->o && x->o->verbose)
    fprintf(stderr, "smrules: Alertmanager: resolved %zu alert%s (%s)\n",
            c->n_alerts, c->n_alerts == 1 ? "" : "s", r.detail);
  free(body);
  free(now);
}

/* ------------------------------------------------------------ settings */

static bool label_name(const char *s) {
  if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_')
      return false;
  return true;
}

static const char *const RESERVED[] = {"alertname", "job",       "trial",
                                       "severity",  "rule_type", NULL};

static int read_labels(const smr_settings_ctx *c, const smr_setting *s,
                       const smr_node *m, void *field) {
  smr_strv *out = field;
  if (m->type != SMR_NODE_MAP)
    return smr_settings_error(c, m,
                              "%s: expected a map of label names to "
                              "values",
                              s->name);
  if (m->n > LABELS_MAX)
    return smr_settings_error(c, m, "%s: at most %d labels", s->name,
                              LABELS_MAX);
  for (size_t i = 0; i < m->n; i++) {
    const smr_node *v = m->items[i];
    if (!label_name(m->keys[i]) || strncmp(m->keys[i], "__", 2) == 0)
      return smr_settings_error(c, v,
                                "%s: '%s' is not a label name (letters, "
                                "digits and '_', not starting with a digit "
                                "or '__')",
                                s->name, m->keys[i]);
    for (const char *const *r = RESERVED; *r; r++)
      if (strcmp(*r, m->keys[i]) == 0)
        return smr_settings_error(c, v,
                                  "%s: '%s' is set by smrules; choose "
                                  "another name",
                                  s->name, m->keys[i]);
    if (!v->s || v->type == SMR_NODE_LIST || v->type == SMR_NODE_MAP)
      return smr_settings_error(c, v, "%s: %s: expected a single value",
                                s->name, m->keys[i]);
    smr_strv_push(out, m->keys[i]);
    char *value = smr_act_oneline(v->s, 1024);
    smr_strv_take(out, value);
  }
  return SMR_OK;
}

static const smr_setting SETTINGS[] = {
    {.name = "url",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_am_cfg, url),
     .description = "Alertmanager's base URL, http(s)://host:9093 (alerts "
                    "go to /api/v2/alerts under it)"},
    {.name = "severity",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_am_cfg, severity),
     .def = "warning",
     .description = "the alert's severity label"},
    {.name = "labels",
     .type = SMR_SETTING_CUSTOM,
     .offset = offsetof(smr_am_cfg, labels),
     .read = read_labels,
     .schema = "{\"type\":\"object\",\"additionalProperties\":{\"type\":"
               "[\"string\",\"number\",\"boolean\"]}}",
     .description = "extra labels of every alert (team, cluster...)"},
    {.name = "ca_file",
     .type = SMR_SETTING_PATH,
     .offset = offsetof(smr_am_cfg, ca_file),
     .description = "certificates to verify an https:// Alertmanager with"},
    {.name = "bearer_token_file",
     .type = SMR_SETTING_PATH,
     .offset = offsetof(smr_am_cfg, bearer_token_file),
     .flags = SMR_SETTING_SECRET_FILE,
     .description = "a private file holding a bearer token"},
    {.name = "bearer_token_env",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_am_cfg, bearer_token_env),
     .description = "environment variable holding a bearer token"},
    {.name = "username",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_am_cfg, username),
     .description = "basic auth user name (the password from password_file "
                    "or password_env)"},
    {.name = "password_file",
     .type = SMR_SETTING_PATH,
     .offset = offsetof(smr_am_cfg, password_file),
     .flags = SMR_SETTING_SECRET_FILE,
     .description = "a private file holding the basic auth password"},
    {.name = "password_env",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_am_cfg, password_env),
     .description = "environment variable holding the basic auth password"},
    SMR_ACT_TIMEOUT_SETTING(smr_am_cfg),
    SMR_ACT_RETRY_SETTINGS(smr_am_cfg),
    {.type = SMR_SETTING_END}};

static int configure(smr_act_parse *c, const smr_node *m, void *settings) {
  smr_am_cfg *a = settings;
  if (!m)
    return SMR_OK;
  static const char *const HTTP[] = {"http://", "https://", NULL};
  if (a->url && !smr_act_has_scheme(a->url, HTTP))
    return smr_settings_error(&c->sc, smr_node_value(m, "url"),
                              "Alertmanager: url: expected http://... or "
                              "https://...");
  if (a->bearer_token_file && a->bearer_token_env)
    return smr_settings_error(&c->sc, smr_node_value(m, "bearer_token_env"),
                              "Alertmanager: give bearer_token_file or "
                              "bearer_token_env, not both");
  if (a->password_file && a->password_env)
    return smr_settings_error(&c->sc, smr_node_value(m, "password_env"),
                              "Alertmanager: give password_file or "
                              "password_env, not both");
  bool pw = a->password_file || a->password_env;
  if (!a->username != !pw)
    return smr_settings_error(&c->sc, m,
                              "Alertmanager: basic auth needs username and "
                              "password_file or password_env");
  if (a->username && (a->bearer_token_file || a->bearer_token_env))
    return smr_settings_error(&c->sc, m,
                              "Alertmanager: give basic auth or a bearer "
                              "token, not both");
  const char *envs[] = {a->bearer_token_env, a->password_env};
  for (int i = 0; i < 2; i++)
    if (envs[i] && !smr_act_valid_env_name(envs[i]))
      return smr_settings_error(&c->sc, m,
                                "Alertmanager: '%s' is not an environment "
                                "variable name",
                                envs[i]);
  return SMR_OK;
}

static void free_settings(void *settings) {
  smr_am_cfg *c = settings;
  smr_strv_free(&c->labels); /* CUSTOM: the table cannot free it (the
                                plan frees the table's rows) */
  for (size_t i = 0; i < c->n_alerts; i++) {
    free(c->alerts[i].rule);
    free(c->alerts[i].starts_at);
    cJSON_Delete(c->alerts[i].labels);
    cJSON_Delete(c->alerts[i].annotations);
  }
  free(c->alerts);
}

static int parse(smr_act_parse *c, const smr_act_src *s, smr_act_item *it) {
  const smr_am_cfg *a = am_cfg(c->p);
  if (!a || !a->url)
    return smr_settings_error(&c->sc, s->at,
                              "Alertmanager needs actions.Alertmanager.url: "
                              "http(s)://host:9093");
  if (s->value && s->value->type != SMR_NODE_MAP)
    return smr_settings_error(&c->sc, s->value,
                              "Alertmanager takes no value here (its "
                              "settings are under actions.Alertmanager); "
                              "only '{repeat: ...}'");
  it->retry = a->retry;
  it->target = smr_act_redact_url(a->url);
  it->key = smr_xasprintf("Alertmanager:%s", it->target);
  return SMR_OK;
}

static const char *const ITEM_KEYS[] = {NULL};

const smr_action_kind smr_action_alertmanager = {
    .name = "Alertmanager",
    .settings_key = "Alertmanager",
    .settings = SETTINGS,
    .settings_size = sizeof(smr_am_cfg),
    .configure = configure,
    .free_settings = free_settings,
    .item_keys = ITEM_KEYS,
    .parse = parse,
    .default_repeat = {SMR_REPEAT_EVERY, 0},
    .run = run,
    .start = start,
    .finish = finish,
};
