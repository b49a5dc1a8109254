/* rulehost.c - the host API handed to rules, and the per-instance context
 * that collects their reports. */
#include "host/rulehost.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonw.h"
#include "base/safefs.h"
#include "host/data.h"
#include "profiler/profiler.h"

/* ------------------------------------------------------ report objects */

/* A JSON object built by a rule: its members in insertion order, each
 * either rendered value text or a nested object, rendered when the report
 * is written. */
typedef struct json_member {
  char *key;  /* the key, JSON-encoded */
  char *text; /* rendered value, or NULL for a nested object */
  struct smrules_json *kid;
} json_member;

struct smrules_json {
  json_member *m;
  size_t n, cap;
};

static smrules_json *json_new(void) {
  return smr_xcalloc(1, sizeof(smrules_json));
}

static void json_clear(smrules_json *j);

static void json_free(smrules_json *j) {
  if (!j)
    return;
  json_clear(j);
  free(j);
}

static void json_clear(smrules_json *j) {
  for (size_t i = 0; i < j->n; i++) {
    free(j->m[i].key);
    free(j->m[i].text);
    json_free(j->m[i].kid);
  }
  free(j->m);
  j->m = NULL;
  j->n = j->cap = 0;
}

static void json_render(const smrules_json *j, smr_buf *out) {
  smr_buf_puts(out, "{");
  for (size_t i = 0; i < j->n; i++) {
    smr_buf_printf(out, "%s%s:", i ? "," : "", j->m[i].key);
    if (j->m[i].kid)
      json_render(j->m[i].kid, out);
    else
      smr_buf_puts(out, j->m[i].text);
  }
  smr_buf_puts(out, "}");
}

static json_member *json_add(smrules_json *j, const char *key) {
  if (j->n == j->cap) {
    j->cap = j->cap ? j->cap * 2 : 8;
    j->m = smr_xrealloc(j->m, j->cap * sizeof *j->m);
  }
  json_member *m = &j->m[j->n++];
  memset(m, 0, sizeof *m);
  smr_jw kw = {0};
  smr_jw_str(&kw, key ? key : "");
  m->key = smr_jw_finish(&kw);
  return m;
}

/* Append `"key":<value written into w>`. */
static void json_put(smrules_json *j, const char *key, smr_jw *w) {
  json_add(j, key)->text = smr_jw_finish(w);
}

static void api_json_str(smrules_json *j, const char *key, const char *v) {
  smr_jw w = {0};
  smr_jw_str(&w, v);
  json_put(j, key, &w);
}

static void api_json_num(smrules_json *j, const char *key, double v) {
  smr_jw w = {0};
  if (isnan(v))
    smr_jw_str(&w, "nan");
  else if (isinf(v))
    smr_jw_str(&w, v > 0 ? "inf" : "-inf");
  else
    smr_jw_double(&w, v);
  json_put(j, key, &w);
}

static void api_json_int(smrules_json *j, const char *key, int64_t v) {
  smr_jw w = {0};
  smr_jw_int(&w, v);
  json_put(j, key, &w);
}

static void api_json_bool(smrules_json *j, const char *key, bool v) {
  smr_jw w = {0};
  smr_jw_bool(&w, v);
  json_put(j, key, &w);
}

static void api_json_nums(smrules_json *j, const char *key, const double *v,
                          size_t n) {
  smr_jw w = {0};
  smr_jw_arr(&w);
  for (size_t i = 0; i < n; i++)
    smr_jw_double(&w, v[i]);
  smr_jw_arr_end(&w);
  json_put(j, key, &w);
}

static void api_json_ints(smrules_json *j, const char *key, const int64_t *v,
                          size_t n) {
  smr_jw w = {0};
  smr_jw_arr(&w);
  for (size_t i = 0; i < n; i++)
    smr_jw_int(&w, v[i]);
  smr_jw_arr_end(&w);
  json_put(j, key, &w);
}

static void api_json_strs(smrules_json *j, const char *key,
                          const char *const *v, size_t n) {
  smr_jw w = {0};
  smr_jw_arr(&w);
  for (size_t i = 0; i < n; i++)
    smr_jw_str(&w, v[i]);
  smr_jw_arr_end(&w);
  json_put(j, key, &w);
}

static smrules_json *api_json_obj(smrules_json *j, const char *key) {
  json_member *m = json_add(j, key);
  m->kid = json_new();
  return m->kid;
}

static void api_json_null(smrules_json *j, const char *key) {
  smr_jw w = {0};
  smr_jw_null(&w);
  json_put(j, key, &w);
}

static void api_json_raw(smrules_json *j, const char *key, const char *json) {
  json_add(j, key)->text = smr_xstrdup(json && *json ? json : "null");
}

/* ---------------------------------------------------------- the context */

#define MAX_WARNINGS 100

struct smrules_ctx {
  smr_trial *trial;
  char *name, *rule;
  const smr_params *params;
  char *failure;
  /* violations of the step being evaluated, and of the last trigger */
  smrules_json **cur;
  size_t ncur;
  int64_t cur_step;
  char *last_trigger;  /* {"step":..,"violations":[..]} */
  char *first_trigger; /* the same of the first trigger (this run's state) */
  int64_t violations, datapoints;
  bool datapoints_reported;
  smrules_json *details;
  smr_strv warnings;
  int64_t nwarnings;
  char *output_dir;
  bool output_dir_made;
  smrules_live_info live;
  smr_trial **others; /* trials opened with open_trial */
  char **other_paths;
  size_t nothers;
  /* profiler rules (docs/rule-semantics.md#profiler-rules-windows): the reader,
   * the window, the report */
  bool profiler_rule;
  smr_profiler *prof; /* not owned */
  bool in_window;
  int64_t win_index, win_start, win_end;
  smr_sys_events sys;
  smr_fw_events fw;
  smr_strv arg_scratch; /* fw_arg strings of the current fw events */
  smr_strv param_texts; /* param_text results */
  int64_t p_triggered, p_violations, p_datapoints;
  char *rule_params; /* RuleParameters set by the rule */
};

static int log_level = 2;
void smr_log_set_level(int level) {
  log_level = level;
}

smrules_ctx *smr_ctx_new(smr_trial *t, const char *name, const char *rule,
                         const smr_params *params) {
  smrules_ctx *c = smr_xcalloc(1, sizeof *c);
  c->trial = t;
  c->name = smr_xstrdup(name);
  c->rule = smr_xstrdup(rule);
  c->params = params;
  c->details = json_new();
  return c;
}

static void drop_current(smrules_ctx *c) {
  for (size_t i = 0; i < c->ncur; i++)
    json_free(c->cur[i]);
  free(c->cur);
  c->cur = NULL;
  c->ncur = 0;
}

/* Only touches the reader when events are held: the runner may close the
 * reader before it frees the context. */
static void release_events(smrules_ctx *c) {
  if (c->prof && (c->sys.v || c->sys.npins))
    smr_profiler_release_sys(c->prof, &c->sys);
  if (c->prof && (c->fw.v || c->fw.npins))
    smr_profiler_release_fw(c->prof, &c->fw);
  smr_strv_free(&c->arg_scratch);
}

void smr_ctx_free(smrules_ctx *c) {
  if (!c)
    return;
  drop_current(c);
  release_events(c);
  smr_strv_free(&c->param_texts);
  free(c->rule_params);
  for (size_t i = 0; i < c->nothers; i++) {
    smr_trial_close(c->others[i]);
    free(c->other_paths[i]);
  }
  free(c->others);
  free(c->other_paths);
  json_free(c->details);
  smr_strv_free(&c->warnings);
  free(c->last_trigger);
  free(c->first_trigger);
  free(c->failure);
  free(c->output_dir);
  free(c->name);
  free(c->rule);
  free(c);
}

smr_trial *smr_ctx_trial(smrules_ctx *ctx) {
  return ctx->trial;
}
const char *smr_ctx_rule_name(const smrules_ctx *ctx) {
  return ctx->name;
}
smrules_trial *smr_ctx_api_trial(smrules_ctx *ctx) {
  return (smrules_trial *)ctx->trial;
}

void smr_ctx_step_begin(smrules_ctx *c, int64_t step) {
  drop_current(c);
  c->cur_step = step;
}

void smr_ctx_step_end(smrules_ctx *c, int64_t step, bool triggered) {
  if (triggered) {
    smr_buf b = {0};
    smr_buf_printf(&b, "{\"step\":%lld,\"violations\":[", (long long)step);
    for (size_t i = 0; i < c->ncur; i++) {
      if (i)
        smr_buf_puts(&b, ",");
      json_render(c->cur[i], &b);
    }
    smr_buf_puts(&b, "]}");
    if (!c->first_trigger) /* where it started: what one debugs */
      c->first_trigger = smr_xstrdup(b.data);
    free(c->last_trigger);
    c->last_trigger = b.data;
    c->violations += c->ncur ? (int64_t)c->ncur : 1;
  }
  drop_current(c);
}

const char *smr_ctx_failure(const smrules_ctx *c) {
  return c->failure;
}
void smr_ctx_set_failure(smrules_ctx *c, const char *msg) {
  free(c->failure);
  c->failure = msg ? smr_xstrdup(msg) : NULL;
}
int64_t smr_ctx_violations(const smrules_ctx *c) {
  return c->profiler_rule ? c->p_violations : c->violations;
}
int64_t smr_ctx_datapoints(const smrules_ctx *c) {
  if (c->profiler_rule)
    return c->p_datapoints;
  return c->datapoints_reported ? c->datapoints : -1;
}

/* ------------------------------------------------------ profiler rules */

void smr_ctx_set_profiler(smrules_ctx *c, smr_profiler *p) {
  release_events(c);
  c->profiler_rule = true;
  c->prof = p;
}

smr_profiler *smr_ctx_profiler(const smrules_ctx *c) {
  return c->prof;
}

void smr_ctx_window_begin(smrules_ctx *c, int64_t index, int64_t start_us,
                          int64_t end_us) {
  c->in_window = true;
  c->win_index = index;
  c->win_start = start_us;
  c->win_end = end_us;
}

void smr_ctx_window_end(smrules_ctx *c) {
  c->in_window = false;
  release_events(c);
}

/* {"RuleTriggered", "Violations", "Details", "Datapoints",
 * "RuleParameters"} exactly, as the reference profiler rules write it. */
static char *profiler_report_json(smrules_ctx *c) {
  smr_buf b = {0};
  smr_buf_printf(&b, "{\"RuleTriggered\":%lld,\"Violations\":%lld,",
                 (long long)c->p_triggered, (long long)c->p_violations);
  smr_buf_puts(&b, "\"Details\":");
  json_render(c->details, &b);
  smr_buf_printf(&b, ",\"Datapoints\":%lld,", (long long)c->p_datapoints);
  smr_jw w = {0};
  smr_jw_str(&w, c->rule_params                       ? c->rule_params
                 : c->params && c->params->lines.data ? c->params->lines.data
                                                      : "");
  char *p = smr_jw_finish(&w);
  smr_buf_printf(&b, "\"RuleParameters\":%s}", p);
  free(p);
  return b.data;
}
const char *smr_ctx_last_violations(const smrules_ctx *c) {
  return c->last_trigger;
}

void smr_ctx_set_live(smrules_ctx *c, const smrules_live_info *info) {
  c->live = *info;
}

static int api_live_info(smrules_ctx *c, smrules_live_info *out) {
  *out = c->live;
  return SMRULES_NO_TRIGGER;
}

void smr_ctx_set_output_dir(smrules_ctx *c, const char *dir) {
  free(c->output_dir);
  c->output_dir = dir ? smr_xstrdup(dir) : NULL;
  c->output_dir_made = false;
}

void smr_ctx_restore(smrules_ctx *c, int64_t violations, int64_t datapoints,
                     bool datapoints_reported, const char *last_trigger) {
  c->violations = violations;
  /* stored -1 means "never reported": counting starts again from 0 */
  c->datapoints = datapoints_reported ? datapoints : 0;
  c->datapoints_reported = datapoints_reported;
  free(c->last_trigger);
  c->last_trigger = last_trigger ? smr_xstrdup(last_trigger) : NULL;
  free(c->first_trigger); /* not stored: known again from the next trigger */
  c->first_trigger = NULL;
}

void smr_ctx_restore_first(smrules_ctx *c, const char *first_trigger) {
  free(c->first_trigger);
  c->first_trigger = first_trigger ? smr_xstrdup(first_trigger) : NULL;
}

char *smr_ctx_report_json(smrules_ctx *c, const smr_i64v *triggered,
                          int64_t evaluated) {
  if (c->profiler_rule)
    return profiler_report_json(c);
  smr_buf b = {0};
  smr_buf_printf(&b, "{\"RuleTriggered\":%zu,\"Violations\":%lld,",
                 triggered->n, (long long)c->violations);
  smr_buf_puts(&b, "\"Details\":{\"triggered_steps\":[");
  for (size_t i = 0; i < triggered->n && i < 1000; i++)
    smr_buf_printf(&b, "%s%lld", i ? "," : "", (long long)triggered->v[i]);
  smr_buf_puts(&b, "]");
  if (c->last_trigger)
    smr_buf_printf(&b, ",\"last_trigger\":%s", c->last_trigger);
  if (c->first_trigger)
    smr_buf_printf(&b, ",\"first_trigger\":%s", c->first_trigger);
  smr_buf inner = {0};
  json_render(c->details, &inner);
  if (inner.len > 2) { /* merge the rule's own details */
    smr_buf_puts(&b, ",");
    smr_buf_append(&b, inner.data + 1, inner.len - 2);
  }
  smr_buf_free(&inner);
  smr_buf_puts(&b, "},");
  smr_buf_printf(
      &b, "\"Datapoints\":%lld,",
      (long long)(c->datapoints_reported ? c->datapoints : evaluated));
  smr_jw w = {0};
  smr_jw_str(&w,
             c->params && c->params->lines.data ? c->params->lines.data : "");
  char *p = smr_jw_finish(&w);
  smr_buf_printf(&b, "\"RuleParameters\":%s", p);
  free(p);
  if (c->warnings.n) {
    smr_buf_puts(&b, ",\"Warnings\":");
    smr_jw ww = {0};
    smr_jw_arr(&ww);
    for (size_t i = 0; i < c->warnings.n; i++)
      smr_jw_str(&ww, c->warnings.v[i]);
    smr_jw_arr_end(&ww);
    char *s = smr_jw_finish(&ww);
    smr_buf_puts(&b, s);
    free(s);
  }
  smr_buf_puts(&b, "}");
  return b.data;
}

/* -------------------------------------------------------- the api table */

static void api_log(smrules_ctx *c, int level, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level >= 2 && c) {
    if (c->warnings.n < MAX_WARNINGS)
      smr_strv_push(&c->warnings, msg);
    c->nwarnings++;
  }
  if (level >= log_level) {
    static const char *names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "smrules: %s: %s: %s\n", c ? c->name : "-",
            names[level < 0   ? 0
                  : level > 3 ? 3
                              : level],
            msg);
  }
}

static void api_fail(smrules_ctx *c, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  smr_ctx_set_failure(c, msg);
}

static bool api_param_is_set(smrules_ctx *c, const char *name) {
  return c->params && smr_params_is_set(c->params, name);
}

static smrules_json *api_violation(smrules_ctx *c) {
  c->cur = smr_xrealloc(c->cur, (c->ncur + 1) * sizeof *c->cur);
  c->cur[c->ncur] = json_new();
  return c->cur[c->ncur++];
}

static smrules_json *api_details(smrules_ctx *c) {
  return c->details;
}

static void api_datapoints(smrules_ctx *c, int64_t n) {
  c->datapoints += n;
  c->datapoints_reported = true;
}

static smr_trial *T(smrules_trial *t) {
  return (smr_trial *)t;
}

static smrules_trial *api_trial(smrules_ctx *c) {
  return (smrules_trial *)c->trial;
}

/* Other trials are read as finished trials (docs/rules/SimilarAcrossRuns.md)
 * with a private catalog, opened once per path per rule instance. */
static smrules_trial *api_open_trial(smrules_ctx *c, const char *path) {
  for (size_t i = 0; i < c->nothers; i++)
    if (strcmp(c->other_paths[i], path) == 0)
      return (smrules_trial *)c->others[i];
  smr_trial_opts o = {.fresh = true};
  smr_trial *t;
  smr_error e;
  if (smr_trial_open(path, &o, &t, &e) != SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 32];
    smr_error_format(&e, msg, sizeof msg);
    api_fail(c, "cannot open trial %s: %s", path, msg);
    return NULL;
  }
  c->others = smr_xrealloc(c->others, (c->nothers + 1) * sizeof *c->others);
  c->other_paths =
      smr_xrealloc(c->other_paths, (c->nothers + 1) * sizeof(char *));
  c->others[c->nothers] = t;
  c->other_paths[c->nothers++] = smr_xstrdup(path);
  return (smrules_trial *)t;
}

static void to_strlist(smr_strv *v, smrules_strlist *out) {
  out->n = v->n;
  out->v = (const char *const *)v->v;
}

static void api_strlist_free(smrules_strlist *l) {
  for (size_t i = 0; i < l->n; i++)
    free((void *)l->v[i]);
  free((void *)l->v);
  l->v = NULL;
  l->n = 0;
}

static int status_out(int rc) {
  return rc == SMR_OK || rc <= SMR_STEP_UNAVAILABLE ? rc : SMRULES_ERR;
}

static int api_tensor_names(smrules_trial *t, smrules_strlist *out) {
  smr_strv v = {0};
  smr_error e;
  int rc = smr_trial_tensor_names(T(t), &v, &e);
  to_strlist(&v, out);
  return status_out(rc);
}

static int api_collection(smrules_trial *t, const char *name,
                          smrules_strlist *out) {
  smr_strv v = {0};
  smr_error e;
  int rc = smr_trial_collection_members(T(t), name, NULL, &v, &e);
  to_strlist(&v, out);
  return status_out(rc);
}

static int api_select(smrules_trial *t, const smrules_strlist *colls,
                      const smrules_strlist *regexes, smrules_strlist *out) {
  smr_strv v = {0};
  smr_error e;
  int rc = SMR_OK;
  for (size_t i = 0; colls && rc == SMR_OK && i < colls->n; i++)
    rc = smr_trial_collection_members(T(t), colls->v[i], NULL, &v, &e);
  if (rc == SMR_OK && regexes && regexes->n)
    rc = smr_trial_tensor_names_regex(T(t), regexes->v, regexes->n, NULL, &v,
                                      &e);
  smr_strv_sort_unique(&v);
  to_strlist(&v, out);
  return status_out(rc);
}

static bool api_has_tensor(smrules_trial *t, const char *name) {
  return smr_trial_has_tensor(T(t), name);
}

static int api_steps(smrules_trial *t, int mode, int64_t **out, size_t *n) {
  smr_i64v v = {0};
  smr_trial_steps(T(t), mode, false, &v);
  *out = v.v;
  *n = v.n;
  return SMRULES_NO_TRIGGER;
}

static int api_tensor_steps(smrules_trial *t, const char *name, int mode,
                            int64_t **out, size_t *n) {
  smr_i64v v = {0};
  smr_error e;
  int rc = smr_trial_tensor_step_list(T(t), name, mode, false, &v, &e);
  *out = v.v;
  *n = v.n;
  return status_out(rc);
}

static void api_steps_free(int64_t *steps) {
  free(steps);
}

static int api_step_mode(smrules_trial *t, int64_t step, int *mode,
                         int64_t *mode_step) {
  return smr_trial_step_mode(T(t), step, mode, mode_step)
             ? SMRULES_NO_TRIGGER
             : SMRULES_STEP_UNAVAILABLE;
}

static int api_global_step(smrules_trial *t, int mode, int64_t mode_step,
                           int64_t *step) {
  return smr_trial_global_step(T(t), mode, mode_step, step)
             ? SMRULES_NO_TRIGGER
             : SMRULES_STEP_UNAVAILABLE;
}

typedef struct host_tensor {
  smr_tensor t;
  smr_value_loc loc;
} host_tensor;

static int api_value(smrules_trial *t, const char *name, int64_t step, int mode,
                     smrules_tensor *out) {
  memset(out, 0, sizeof *out);
  host_tensor *h = smr_xcalloc(1, sizeof *h);
  smr_error e;
  smr_error_clear(&e);
  int rc = smr_data_value(T(t), name, step, mode, NULL, &h->t, &h->loc, &e);
  if (rc == SMR_ERR_USAGE)
    rc = smr_data_unreadable(&e);
  if (rc != SMR_OK) {
    free(h);
    return rc;
  }
  out->dtype = h->t.dtype;
  out->ndim = h->t.ndim;
  memcpy(out->shape, h->t.shape, sizeof out->shape);
  out->count = h->t.count;
  out->data = h->t.data;
  out->nbytes = h->t.nbytes;
  out->strings = (const uint8_t *const *)h->t.strings;
  out->string_lens = h->t.string_lens;
  out->step = h->loc.step;
  out->mode = h->loc.mode;
  out->mode_step = h->loc.mode_step;
  out->wall_time = h->t.wall_time;
  out->worker = h->loc.worker;
  out->host_ = h;
  return SMRULES_NO_TRIGGER;
}

static void api_release(smrules_tensor *t) {
  host_tensor *h = t->host_;
  if (h) {
    smr_tensor_release(&h->t);
    free(h);
  }
  memset(t, 0, sizeof *t);
}

/* A reduction the value has not (strings) is not saved at the step. */
static int reduction_out(int rc) {
  return rc == SMR_ERR_USAGE ? SMRULES_TENSOR_UNAVAILABLE_FOR_STEP : rc;
}

static int api_reduction(smrules_trial *t, const char *name, int64_t step,
                         int mode, int reduction, bool abs, double *out) {
  bool saved;
  smr_error e;
  smr_error_clear(&e);
  if (reduction < 0 || reduction >= SMR_RED_COUNT_)
    return SMRULES_ERR;
  return reduction_out(smr_data_reduction(T(t), name, step, mode, NULL,
                                          reduction, abs, out, &saved, &e));
}

static const smr_tensor *core_tensor(const smrules_tensor *t) {
  return &((const host_tensor *)t->host_)->t;
}

static double api_get(const smrules_tensor *t, int64_t i) {
  if (!t->host_ || i < 0 || i >= t->count)
    return NAN;
  return smr_tensor_get(core_tensor(t), i);
}

static int api_reduce(const smrules_tensor *t, int reduction, bool abs,
                      double *out) {
  if (!t->host_ || reduction < 0 || reduction >= SMR_RED_COUNT_)
    return SMRULES_ERR;
  smr_error e;
  return smr_tensor_reduce(core_tensor(t), (smr_reduction)reduction, abs, out,
                           &e) == SMR_OK
             ? SMRULES_NO_TRIGGER
             : SMRULES_ERR;
}

static void stats_out(const smr_stats *s, smrules_stats *out);

static int api_stats(const smrules_tensor *t, smrules_stats *out) {
  if (!t->host_)
    return SMRULES_ERR;
  smr_stats s;
  smr_error e;
  if (smr_tensor_stats(core_tensor(t), &s, &e) != SMR_OK)
    return SMRULES_ERR;
  stats_out(&s, out);
  return SMRULES_NO_TRIGGER;
}

/* What a rule is handed: the counts alone are always without the other
 * statistics, whether computed for it or found in a full entry. */
static void what_out(const smr_stats *s, smr_stats_what what,
                     smrules_stats *out) {
  stats_out(s, out);
  if (what == SMR_STATS_COUNTS)
    out->min = out->max = out->sum = out->mean = out->l1 = out->l2 = out->linf =
        NAN;
}

/* Statistics that cannot be computed (strings) fail the rule. */
static int stats_status(int rc) {
  return rc == SMR_OK || rc <= SMR_STEP_UNAVAILABLE ? rc : SMRULES_ERR;
}

static int api_value_stats(smrules_trial *t, const char *name, int64_t step,
                           int mode, smrules_stats *out) {
  memset(out, 0, sizeof *out);
  smr_stats s;
  int rc = smr_data_stats(T(t), name, step, mode, NULL, SMR_STATS_FULL, true,
                          &s, NULL, NULL);
  if (rc == SMR_OK)
    what_out(&s, SMR_STATS_FULL, out);
  return stats_status(rc);
}

/* ---- the same reduction or statistics of many tensors, in parallel ---- */

static int api_reductions(smrules_trial *t, const char *const *names, size_t n,
                          int64_t step, int mode, int reduction, bool abs,
                          double *out, int *status) {
  if (n && (!names || !out || !status))
    return SMRULES_ERR;
  if (reduction < 0 || reduction >= SMR_RED_COUNT_) {
    for (size_t i = 0; i < n; i++)
      status[i] = SMRULES_ERR;
    return SMRULES_NO_TRIGGER;
  }
  smr_data_reductions(T(t), names, n, step, mode, reduction, abs, out, status);
  for (size_t i = 0; i < n; i++)
    status[i] = reduction_out(status[i]);
  return SMRULES_NO_TRIGGER;
}

typedef struct stats_dest {
  smrules_stats *out;
  smr_stats_what what;
} stats_dest;

static void put_stats(void *arg, size_t i, const smr_stats *s) {
  stats_dest *d = arg;
  what_out(s, d->what, &d->out[i]);
}

static int many_stats(smrules_trial *t, const char *const *names, size_t n,
                      int64_t step, int mode, smr_stats_what what,
                      smrules_stats *out, int *status) {
  if (n && (!names || !out || !status))
    return SMRULES_ERR;
  if (n)
    memset(out, 0, n * sizeof *out);
  stats_dest d = {out, what};
  smr_data_stats_many(T(t), names, n, step, mode, what, status, put_stats, &d);
  for (size_t i = 0; i < n; i++)
    status[i] = stats_status(status[i]);
  return SMRULES_NO_TRIGGER;
}

static int api_values_stats(smrules_trial *t, const char *const *names,
                            size_t n, int64_t step, int mode,
                            smrules_stats *out, int *status) {
  return many_stats(t, names, n, step, mode, SMR_STATS_FULL, out, status);
}

static int api_values_counts(smrules_trial *t, const char *const *names,
                             size_t n, int64_t step, int mode,
                             smrules_stats *out, int *status) {
  return many_stats(t, names, n, step, mode, SMR_STATS_COUNTS, out, status);
}

static void stats_out(const smr_stats *ps, smrules_stats *out) {
  smr_stats s = *ps;
  out->count = s.count;
  out->finite = s.finite;
  out->nan = s.nan;
  out->pinf = s.pinf;
  out->ninf = s.ninf;
  out->zeros = s.zeros;
  out->has_finite = s.has_finite;
  out->min = s.min;
  out->max = s.max;
  out->sum = s.sum;
  out->mean = s.mean;
  out->l1 = s.l1;
  out->l2 = s.l2;
  out->linf = s.linf;
}

/* Opens the instance's folder into *fd, made step by step without
 * following a link below the trial (base/safefs.h); SMRULES_ERR, with the
 * rule failed and the reason given, when that cannot be done.  Walked
 * again on every call: a link planted since the last one is refused. */
static int open_output_dir(smrules_ctx *c, int *fd) {
  if (!c->output_dir)
    c->output_dir =
        smr_xasprintf("%s/rule-output/%s", smr_trial_root(c->trial), c->name);
  smr_error e;
  smr_error_clear(&e);
  if (smr_safe_dir_open(c->output_dir, smr_trial_root(c->trial), true, fd,
                        &e) != SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 16];
    smr_error_format(&e, msg, sizeof msg);
    api_fail(c, "output folder: %s", msg);
    return SMRULES_ERR;
  }
  return SMRULES_NO_TRIGGER;
}

static const char *api_output_dir(smrules_ctx *c) {
  if (!c->output_dir_made) {
    int fd;
    if (open_output_dir(c, &fd) != SMRULES_NO_TRIGGER)
      return NULL;
    close(fd);
    c->output_dir_made = true;
  }
  return c->output_dir;
}

/* The plugin names a file below its folder; the host makes the folders
 * and replaces the file itself, so no link the trial's writer planted
 * there (a folder or the file) is followed (base/safefs.h). */
static int api_write_output(smrules_ctx *c, const char *relpath,
                            const void *data, size_t len) {
  if (!data && len) {
    api_fail(c, "write_output: no data for %zu bytes", len);
    return SMRULES_ERR;
  }
  int fd;
  if (open_output_dir(c, &fd) != SMRULES_NO_TRIGGER)
    return SMRULES_ERR;
  smr_error e;
  smr_error_clear(&e);
  int rc = smr_safe_write_below(fd, relpath, data, len, c->output_dir, &e);
  close(fd);
  if (rc != SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 16];
    smr_error_format(&e, msg, sizeof msg);
    api_fail(c, "cannot write %s", msg);
    return SMRULES_ERR;
  }
  return SMRULES_NO_TRIGGER;
}

/* ------------------------------------------------- profiler rules (api) */

static int no_profiler(smrules_ctx *c) {
  api_fail(c, "%s",
           c->profiler_rule ? "no profiler data: pass --profiler DIR, or a "
                              "--trial holding profiler-output/"
                            : "only profiler rules read profiler data");
  return SMRULES_ERR;
}

static int api_window(smrules_ctx *c, int64_t *index, int64_t *start_us,
                      int64_t *end_us) {
  if (!c->profiler_rule || !c->in_window)
    return SMRULES_ERR;
  *index = c->win_index;
  *start_us = c->win_start;
  *end_us = c->win_end;
  return SMRULES_NO_TRIGGER;
}

static int api_system_events(smrules_ctx *c, int64_t start_us, int64_t end_us,
                             const smrules_sys_event **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!c->prof)
    return no_profiler(c);
  smr_profiler_release_sys(c->prof, &c->sys);
  smr_error e;
  smr_error_clear(&e);
  if (smr_profiler_system_events(c->prof, start_us, end_us, &c->sys, &e) !=
      SMR_OK) {
    api_fail(c, "reading system metrics: %s", e.msg);
    return SMRULES_ERR;
  }
  *out = c->sys.v;
  *n = c->sys.n;
  return SMRULES_NO_TRIGGER;
}

static int api_framework_events(smrules_ctx *c, int64_t start_us,
                                int64_t end_us, const smrules_fw_event **out,
                                size_t *n) {
  *out = NULL;
  *n = 0;
  if (!c->prof)
    return no_profiler(c);
  smr_profiler_release_fw(c->prof, &c->fw);
  smr_strv_free(&c->arg_scratch);
  smr_error e;
  smr_error_clear(&e);
  if (smr_profiler_framework_events(c->prof, start_us, end_us, &c->fw, &e) !=
      SMR_OK) {
    api_fail(c, "reading framework metrics: %s", e.msg);
    return SMRULES_ERR;
  }
  *out = c->fw.v;
  *n = c->fw.n;
  return SMRULES_NO_TRIGGER;
}

static int api_fw_arg(smrules_ctx *c, const smrules_fw_event *e,
                      const char *key, smrules_arg *out) {
  return smr_profiler_fw_arg(e, key, out, &c->arg_scratch);
}

static int api_profiler_info(smrules_ctx *c, smrules_profiler_info *out) {
  memset(out, 0, sizeof *out);
  if (!c->prof)
    return no_profiler(c);
  smr_profiler_info(c->prof, out);
  return SMRULES_NO_TRIGGER;
}

static int api_profiler_names(smrules_ctx *c, int what, const char *node,
                              smrules_strlist *out) {
  out->n = 0;
  out->v = NULL;
  if (!c->prof)
    return no_profiler(c);
  smr_strv v = {0};
  smr_profiler_names(c->prof, what, node, &v);
  out->n = v.n;
  out->v = (const char *const *)v.v;
  return SMRULES_NO_TRIGGER;
}

static void api_report_set(smrules_ctx *c, int64_t rule_triggered,
                           int64_t violations, int64_t datapoints) {
  c->p_triggered = rule_triggered;
  c->p_violations = violations;
  c->p_datapoints = datapoints;
}

static smrules_json *api_details_reset(smrules_ctx *c) {
  json_clear(c->details);
  return c->details;
}

static void api_rule_parameters(smrules_ctx *c, const char *text) {
  free(c->rule_params);
  c->rule_params = text ? smr_xstrdup(text) : NULL;
}

/* The value of "name:value" in the host's parameter lines. */
static const char *api_param_text(smrules_ctx *c, const char *name) {
  const char *lines = c->params ? c->params->lines.data : NULL;
  size_t n = strlen(name);
  for (const char *l = lines; l && *l;) {
    const char *eol = strchr(l, '\n');
    size_t len = eol ? (size_t)(eol - l) : strlen(l);
    if (len > n && strncmp(l, name, n) == 0 && l[n] == ':') {
      if (len - n - 1 == 4 && strncmp(l + n + 1, "None", 4) == 0)
        return NULL;
      smr_strv_take(&c->param_texts, smr_xstrndup(l + n + 1, len - n - 1));
      return c->param_texts.v[c->param_texts.n - 1];
    }
    l = eol ? eol + 1 : l + len;
  }
  return NULL;
}

/* Python's str() of a number: integers as integers, nan/inf as Python
 * prints them, every other float as its repr (smr_fmt_double). */
static void api_py_str(double v, bool is_int, char *buf, size_t n) {
  if (!n)
    return;
  if (isnan(v) || isinf(v)) {
    snprintf(buf, n, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    return;
  }
  if (is_int && v == floor(v) && fabs(v) < 9.2e18) {
    snprintf(buf, n, "%lld", (long long)v);
    return;
  }
  smr_fmt_double(v, buf, n);
}

static char *api_json_text(const smrules_json *j) {
  smr_buf b = {0};
  json_render(j, &b);
  return b.data;
}

static const smrules_api API = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_api),
    .log = api_log,
    .fail = api_fail,
    .param_is_set = api_param_is_set,
    .violation = api_violation,
    .details = api_details,
    .datapoints = api_datapoints,
    .json_str = api_json_str,
    .json_num = api_json_num,
    .json_int = api_json_int,
    .json_bool = api_json_bool,
    .json_nums = api_json_nums,
    .json_ints = api_json_ints,
    .json_strs = api_json_strs,
    .json_obj = api_json_obj,
    .trial = api_trial,
    .open_trial = api_open_trial,
    .tensor_names = api_tensor_names,
    .collection = api_collection,
    .select = api_select,
    .strlist_free = api_strlist_free,
    .has_tensor = api_has_tensor,
    .steps = api_steps,
    .tensor_steps = api_tensor_steps,
    .steps_free = api_steps_free,
    .step_mode = api_step_mode,
    .global_step = api_global_step,
    .value = api_value,
    .reduction = api_reduction,
    .release = api_release,
    .get = api_get,
    .reduce = api_reduce,
    .stats = api_stats,
    .output_dir = api_output_dir,
    .window = api_window,
    .system_events = api_system_events,
    .framework_events = api_framework_events,
    .fw_arg = api_fw_arg,
    .profiler_info = api_profiler_info,
    .profiler_names = api_profiler_names,
    .report_set = api_report_set,
    .details_reset = api_details_reset,
    .rule_parameters = api_rule_parameters,
    .param_text = api_param_text,
    .json_null = api_json_null,
    .json_raw = api_json_raw,
    .py_str = api_py_str,
    .json_new = json_new,
    .json_text = api_json_text,
    .json_free = json_free,
    .live_info = api_live_info,
    .value_stats = api_value_stats,
    .write_output = api_write_output,
    .reductions = api_reductions,
    .values_stats = api_values_stats,
    .values_counts = api_values_counts,
};

const smrules_api *smr_host_api(void) {
  return &API;
}
