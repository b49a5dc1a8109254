/* runner.c - rule instances: made from the configuration, their state
 * stored and resumed, their results.  The walk over steps is in
 * runner_loop.c, a live run's threads in runner_live.c. */
#include "run/runner.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "config/params.h"
#include "host/rulehost.h"
#include "host/rulekind.h"
#include "profiler/profiler.h"
#include "run/nodata.h"
#include "run/runner_int.h"
#include "trial/catalog.h"
#include "trial/state.h"

const char *smr_rule_status_name(smr_rule_status s) {
  switch (s) {
  case SMR_RULE_IN_PROGRESS:
    return "InProgress";
  case SMR_RULE_NO_ISSUES:
    return "NoIssuesFound";
  case SMR_RULE_ISSUES:
    return "IssuesFound";
  case SMR_RULE_NO_DATA:
    return "NoData";
  default:
    return "Error";
  }
}

/* ------------------------------------------------------------- setup */

/* What the stored state belongs to: the rule, its parameters and, for
 * scripts and plugins, the code itself.  Step bounds are not part of it:
 * a later run over later steps continues the same rule state, as smdebug's
 * invoke_rule does when called again on the same rule object. */
static char *config_hash(const smr_rule *rule, const char *code_path) {
  smr_sha256 h;
  smr_sha256_init(&h);
  char *head =
      smr_xasprintf("%s\n%s\n", rule->type,
                    rule->params.lines.data ? rule->params.lines.data : "");
  smr_sha256_update(&h, head, strlen(head));
  free(head);
  char *code = NULL;
  size_t len = 0;
  smr_error e;
  if (code_path &&
      smr_read_file(code_path, 64u << 20, &code, &len, &e) == SMR_OK)
    smr_sha256_update(&h, code, len);
  free(code);
  uint8_t d[32];
  smr_sha256_final(&h, d);
  char *hex = smr_xmalloc(65);
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return hex;
}

static int make_instance(smr_runner *r, const smr_config *cfg, size_t idx,
                         smr_instance **out, smr_error *err) {
  const smr_rule_config *rc = &cfg->rules[idx];
  smr_instance *in = smr_xcalloc(1, sizeof *in);
  *out = in;
  in->cfg = rc;
  in->name = smr_xstrdup(rc->name);
  in->last_step = -1;
  in->waiting_at = -1;
  in->start = r->opts.start_step >= 0 ? r->opts.start_step : rc->start_step;
  in->end = r->opts.end_step >= 0 ? r->opts.end_step : rc->end_step;
  smr_rule_env env = {.trial = r->trial,
                      .config_path = cfg->path,
                      .output_dir = r->opts.output_dir,
                      .budgets = &r->opts.lua};
  int st = smr_rule_new(rc, &env, in->name, &in->rule, err);
  if (st == SMR_OK)
    in->config_hash = config_hash(in->rule, in->rule->code);
  return st;
}

static void instance_free(smr_instance *in) {
  if (!in)
    return;
  smr_prof_run_free(in->prof_run);
  smr_rule_free(in->rule); /* its context releases events of `metrics` */
  smr_profiler_close(in->metrics);
  smr_strv_free(&in->live_names);
  free(in->live_steps);
  smr_i64v_free(&in->triggered);
  smr_i64v_free(&in->skipped);
  free(in->message);
  free(in->stored_report);
  free(in->config_hash);
  free(in->name);
  free(in);
}

int smr_runner_new(const smr_config *cfg, smr_trial *trial,
                   const smr_run_opts *opts, smr_runner **out, smr_error *err) {
  *out = NULL;
  smr_runner *r = smr_xcalloc(1, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->db_mu, NULL);
  r->trial = trial;
  r->opts = *opts;
  r->v = smr_xcalloc(cfg->n_rules ? cfg->n_rules : 1, sizeof *r->v);
  int st = smr_state_init(smr_catalog_db(smr_trial_catalog(trial)), err);
  for (size_t i = 0; st == SMR_OK && i < cfg->n_rules; i++) {
    st = make_instance(r, cfg, i, &r->v[i], err);
    r->n = i + 1;
  }
  if (st != SMR_OK) {
    smr_runner_free(r);
    return st;
  }
  *out = r;
  return SMR_OK;
}

void smr_runner_free(smr_runner *r) {
  if (!r)
    return;
  smr_runner_live_stop(r, false);
  for (size_t i = 0; i < r->n; i++)
    instance_free(r->v[i]);
  smr_prof_shared_close(&r->prof_shared);
  free(r->v);
  smr_i64v_free(&r->steps);
  pthread_mutex_destroy(&r->mu);
  pthread_mutex_destroy(&r->db_mu);
  free(r);
}

/* ------------------------------------------------------------- state */

static sqlite3 *db_of(smr_runner *r) {
  return smr_catalog_db(smr_trial_catalog(r->trial));
}

/* Steps of the run in the instance's range up to `last` that were walked
 * but neither evaluated nor skipped: the not-due steps of the runs before
 * (not stored: counted again from the steps, so that a continued run
 * reports what one run does). */
static int64_t not_due_before(const smr_i64v *steps, const smr_instance *in,
                              int64_t last) {
  int64_t walked = 0;
  for (size_t i = 0; i < steps->n; i++) {
    int64_t g = steps->v[i];
    walked += g >= in->start && (in->end < 0 || g < in->end) && g <= last;
  }
  int64_t n = walked - in->evaluated - (int64_t)in->skipped.n;
  return n > 0 ? n : 0;
}

/* Details.first_trigger of the stored report (untrusted: re-encoded). */
static void restore_first_trigger(smr_instance *in, const char *report) {
  cJSON *root = report ? cJSON_Parse(report) : NULL;
  cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "Details");
  cJSON *f = cJSON_GetObjectItemCaseSensitive(d, "first_trigger");
  char *text = cJSON_IsObject(f) ? cJSON_PrintUnformatted(f) : NULL;
  smr_ctx_restore_first(in->rule->ctx, text);
  cJSON_free(text);
  cJSON_Delete(root);
}

/* Resume from stored state where that gives exactly the results of a full
 * evaluation: stateless rules and rules that restored their own state
 * continue after the last step; others start over when there are new
 * steps, and keep the stored report when there are none. */
void runner_resume(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                   int64_t newest_step) {
  smr_rule_state s;
  smr_error e;
  if (r->opts.fresh || smr_state_load(db_of(r), in->name, &s, &e) != 1)
    return;
  if (!s.config_hash || strcmp(s.config_hash, in->config_hash) != 0 ||
      s.status == SMR_RULE_ERROR) {
    smr_rule_state_free(&s);
    return;
  }
  bool restored = in->rule->stateless;
  if (!restored && s.impl_state && in->rule->ops->load_state)
    restored = in->rule->ops->load_state(in->rule->impl, in->rule->ctx,
                                         s.impl_state) == 0;
  bool nothing_new = newest_step <= s.last_step;
  in->restored = restored;
  if (restored || nothing_new) {
    for (size_t i = 0; i < s.triggered.n; i++)
      smr_i64v_push(&in->triggered, s.triggered.v[i]);
    for (size_t i = 0; i < s.skipped.n; i++)
      smr_i64v_push(&in->skipped, s.skipped.v[i]);
    in->evaluated = s.evaluated;
    in->last_step = s.last_step;
    smr_ctx_restore(in->rule->ctx, s.violations, s.datapoints,
                    s.datapoints >= 0, s.last_trigger);
    restore_first_trigger(in, s.report);
    in->not_due = not_due_before(steps, in, s.last_step);
    if (nothing_new && s.report) /* finish() details included */
      in->stored_report = smr_xstrdup(s.report);
  }
  smr_rule_state_free(&s);
}

/* Stored results stand while nothing is new; once new steps arrive
 * (watch), a rule whose own state did not come back starts over. */
void runner_drop_stored(smr_instance *in) {
  free(in->stored_report);
  in->stored_report = NULL;
  if (in->restored)
    return;
  in->triggered.n = in->skipped.n = 0;
  in->evaluated = in->not_due = 0;
  in->last_step = -1;
  smr_ctx_restore(in->rule->ctx, 0, 0, false, NULL);
}

/* The instance's results are written by its own thread only: reading
 * them here needs no lock. */
void runner_save(smr_runner *r, smr_instance *in) {
  pthread_mutex_lock(&r->db_mu);
  runner_save_locked(r, in);
  pthread_mutex_unlock(&r->db_mu);
}

void runner_save_locked(smr_runner *r, smr_instance *in) {
  if (r->opts.fresh)
    return;
  smr_rule_state s;
  memset(&s, 0, sizeof s);
  s.config_hash = in->config_hash;
  s.last_step = in->last_step;
  s.status = in->status;
  s.triggered = in->triggered;
  s.skipped = in->skipped;
  s.evaluated = in->evaluated;
  s.violations = smr_ctx_violations(in->rule->ctx);
  s.datapoints = smr_ctx_datapoints(in->rule->ctx);
  s.last_trigger = (char *)smr_ctx_last_violations(in->rule->ctx);
  s.message = in->message;
  char *impl_state =
      in->rule->ops->save_state
          ? in->rule->ops->save_state(in->rule->impl, in->rule->ctx)
          : NULL;
  s.impl_state = impl_state;
  s.report = smr_instance_report(in);
  smr_error e;
  if (smr_state_save(db_of(r), in->name, &s, &e) != SMR_OK)
    fprintf(stderr, "smrules: %s: cannot store rule state: %s\n", in->name,
            e.msg);
  free(s.report);
  free(impl_state);
}

/* ------------------------------------------------------------ results */

size_t smr_runner_count(const smr_runner *r) {
  return r->n;
}
smr_instance *smr_runner_instance(smr_runner *r, size_t i) {
  return r->v[i];
}
const char *smr_instance_name(const smr_instance *i) {
  return i->name;
}
const char *smr_instance_rule(const smr_instance *i) {
  return i->rule->type;
}
smr_rule_status smr_instance_status(const smr_instance *i) {
  return i->status;
}
const smr_i64v *smr_instance_triggered(const smr_instance *i) {
  return &i->triggered;
}
int64_t smr_instance_evaluated(const smr_instance *i) {
  return i->evaluated;
}
const smr_i64v *smr_instance_skipped(const smr_instance *i) {
  return &i->skipped;
}
int64_t smr_instance_not_due(const smr_instance *i) {
  return i->not_due;
}
void smr_instance_nodata(smr_runner *r, const smr_instance *i,
                         smr_nodata *out) {
  smr_nodata_describe(r->trial, i->rule->param_table, i->rule->settings,
                      &i->rule->params, out);
}
smr_trial *smr_runner_trial(smr_runner *r) {
  return r->trial;
}
bool smr_runner_fresh(const smr_runner *r) {
  return r->opts.fresh;
}
int64_t smr_instance_waiting_at(const smr_instance *i) {
  return i->waiting_at;
}
const char *smr_instance_message(const smr_instance *i) {
  return i->message;
}
const smr_rule_config *smr_instance_config(const smr_instance *i) {
  return i->cfg;
}

char *smr_instance_report(smr_instance *i) {
  if (i->stored_report)
    return smr_xstrdup(i->stored_report);
  return smr_ctx_report_json(i->rule->ctx, &i->triggered, i->evaluated);
}
