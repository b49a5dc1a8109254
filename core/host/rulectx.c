/* rulectx.c - the context of one rule instance: its lifetime, the step
 * or window being evaluated, what the rule reports (violations, details,
 * datapoints, warnings, failure) and the report JSON made from it
 * (docs/rule-semantics.md#the-report). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "base/warn.h"
#include "host/host_int.h"
#include "host/value_pairs.h"

static int log_level = SMRULES_LOG_WARNING;
/* A log line is cut at 1023 bytes (smr_ctx_log's buffer); a rule prints
 * at most this many on stderr in a run, the rest are counted (warn.h). */
#define SMR_LOG_LINES_PER_RULE 100
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
  c->details = smr_rjson_new();
  return c;
}

static void drop_current(smrules_ctx *c) {
  for (size_t i = 0; i < c->ncur; i++)
    smr_rjson_free(c->cur[i]);
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
  c->sys_held = c->fw_held = false;
}

void smr_ctx_free(smrules_ctx *c) {
  if (!c)
    return;
  smr_ctx_subs_free(c);
  drop_current(c);
  release_events(c);
  smr_strv_free(&c->param_texts);
  free(c->rule_params);
  smr_value_pairs_forget(c); /* before its other trials close */
  for (size_t i = 0; i < c->nothers; i++) {
    smr_trial_close(c->others[i]);
    free(c->other_paths[i]);
  }
  free(c->others);
  free(c->other_paths);
  smr_rjson_free(c->details);
  smr_strv_free(&c->warnings);
  free(c->last_trigger);
  free(c->first_trigger);
  free(c->failure);
  free(c->output_dir);
  free(c->name);
  free(c->rule);
  if (c->own_params)
    smr_params_free(c->own_params);
  free(c->own_params);
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
      smr_rjson_render(c->cur[i], &b);
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
  for (size_t i = 0; i < c->nsubs; i++) /* its sub-rules read it too */
    smr_ctx_set_profiler(c->subs[i], p);
}

smr_profiler *smr_ctx_profiler(const smrules_ctx *c) {
  return c->prof;
}

/* A rule's sub-rules (subrule.c) evaluate the window it evaluates: what
 * they reported at the last one is dropped. */
void smr_ctx_window_begin(smrules_ctx *c, int64_t index, int64_t start_us,
                          int64_t end_us) {
  c->in_window = true;
  c->win_index = index;
  c->win_start = start_us;
  c->win_end = end_us;
  for (size_t i = 0; i < c->nsubs; i++) {
    drop_current(c->subs[i]);
    smr_ctx_window_begin(c->subs[i], index, start_us, end_us);
  }
}

void smr_ctx_window_end(smrules_ctx *c) {
  for (size_t i = 0; i < c->nsubs; i++)
    smr_ctx_window_end(c->subs[i]);
  c->in_window = false;
  release_events(c);
}

/* {"RuleTriggered", "Violations", "Details", "Datapoints",
 * "RuleParameters"} exactly, as the reference profiler rules write it. */
char *smr_ctx_profiler_report_json(smrules_ctx *c) {
  smr_buf b = {0};
  smr_buf_printf(&b, "{\"RuleTriggered\":%lld,\"Violations\":%lld,",
                 (long long)c->p_triggered, (long long)c->p_violations);
  smr_buf_puts(&b, "\"Details\":");
  smr_rjson_render(c->details, &b);
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
  for (size_t i = 0; i < c->nsubs; i++)
    c->subs[i]->live = *info;
}

void smr_ctx_set_live_workers(smrules_ctx *c, const char *const *names,
                              const int64_t *steps, size_t n) {
  c->live_workers = names;
  c->live_newest = steps;
  c->nlive_workers = n;
}

void smr_ctx_attach_system_metrics(smrules_ctx *c, smr_profiler *p) {
  if (c->profiler_rule || c->prof == p)
    return;
  release_events(c);
  c->prof = p;
  c->attached_prof = p != NULL;
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
    return smr_ctx_profiler_report_json(c);
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
  smr_rjson_render(c->details, &inner);
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

/* ------------------------------------------ what the rule reports */

void smr_ctx_log(smrules_ctx *c, int level, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c && c->parent) { /* a sub-rule logs under the rule running it */
    smr_ctx_log(c->parent, level, "%s: %s", c->name, msg);
    return;
  }
  if (level >= SMRULES_LOG_WARNING && c) {
    if (c->warnings.n < MAX_WARNINGS)
      smr_strv_push(&c->warnings, msg);
    c->nwarnings++;
  }
  if (level >= log_level) {
    /* a rule logging in a loop: 100 lines a rule, then a count at exit */
    static const char *names[] = {"debug", "info", "warning", "error"};
    char kind[160];
    snprintf(kind, sizeof kind, "log lines of rule %s", c ? c->name : "-");
    smr_say_limited(kind, SMR_LOG_LINES_PER_RULE, "%s: %s: %s",
                    c ? c->name : "-",
                    names[level < SMRULES_LOG_DEBUG   ? SMRULES_LOG_DEBUG
                          : level > SMRULES_LOG_ERROR ? SMRULES_LOG_ERROR
                                                      : level],
                    msg);
  }
}

void smr_ctx_failf(smrules_ctx *c, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  smr_ctx_set_failure(c, msg);
}
