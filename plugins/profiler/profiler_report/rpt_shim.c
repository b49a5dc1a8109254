/* rpt_shim.c - the function table ProfilerReport gives its sub-rules (see
 * rpt_int.h).  A sub-rule's smrules_ctx pointer is its rpt_sub; report
 * objects are pr_json trees. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpt_int.h"

const smrules_api *rpt_host;
smrules_api rpt_shim;

#define SUB(ctx) ((rpt_sub *)(void *)(ctx))
#define PJ(j) ((pj *)(void *)(j))
#define SJ(p) ((smrules_json *)(void *)(p))

/* ------------------------------------------------------------- logging */

static void sh_log(smrules_ctx *ctx, int level, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  rpt_host->log(SUB(ctx)->win->host_ctx, level, "%s: %s", SUB(ctx)->name, msg);
}

static void sh_fail(smrules_ctx *ctx, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  free(SUB(ctx)->failure);
  SUB(ctx)->failure = strdup(msg);
}

/* ---------------------------------------------------------- parameters */

/* "<Rule>_<name>": the ProfilerReport parameter that carries it. */
static void prefixed(const rpt_sub *s, const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s_%s", s->name, name);
}

static bool sh_param_is_set(smrules_ctx *ctx, const char *name) {
  char k[160];
  prefixed(SUB(ctx), name, k, sizeof k);
  return rpt_host->param_is_set(SUB(ctx)->win->host_ctx, k);
}

static const char *sh_param_text(smrules_ctx *ctx, const char *name) {
  char k[160];
  prefixed(SUB(ctx), name, k, sizeof k);
  return rpt_host->param_text(SUB(ctx)->win->host_ctx, k);
}

/* -------------------------------------------------------------- report */

static smrules_json *sh_violation(smrules_ctx *ctx) {
  return SJ(SUB(ctx)->scratch);
}
static smrules_json *sh_details(smrules_ctx *ctx) {
  return SJ(SUB(ctx)->details);
}
static void sh_datapoints(smrules_ctx *ctx, int64_t n) {
  SUB(ctx)->datapoints += n;
}
static void sh_report_set(smrules_ctx *ctx, int64_t t, int64_t v, int64_t d) {
  SUB(ctx)->triggered = t;
  SUB(ctx)->violations = v;
  SUB(ctx)->datapoints = d;
}
static smrules_json *sh_details_reset(smrules_ctx *ctx) {
  pj_clear(SUB(ctx)->details);
  return SJ(SUB(ctx)->details);
}
static void sh_rule_parameters(smrules_ctx *ctx, const char *text) {
  free(SUB(ctx)->rule_params);
  SUB(ctx)->rule_params = text ? strdup(text) : NULL;
}

static void sh_json_str(smrules_json *j, const char *k, const char *v) {
  pj_set_str(PJ(j), k, v);
}
static void sh_json_num(smrules_json *j, const char *k, double v) {
  pj_set_num(PJ(j), k, v);
}
static void sh_json_int(smrules_json *j, const char *k, int64_t v) {
  pj_set_int(PJ(j), k, v);
}
static void sh_json_bool(smrules_json *j, const char *k, bool v) {
  pj_set_bool(PJ(j), k, v);
}
static void sh_json_nums(smrules_json *j, const char *k, const double *v,
                         size_t n) {
  pj_set_nums(PJ(j), k, v, n);
}
static void sh_json_ints(smrules_json *j, const char *k, const int64_t *v,
                         size_t n) {
  pj_set_ints(PJ(j), k, v, n);
}
static void sh_json_strs(smrules_json *j, const char *k, const char *const *v,
                         size_t n) {
  pj_set_strs(PJ(j), k, v, n);
}
static smrules_json *sh_json_obj(smrules_json *j, const char *k) {
  return SJ(pj_set_obj(PJ(j), k));
}
static void sh_json_null(smrules_json *j, const char *k) {
  pj_set_null(PJ(j), k);
}
static void sh_json_raw(smrules_json *j, const char *k, const char *json) {
  pj_set_raw(PJ(j), k, json);
}

/* ------------------------------------------------------ profiler data */

static int sh_window(smrules_ctx *ctx, int64_t *index, int64_t *start,
                     int64_t *end) {
  const rpt_window *w = SUB(ctx)->win;
  *index = w->index;
  *start = w->start;
  *end = w->end;
  return SMRULES_NO_TRIGGER;
}

/* The window's events come from one host query shared by all sub-rules;
 * another range (no built-in rule asks for one) is forwarded, which ends
 * the validity of the shared events, so they are fetched again later. */
static int sh_system_events(smrules_ctx *ctx, int64_t start, int64_t end,
                            const smrules_sys_event **out, size_t *n) {
  rpt_window *w = SUB(ctx)->win;
  if (start != w->start || end != w->end) {
    w->have_sys = false;
    return rpt_host->system_events(w->host_ctx, start, end, out, n);
  }
  if (!w->have_sys) {
    int rc =
        rpt_host->system_events(w->host_ctx, start, end, &w->sys, &w->nsys);
    if (rc < 0)
      return rc;
    w->have_sys = true;
  }
  *out = w->sys;
  *n = w->nsys;
  return SMRULES_NO_TRIGGER;
}

static int sh_framework_events(smrules_ctx *ctx, int64_t start, int64_t end,
                               const smrules_fw_event **out, size_t *n) {
  rpt_window *w = SUB(ctx)->win;
  if (start != w->start || end != w->end) {
    w->have_fw = false;
    return rpt_host->framework_events(w->host_ctx, start, end, out, n);
  }
  if (!w->have_fw) {
    int rc =
        rpt_host->framework_events(w->host_ctx, start, end, &w->fw, &w->nfw);
    if (rc < 0)
      return rc;
    w->have_fw = true;
  }
  *out = w->fw;
  *n = w->nfw;
  return SMRULES_NO_TRIGGER;
}

static int sh_fw_arg(smrules_ctx *ctx, const smrules_fw_event *e,
                     const char *key, smrules_arg *out) {
  return rpt_host->fw_arg(SUB(ctx)->win->host_ctx, e, key, out);
}

static int sh_profiler_info(smrules_ctx *ctx, smrules_profiler_info *out) {
  return rpt_host->profiler_info(SUB(ctx)->win->host_ctx, out);
}

static int sh_profiler_names(smrules_ctx *ctx, int what, const char *node,
                             smrules_strlist *out) {
  return rpt_host->profiler_names(SUB(ctx)->win->host_ctx, what, node, out);
}

static const char *sh_output_dir(smrules_ctx *ctx) {
  return rpt_host->output_dir(SUB(ctx)->win->host_ctx);
}

/* The sub-rules write no files of their own (ProfilerReport writes their
 * reports); the host's function would be handed a sub-rule's context. */
static int sh_write_output(smrules_ctx *ctx, const char *rel, const void *data,
                           size_t len) {
  sh_fail(ctx, "a rule run by ProfilerReport writes no files (%s)", rel);
  return SMRULES_ERR;
}

/* ------------------------------------- what profiler rules never read */

static smrules_trial *sh_trial(smrules_ctx *ctx) {
  return NULL;
}
static smrules_trial *sh_open_trial(smrules_ctx *ctx, const char *path) {
  return NULL;
}
static int sh_names(smrules_trial *t, smrules_strlist *out) {
  out->n = 0;
  out->v = NULL;
  return SMRULES_ERR;
}
static int sh_collection(smrules_trial *t, const char *n, smrules_strlist *o) {
  return sh_names(t, o);
}
static int sh_select(smrules_trial *t, const smrules_strlist *c,
                     const smrules_strlist *r, smrules_strlist *o) {
  return sh_names(t, o);
}
static bool sh_has_tensor(smrules_trial *t, const char *n) {
  return false;
}
static int sh_steps(smrules_trial *t, int mode, int64_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  return SMRULES_ERR;
}
static int sh_tensor_steps(smrules_trial *t, const char *name, int mode,
                           int64_t **out, size_t *n) {
  return sh_steps(t, mode, out, n);
}
static int sh_step_mode(smrules_trial *t, int64_t s, int *m, int64_t *ms) {
  return SMRULES_STEP_UNAVAILABLE;
}
static int sh_global_step(smrules_trial *t, int m, int64_t ms, int64_t *s) {
  return SMRULES_STEP_UNAVAILABLE;
}
static int sh_value(smrules_trial *t, const char *n, int64_t s, int m,
                    smrules_tensor *out) {
  return SMRULES_TENSOR_UNAVAILABLE;
}
static int sh_query(smrules_trial *t, const char *const *names, size_t n,
                    int64_t s, int m, unsigned what, smrules_values *out,
                    size_t out_size, int *status) {
  for (size_t i = 0; i < n; i++)
    status[i] = SMRULES_TENSOR_UNAVAILABLE;
  return SMRULES_OK;
}

void rpt_shim_build(const smrules_api *host) {
  if (rpt_host == host)
    return;
  rpt_host = host;
  /* An older host's table is shorter than ours: copy what it has, leave
   * the rest NULL (reading sizeof(smrules_api) would read past it). */
  smrules_api s;
  memset(&s, 0, sizeof s);
  memcpy(&s, host, host->struct_size < sizeof s ? host->struct_size : sizeof s);
  s.struct_size = sizeof s;
  /* the host's value readers take a real trial, never the shim's */
  s.log = sh_log;
  s.fail = sh_fail;
  s.param_is_set = sh_param_is_set;
  s.violation = sh_violation;
  s.details = sh_details;
  s.datapoints = sh_datapoints;
  s.json_str = sh_json_str;
  s.json_num = sh_json_num;
  s.json_int = sh_json_int;
  s.json_bool = sh_json_bool;
  s.json_nums = sh_json_nums;
  s.json_ints = sh_json_ints;
  s.json_strs = sh_json_strs;
  s.json_obj = sh_json_obj;
  s.trial = sh_trial;
  s.open_trial = sh_open_trial;
  s.tensor_names = sh_names;
  s.collection = sh_collection;
  s.select = sh_select;
  s.has_tensor = sh_has_tensor;
  s.steps = sh_steps;
  s.tensor_steps = sh_tensor_steps;
  s.step_mode = sh_step_mode;
  s.global_step = sh_global_step;
  s.value = sh_value;
  s.query = sh_query;
  s.output_dir = sh_output_dir;
  s.window = sh_window;
  s.system_events = sh_system_events;
  s.framework_events = sh_framework_events;
  s.fw_arg = sh_fw_arg;
  s.profiler_info = sh_profiler_info;
  s.profiler_names = sh_profiler_names;
  s.report_set = sh_report_set;
  s.details_reset = sh_details_reset;
  s.rule_parameters = sh_rule_parameters;
  s.param_text = sh_param_text;
  s.json_null = sh_json_null;
  s.json_raw = sh_json_raw;
  s.write_output = sh_write_output;
  rpt_shim = s;
}

/* --------------------------------------------------- the report file */

char *rpt_sub_report_json(const rpt_sub *s) {
  rk_text t = {0};
  rk_text_printf(&t,
                 "{\"RuleTriggered\": %lld, \"Violations\": %lld, "
                 "\"Details\": ",
                 (long long)s->triggered, (long long)s->violations);
  pj_render(s->details, &t);
  rk_text_printf(&t, ", \"Datapoints\": %lld, \"RuleParameters\": ",
                 (long long)s->datapoints);
  pj_render_string(s->rule_params ? s->rule_params : "", &t);
  rk_text_printf(&t, "}\n");
  return rk_text_take(&t);
}
