/* runner.c - rule instances and the invocation loop. */
#include "run/runner.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/sha256.h"
#include "base/workers.h"
#include "config/params.h"
#include "host/rulehost.h"
#include "host/rulekind.h"
#include "profiler/profiler.h"
#include "run/nodata.h"
#include "run/runner_profiler.h"
#include "run/schedule.h"
#include "trial/catalog.h"
#include "trial/state.h"

struct smr_instance {
  const smr_rule_config *cfg;
  char *name;
  smr_rule *rule; /* the host side: kind, context, implementation */
  int64_t start, end;
  char *config_hash;
  /* results */
  smr_rule_status status;
  smr_i64v triggered, skipped;
  int64_t evaluated, last_step, waiting_at;
  int64_t not_due; /* steps the rule passes over by design (this run) */
  char *message;
  char *stored_report;    /* reused when nothing new was evaluated */
  bool needs_finish;      /* evaluated something since the last finish */
  bool resumed;           /* stored state was looked at (once per run) */
  bool restored;          /* the rule's own state came back too */
  smr_prof_run *prof_run; /* profiler rules: see runner_profiler.c */
  /* rules on the clock (tick_instance, on the rule's own thread): the
   * system metrics recorded beside a live run, and each worker's newest
   * step as of the last refresh */
  struct smr_profiler *metrics;
  const char **live_names; /* the trial's, valid inside its reader gate */
  int64_t *live_steps;
  /* the walk in progress (walk_begin .. walk_end) */
  bool walk_begun, walk_stopped, walk_evaluated;
  int64_t walk_prev;
};

struct smr_runner {
  smr_trial *trial;
  smr_run_opts opts;
  smr_instance **v;
  size_t n;
  smr_i64v steps;       /* global steps of the current run */
  double last_activity; /* when a new step last appeared (watch) */
  bool warned_cache;    /* the record cache is small for the trial */
  size_t window;        /* lock step: lag + read-ahead, in steps */
  /* profiler rules: the reader they share, and the instance whose turn
   * evaluates them all (SIZE_MAX: none), see evaluate_profilers */
  struct smr_profiler *prof_shared;
  size_t prof_lead;
  /* rules driven by the clock: the system metrics recorded beside a live
   * run (opts.profiler_dir), opened once they exist (see live_metrics) */
  /* steps walked / to walk by step rules in this run (progress display) */
  _Atomic int64_t progress_done, progress_total;
  /* Taken while an instance's results change, and by whoever reads them
   * from another thread (smr_runner_lock_results): in a live run the rules
   * are evaluated by threads of their own (struct live) while the watch
   * shows them. */
  pthread_mutex_t mu;
  /* Taken while the state file is read or written (rule state, a
   * refresh's catalog transaction), before `mu` when both are. */
  pthread_mutex_t db_mu;
  struct live *live; /* NULL: not started (smr_runner_live_start) */
};

static bool live_abandoned(const smr_runner *r);

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
  free(in->live_names);
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
static void resume(smr_runner *r, smr_instance *in, const smr_i64v *steps,
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
static void drop_stored(smr_instance *in) {
  free(in->stored_report);
  in->stored_report = NULL;
  if (in->restored)
    return;
  in->triggered.n = in->skipped.n = 0;
  in->evaluated = in->not_due = 0;
  in->last_step = -1;
  smr_ctx_restore(in->rule->ctx, 0, 0, false, NULL);
}

static void save_locked(smr_runner *r, smr_instance *in);

/* The instance's results are written by its own thread only: reading
 * them here needs no lock. */
static void save(smr_runner *r, smr_instance *in) {
  pthread_mutex_lock(&r->db_mu);
  save_locked(r, in);
  pthread_mutex_unlock(&r->db_mu);
}

static void save_locked(smr_runner *r, smr_instance *in) {
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

/* ---------------------------------------------------------- the loop */

static void set_error(smr_instance *in, const char *fallback) {
  const char *why = smr_ctx_failure(in->rule->ctx);
  free(in->message);
  in->message = smr_xstrdup(why ? why : fallback);
  in->status = SMR_RULE_ERROR;
}

static bool record_step(smr_instance *in, int64_t g, int rc);

/* One step; returns false when the loop must stop.  In a live run the
 * trial is read inside its reader gate (trial.h): the availability here,
 * and whatever the rule reads until its call returns (a rule that reads
 * nothing, or a script between its reads, holds nothing: a rule waiting
 * on something else never holds up a refresh); the result is recorded
 * under the runner's lock. */
static bool invoke_step(smr_runner *r, smr_instance *in, int64_t g) {
  if (r->opts.live) {
    smr_trial_reader_enter(r->trial);
    smr_availability a =
        smr_trial_has_passed_step(r->trial, g, SMR_MODE_GLOBAL);
    smr_trial_reader_leave();
    if (a == SMR_NOT_YET_AVAILABLE) {
      in->waiting_at = g;
      return false;
    }
    if (a == SMR_UNAVAILABLE)
      return true;
  }
  smr_ctx_step_begin(in->rule->ctx, g);
  int rc = in->rule->ops->invoke_at_step(in->rule->impl, in->rule->ctx, g);
  bool fired = rc == SMRULES_TRIGGERED;
  smr_ctx_step_end(in->rule->ctx, g, fired);
  smr_trial_reader_leave();
  pthread_mutex_lock(&r->mu);
  bool go_on = record_step(in, g, rc);
  pthread_mutex_unlock(&r->mu);
  if (go_on && fired && r->opts.on_trigger)
    r->opts.on_trigger(r->opts.on_trigger_arg, in, g);
  return go_on;
}

/* A step's result into the instance; false when the walk must stop. */
static bool record_step(smr_instance *in, int64_t g, int rc) {
  switch (rc) {
  case SMRULES_TRIGGERED:
    smr_i64v_push(&in->triggered, g);
    /* fall through */
  case SMRULES_NO_TRIGGER:
    in->evaluated++;
    break;
  case SMRULES_SKIPPED:
  case SMRULES_STEP_UNAVAILABLE:
  case SMRULES_TENSOR_UNAVAILABLE_FOR_STEP:
  case SMRULES_TENSOR_UNAVAILABLE:
    smr_i64v_push(&in->skipped, g);
    break;
  case SMRULES_NOT_DUE: /* by design: neither evaluated nor missing data */
    in->not_due++;
    break;
  case SMRULES_NO_MORE_DATA:
    return false;
  case SMRULES_STEP_NOT_YET:
    in->waiting_at = g;
    return false;
  default:
    set_error(in, "the rule failed without a message");
    return false;
  }
  in->last_step = g;
  return true;
}

/* ------------------------------------------------ profiler rules (hook) */

static bool is_profiler_rule(const smr_instance *in) {
  return in->rule->profiler;
}

bool smr_instance_is_profiler(const smr_instance *in) {
  return is_profiler_rule(in);
}

typedef struct prof_trigger_arg {
  smr_runner *r;
  smr_instance *in;
} prof_trigger_arg;

static void prof_trigger(void *arg, int64_t window) {
  prof_trigger_arg *a = arg;
  if (a->r->opts.on_trigger)
    a->r->opts.on_trigger(a->r->opts.on_trigger_arg, a->in, window);
}

/* Windows instead of steps (runner_profiler.c); no resume from stored
 * state: a new run evaluates every window again (same results). */
/* A rule that fired is IssuesFound from then on, also while it waits
 * for more steps: its status never depends on how many runs it took. */
static bool instance_wants_time(const smr_instance *in);

/* Finished without evaluating anything is NoData, not a pass
 * (docs/rule-semantics.md#rules-that-evaluate-nothing); a rule driven by
 * the clock evaluates nothing by steps and is left out. */
static smr_rule_status live_status(const smr_instance *in) {
  if (in->triggered.n)
    return SMR_RULE_ISSUES;
  if (in->waiting_at >= 0)
    return SMR_RULE_IN_PROGRESS;
  if (in->evaluated == 0 && !instance_wants_time(in))
    return SMR_RULE_NO_DATA;
  return SMR_RULE_NO_ISSUES;
}

static smr_prof_loop profiler_loop(smr_runner *r, smr_instance *in,
                                   prof_trigger_arg *ta) {
  return (smr_prof_loop){.dir = r->opts.profiler_dir,
                         .shared = &r->prof_shared,
                         .live = r->opts.live,
                         .final_window = !r->opts.sagemaker_windows,
                         .scan_interval_us = in->rule->window_us,
                         .start = in->start,
                         .end = in->end,
                         .ctx = in->rule->ctx,
                         .ops = in->rule->ops,
                         .impl = in->rule->impl,
                         .triggered = &in->triggered,
                         .evaluated = &in->evaluated,
                         .last_step = &in->last_step,
                         .waiting_at = &in->waiting_at,
                         .on_trigger = prof_trigger,
                         .on_trigger_arg = ta,
                         .results_mu = &r->mu};
}

/* The rule's next window, if there is one to evaluate now; false when the
 * rule is done for this pass (finished, waiting for data, or failed). */
static bool profiler_window(smr_runner *r, smr_instance *in) {
  int64_t k = in->last_step + 1 > in->start ? in->last_step + 1 : in->start;
  if (in->end >= 0 && k >= in->end)
    return false;
  prof_trigger_arg ta = {r, in};
  smr_prof_loop l = profiler_loop(r, in, &ta);
  l.end = k + 1;
  int64_t last = in->last_step;
  char *msg = NULL;
  bool more = true;
  if (smr_prof_loop_run(&in->prof_run, &l, &msg) != SMR_OK) {
    smr_ctx_set_failure(in->rule->ctx, msg);
    pthread_mutex_lock(&r->mu);
    set_error(in, "the rule failed");
    pthread_mutex_unlock(&r->mu);
    more = false;
  }
  free(msg);
  return more && in->last_step != last;
}

/* Every profiler rule, window by window side by side: window k of each
 * rule before window k + 1 of any.  They share one reader, whose cache then
 * holds the files around window k for all of them, so each file is read
 * (fetched, from S3) and parsed once per run however many rules ask for
 * it; rule after rule, each would read the whole job again.  Each rule's
 * windows, triggers and results are those it has alone. */
static void evaluate_profilers(smr_runner *r) {
  bool *active = smr_xcalloc(r->n, sizeof *active);
  int64_t *before = smr_xcalloc(r->n, sizeof *before);
  for (size_t i = 0; i < r->n; i++) {
    active[i] = is_profiler_rule(r->v[i]) && r->v[i]->status != SMR_RULE_ERROR;
    before[i] = r->v[i]->evaluated;
  }
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < r->n; i++) {
      if (!active[i])
        continue;
      active[i] = profiler_window(r, r->v[i]);
      any |= active[i];
    }
  }
  for (size_t i = 0; i < r->n; i++) {
    smr_instance *in = r->v[i];
    if (!is_profiler_rule(in))
      continue;
    pthread_mutex_lock(&r->db_mu);
    pthread_mutex_lock(&r->mu);
    if (in->status != SMR_RULE_ERROR)
      in->status = live_status(in);
    in->needs_finish |= in->evaluated > before[i];
    save_locked(r, in);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&r->db_mu);
  }
  free(before);
  free(active);
}

static smrules_live_info live_info(smr_runner *r);

/* Steps between two saved ones were never written; live, smdebug waits at
 * the first of them while the step after the gap is not complete yet
 * (has_passed_step is NOT_YET_AVAILABLE there, docs/formats.md#step-states). */
static bool waits_in_gap(smr_runner *r, int64_t prev, int64_t g) {
  return g > prev + 1 &&
         smr_trial_has_passed_step(r->trial, prev + 1, SMR_MODE_GLOBAL) ==
             SMR_NOT_YET_AVAILABLE;
}

/* A step instance's walk over the run's step list, in turns (schedule.h):
 * walk_begin once, walk_steps for each turn, walk_end when it is over. */
static void walk_begin(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                       const smrules_live_info *li) {
  int64_t newest = steps->n ? steps->v[steps->n - 1] : -1;
  pthread_mutex_lock(&r->db_mu);
  pthread_mutex_lock(&r->mu);
  if (!in->resumed) {
    in->resumed = true;
    resume(r, in, steps, newest);
  }
  if (in->stored_report && newest > in->last_step)
    drop_stored(in);
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_unlock(&r->db_mu);
  smr_ctx_set_live(in->rule->ctx, li);
  in->waiting_at = -1;
  in->walk_stopped = in->walk_evaluated = false;
  int64_t first = in->start > 0 ? in->start : 0;
  in->walk_prev = in->last_step >= first ? in->last_step : first - 1;
}

/* Steps from position *pos until `limit`; true when the walk is over.
 * Steps already evaluated (resumed state) are passed over freely: only
 * evaluated steps count against the turn. */
static bool walk_steps(smr_runner *r, smr_instance *in, const smr_i64v *steps,
                       size_t *pos, size_t limit) {
  if (in->stored_report)
    return true;
  while (*pos < steps->n) {
    int64_t g = steps->v[*pos];
    if (g <= in->last_step || g < in->start) {
      (*pos)++;
      if (g >= in->start && (in->end < 0 || g < in->end))
        r->progress_done++; /* resumed: done before */
      continue;
    }
    if (*pos >= limit)
      return false;
    if (in->end >= 0 && g >= in->end)
      return true;
    smr_trial_reader_enter(r->trial);
    bool gap = r->opts.live && waits_in_gap(r, in->walk_prev, g);
    smr_trial_reader_leave();
    if (gap) {
      in->waiting_at = in->walk_prev + 1;
      in->walk_stopped = true;
      return true;
    }
    if ((r->opts.interrupted && r->opts.interrupted()) || live_abandoned(r)) {
      in->waiting_at = g; /* not evaluated: InProgress, resumed there */
      in->walk_stopped = true;
      return true;
    }
    in->walk_evaluated = true;
    in->walk_stopped = !invoke_step(r, in, g);
    in->walk_prev = g;
    (*pos)++;
    r->progress_done++;
    if (in->walk_stopped)
      return true;
  }
  return true;
}

static void walk_end(smr_runner *r, smr_instance *in) {
  /* Live, smdebug's invoker goes on to the next integer step and waits
   * there until training writes it or ends. */
  int64_t next = in->walk_prev + 1;
  smr_trial_reader_enter(r->trial);
  bool all = smr_trial_loaded_all_steps(r->trial);
  smr_trial_reader_leave();
  /* the status the watch shows is the one stored: a run killed once it
   * printed "IssuesFound" resumes after that trigger */
  pthread_mutex_lock(&r->db_mu);
  pthread_mutex_lock(&r->mu);
  if (r->opts.live && !in->walk_stopped && !in->stored_report && !all &&
      (in->end < 0 || next < in->end))
    in->waiting_at = next;
  if (in->status != SMR_RULE_ERROR) {
    in->status = live_status(in);
  }
  in->needs_finish |= in->walk_evaluated;
  save_locked(r, in);
  pthread_mutex_unlock(&r->mu);
  pthread_mutex_unlock(&r->db_mu);
}

/* One turn of one instance (smr_sched_fn). */
static bool run_turn(void *arg, size_t u, size_t *pos, size_t limit) {
  smr_runner *r = arg;
  smr_instance *in = r->v[u];
  if (is_profiler_rule(in)) {
    /* the lead's turn evaluates them all (evaluate_profilers); the
     * others' turns are over at once, touching nothing the lead's thread
     * changes */
    if (u == r->prof_lead)
      evaluate_profilers(r);
    return true;
  }
  if (in->status == SMR_RULE_ERROR)
    return true;
  if (*pos == 0 && !in->walk_begun) {
    in->walk_begun = true;
    smrules_live_info li = live_info(r);
    walk_begin(r, in, &r->steps, &li);
  }
  if (!walk_steps(r, in, &r->steps, pos, limit))
    return false;
  walk_end(r, in);
  in->walk_begun = false;
  return true;
}

/* In lock step, the read-ahead reaches at most `window` steps past the
 * slowest rule (smr_sched.slowest_moved). */
static void read_ahead_horizon(void *arg, size_t pos) {
  smr_runner *r = arg;
  if (!r->steps.n)
    return;
  size_t last = pos + r->window < r->steps.n ? pos + r->window : r->steps.n - 1;
  smr_trial_set_prefetch_horizon(r->trial, r->steps.v[last]);
}

/* Lock step when rules share a remote trial's record cache (schedule.h):
 * each record is then fetched once for all rules.  The records between
 * the slowest rule and the furthest read-ahead must stay cached until the
 * slowest rule has read them, so lag and read-ahead together span half of
 * the steps the cache holds (the lag a quarter, the read-ahead the rest);
 * the other half is left for rules that look back or ahead and
 * for steps larger than the mean.  Measured on the 1 GB bench trial
 * (64 MB cache, 7 steps): spans of 6-8 steps evicted records before the
 * slowest rule read them and 17-70 % were fetched twice. */
#define LOCAL_LAG 2

static void choose_order(smr_runner *r, smr_sched *s) {
  size_t positional = 0;
  for (size_t i = 0; i < r->n; i++)
    positional += !is_profiler_rule(r->v[i]);
  size_t cached = smr_trial_cached_steps(r->trial);
  /* Local trials too: rules asking for the same value's statistics at
   * about the same time share them (trial/stats_cache.h). */
  bool lock = r->opts.schedule == SMR_SCHEDULE_STEPS ||
              (r->opts.schedule == SMR_SCHEDULE_AUTO && positional > 1);
  /* only step rules read records, and only a trial with more steps than
   * the cache holds makes a second one fetch them again */
  if (cached && cached < 4 && positional > 1 && r->steps.n > cached &&
      !r->warned_cache) {
    r->warned_cache = true;
    fprintf(stderr,
            "smrules: warning: the S3 record cache holds %zu step(s) of this "
            "trial; rules will fetch records more than once (raise "
            "SMRULES_S3_CACHE_MB, docs/s3.md)\n",
            cached);
  }
  size_t quarter = cached / 4 > 64 ? 64 : cached / 4 ? cached / 4 : 1;
  size_t half = cached / 2 > 128 ? 128 : cached / 2;
  half = half > quarter ? half - quarter : 1; /* lag + read-ahead <= half */
  s->block = lock ? 1 : SMR_SCHED_ALL;
  /* A local trial has no record cache to span: a lag of 2 lets a thread
   * that has finished its turns of step s start on s + 1 instead of
   * waiting for the last long turn of s.  On the 1 GB bench trial (twelve
   * and twenty rules, two threads) the threads then waited 0.01 s instead
   * of 0.05-0.07 s, the runs took 0.95 and 0.92 of the time, the same
   * records were shared, and peak memory did not grow. */
  s->lag = cached ? quarter : LOCAL_LAG;
  /* Rule after rule, each rule would need its own read-ahead window and
   * the cache would not bound them: read-ahead belongs to lock step. */
  smr_trial_set_prefetch(r->trial, lock && cached ? half : 0, r->opts.end_step);
  smr_trial_share_records(r->trial, lock && positional > 1);
  if (lock && cached) {
    r->window = s->lag + half;
    s->slowest_moved = read_ahead_horizon;
    read_ahead_horizon(r, 0);
  }
}

/* How many (instance, step) pairs the step rules walk in this run. */
static void count_progress_total(smr_runner *r, const bool *positional) {
  int64_t total = 0;
  for (size_t i = 0; i < r->n; i++) {
    const smr_instance *in = r->v[i];
    for (size_t k = 0; positional[i] && k < r->steps.n; k++)
      total += r->steps.v[k] >= in->start &&
               (in->end < 0 || r->steps.v[k] < in->end);
  }
  r->progress_done = 0;
  r->progress_total = total;
}

void smr_runner_progress(smr_runner *r, int64_t *done, int64_t *total) {
  *done = r->progress_done;
  *total = r->progress_total;
}

int smr_runner_run(smr_runner *r, smr_error *err) {
  (void)err;
  int jobs =
      r->opts.jobs > 0 ? r->opts.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
  bool *positional = smr_xcalloc(r->n ? r->n : 1, sizeof *positional);
  r->prof_lead = SIZE_MAX;
  int step_rules = 0;
  for (size_t i = 0; i < r->n; i++) {
    positional[i] = !is_profiler_rule(r->v[i]);
    step_rules += positional[i];
    r->v[i]->walk_begun = false;
    if (!positional[i] && r->prof_lead == SIZE_MAX)
      r->prof_lead = i;
  }
  /* A rule's loops over many tensors (api->query) use the threads
   * that no rule keeps busy: with as many rules as threads, helpers would
   * only compete with them (and hold buffers of their own). */
  smr_workers_set(jobs > step_rules ? jobs - step_rules : 0);
  r->steps.n = 0;
  smr_trial_steps(r->trial, SMR_MODE_GLOBAL, true, &r->steps);
  count_progress_total(r, positional);
  smr_sched s = {.units = r->n,
                 .positional = positional,
                 .jobs = jobs < 1 ? 1 : jobs,
                 .run = run_turn,
                 .arg = r};
  choose_order(r, &s);
  smr_sched_run(&s);
  free(positional);
  return SMR_OK;
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The live facts every rule can ask for (api->live_info). */
static smrules_live_info live_info(smr_runner *r) {
  smr_i64v steps = {0};
  smr_trial_steps(r->trial, SMR_MODE_GLOBAL, true, &steps);
  smrules_live_info li = {
      .live = r->opts.live,
      .training_ended = smr_trial_end_marker(r->trial),
      .now = wall_now(),
      .last_activity = r->last_activity > 0 ? r->last_activity : wall_now(),
      .newest_step = steps.n ? steps.v[steps.n - 1] : -1};
  smr_i64v_free(&steps);
  return li;
}

static bool instance_wants_time(const smr_instance *in) {
  return smr_rule_wants_time(in->rule);
}

/* The system metrics being recorded beside a live run (smrules monitor
 * into the job's profiler folder, run --profile), for a rule on the
 * clock; NULL until the folder exists.  A reader per instance: each is
 * used by its rule's own thread only.  Quiet: a profiler rule of the run
 * reports the data's problems. */
static struct smr_profiler *live_metrics(smr_runner *r, smr_instance *in) {
  if (in->metrics || !r->opts.live || !r->opts.profiler_dir)
    return in->metrics;
  /* a small cache: it reads only the span of a silence, when a rule fires */
  smr_profiler_opts po = {.live = true, .quiet = true, .cache_bytes = 2 << 20};
  smr_error err;
  smr_error_clear(&err);
  if (smr_profiler_open(r->opts.profiler_dir, &po, &in->metrics, &err) !=
      SMR_OK)
    in->metrics = NULL; /* not there yet: tried again at the next tick */
  return in->metrics;
}

/* Each worker's newest step (trial.h), for api->live_workers: read inside
 * the trial's reader gate, which the rule's thread holds until its call is
 * over, so the names stay the trial's own meanwhile. */
static void live_workers(smr_runner *r, smr_instance *in) {
  smr_trial_reader_enter(r->trial);
  const char *name = NULL;
  int64_t step = 0;
  size_t n = smr_trial_worker_latest(r->trial, 0, &name, &step);
  in->live_names = smr_xrealloc(in->live_names, (n ? n : 1) * sizeof(char *));
  in->live_steps = smr_xrealloc(in->live_steps, (n ? n : 1) * sizeof(int64_t));
  for (size_t i = 0; i < n; i++)
    smr_trial_worker_latest(r->trial, i, &in->live_names[i],
                            &in->live_steps[i]);
  smr_ctx_set_live_workers(in->rule->ctx, in->live_names, in->live_steps, n);
}

static void tick_instance(smr_runner *r, smr_instance *in,
                          const smrules_live_info *li) {
  if (!instance_wants_time(in) || in->status == SMR_RULE_ERROR)
    return;
  int64_t at = li->newest_step >= 0 ? li->newest_step : 0;
  live_workers(r, in);
  smr_ctx_attach_system_metrics(in->rule->ctx, live_metrics(r, in));
  smr_ctx_set_live(in->rule->ctx, li);
  smr_ctx_step_begin(in->rule->ctx, at);
  int rc =
      in->rule->ops->invoke_at_time(in->rule->impl, in->rule->ctx, li->now);
  smr_trial_reader_leave();
  /* one trigger per step: a stall that goes on is the same trigger */
  bool fired = rc == SMRULES_TRIGGERED &&
               !(in->triggered.n && in->triggered.v[in->triggered.n - 1] == at);
  smr_ctx_step_end(in->rule->ctx, at, fired);
  pthread_mutex_lock(&r->mu);
  if (rc < 0)
    set_error(in, "the rule failed without a message");
  if (rc >= 0 && fired) {
    smr_i64v_push(&in->triggered, at);
    in->status = SMR_RULE_ISSUES; /* fired: so it stays (live_status) */
    in->needs_finish = true;
  }
  pthread_mutex_unlock(&r->mu);
  if (rc >= 0 && fired && r->opts.on_trigger)
    r->opts.on_trigger(r->opts.on_trigger_arg, in, at);
}

bool smr_runner_has_clock_rules(const smr_runner *r) {
  for (size_t i = 0; i < r->n; i++)
    if (instance_wants_time(r->v[i]))
      return true;
  return false;
}

static void live_tick(smr_runner *r, const smrules_live_info *li);

void smr_runner_tick(smr_runner *r, double last_activity) {
  r->last_activity = last_activity;
  smrules_live_info li = live_info(r);
  if (r->live) { /* each rule's own thread calls it */
    live_tick(r, &li);
    return;
  }
  for (size_t i = 0; i < r->n; i++)
    tick_instance(r, r->v[i], &li);
}

/* A rule's finish() adds its summary to the report once, when evaluation
 * is over (after one run, or when a watch ends), not after every pass. */
void smr_runner_finish(smr_runner *r) {
  for (size_t i = 0; i < r->n; i++) {
    smr_instance *in = r->v[i];
    if (!in->needs_finish)
      continue;
    in->needs_finish = false;
    if (in->status != SMR_RULE_ERROR && in->rule->ops->finish &&
        in->rule->ops->finish(in->rule->impl, in->rule->ctx) < 0)
      set_error(in, "the rule's finish step failed");
    save(r, in);
  }
}

/* ----------------------------------------------------- live evaluation */

/* A live run (run --watch) evaluates each step rule in a thread of its
 * own, and the profiler rules in one more between them, so that a rule
 * that takes long (a slow script, a plugin waiting on something) delays
 * no other rule's steps, triggers or actions: the watch refreshes the
 * trial and hands out work (smr_runner_live_dispatch, smr_runner_tick)
 * without waiting for any rule.  A thread still busy when new steps
 * arrive walks them when its call is over; ticks that come meanwhile
 * are one tick.  The trial is refreshed while rules run: each reads it
 * inside the trial's reader gate (trial.h), results are written under
 * `mu` and the state file under `db_mu`. */
typedef struct live_worker {
  smr_runner *r;
  size_t u;       /* its instance */
  bool profilers; /* evaluates every profiler rule (evaluate_profilers) */
  pthread_t th;
  bool walk_due, tick_due; /* under live.mu */
  smr_i64v steps;          /* its copy of the steps, taken per walk */
} live_worker;

struct live {
  pthread_mutex_t mu;
  pthread_cond_t work;
  live_worker *w;
  size_t n;
  smr_i64v steps;       /* the steps after the latest refresh */
  smrules_live_info li; /* the live facts of the latest dispatch or tick */
  bool quit;
  _Atomic bool abandon;
};

static bool live_abandoned(const smr_runner *r) {
  return r->live && atomic_load(&r->live->abandon);
}

static bool worker_wants_time(const live_worker *w) {
  const smr_runner *r = w->r;
  if (!w->profilers)
    return instance_wants_time(r->v[w->u]);
  for (size_t i = 0; i < r->n; i++)
    if (is_profiler_rule(r->v[i]) && instance_wants_time(r->v[i]))
      return true;
  return false;
}

static void live_walk(live_worker *w, const smrules_live_info *li) {
  smr_runner *r = w->r;
  if (w->profilers) {
    evaluate_profilers(r);
    return;
  }
  smr_instance *in = r->v[w->u];
  if (in->status == SMR_RULE_ERROR)
    return;
  walk_begin(r, in, &w->steps, li);
  size_t pos = 0;
  walk_steps(r, in, &w->steps, &pos, SIZE_MAX);
  walk_end(r, in);
}

static void live_tick_worker(live_worker *w, const smrules_live_info *li) {
  smr_runner *r = w->r;
  for (size_t i = 0; i < r->n; i++)
    if (w->profilers ? is_profiler_rule(r->v[i]) : i == w->u)
      tick_instance(r, r->v[i], li);
}

static void *live_main(void *arg) {
  live_worker *w = arg;
  struct live *lv = w->r->live;
  smr_trial_reader_thread(true);
  pthread_mutex_lock(&lv->mu);
  for (;;) {
    while (!w->walk_due && !w->tick_due && !lv->quit)
      pthread_cond_wait(&lv->work, &lv->mu);
    if (!w->walk_due && !w->tick_due)
      break; /* quit, with nothing left to do */
    bool walk = w->walk_due, tick = w->tick_due;
    w->walk_due = w->tick_due = false;
    if (walk) {
      w->steps.n = 0;
      for (size_t i = 0; i < lv->steps.n; i++)
        smr_i64v_push(&w->steps, lv->steps.v[i]);
    }
    smrules_live_info li = lv->li;
    pthread_mutex_unlock(&lv->mu);
    if (walk)
      live_walk(w, &li);
    if (tick)
      live_tick_worker(w, &li);
    /* a script's load_state or save_state may have read the trial: never
     * sleep inside its gate, a refresh would wait for ever */
    smr_trial_reader_leave();
    pthread_mutex_lock(&lv->mu);
  }
  pthread_mutex_unlock(&lv->mu);
  smr_trial_reader_thread(false);
  return NULL;
}

static void live_free(struct live *lv) {
  for (size_t i = 0; i < lv->n; i++)
    smr_i64v_free(&lv->w[i].steps);
  free(lv->w);
  smr_i64v_free(&lv->steps);
  pthread_cond_destroy(&lv->work);
  pthread_mutex_destroy(&lv->mu);
  free(lv);
}

bool smr_runner_live_start(smr_runner *r) {
  if (r->live)
    return true;
  struct live *lv = smr_xcalloc(1, sizeof *lv);
  pthread_mutex_init(&lv->mu, NULL);
  pthread_cond_init(&lv->work, NULL);
  lv->w = smr_xcalloc(r->n + 1, sizeof *lv->w);
  bool profilers = false;
  for (size_t i = 0; i < r->n; i++) {
    if (is_profiler_rule(r->v[i])) {
      profilers = true;
      continue;
    }
    lv->w[lv->n++] = (live_worker){.r = r, .u = i};
  }
  if (profilers)
    lv->w[lv->n++] = (live_worker){.r = r, .profilers = true};
  /* the data helpers get the cores no rule keeps busy, as offline */
  int jobs =
      r->opts.jobs > 0 ? r->opts.jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
  smr_workers_set(jobs > (int)lv->n ? jobs - (int)lv->n : 0);
  r->live = lv;
  for (size_t i = 0; i < lv->n; i++) {
    if (pthread_create(&lv->w[i].th, NULL, live_main, &lv->w[i]) != 0) {
      /* evaluate as before, one pass at a time */
      fprintf(stderr, "smrules: warning: cannot start a thread per rule; "
                      "rules are evaluated one pass at a time\n");
      lv->n = i;
      smr_runner_live_stop(r, false);
      return false;
    }
  }
  return true;
}

void smr_runner_live_dispatch(smr_runner *r) {
  struct live *lv = r->live;
  if (!lv) {
    smr_error e;
    smr_runner_run(r, &e);
    return;
  }
  smrules_live_info li = live_info(r);
  pthread_mutex_lock(&lv->mu);
  lv->steps.n = 0;
  smr_trial_steps(r->trial, SMR_MODE_GLOBAL, true, &lv->steps);
  lv->li = li;
  for (size_t i = 0; i < lv->n; i++)
    lv->w[i].walk_due = true;
  pthread_cond_broadcast(&lv->work);
  pthread_mutex_unlock(&lv->mu);
}

static void live_tick(smr_runner *r, const smrules_live_info *li) {
  struct live *lv = r->live;
  pthread_mutex_lock(&lv->mu);
  lv->li = *li;
  for (size_t i = 0; i < lv->n; i++)
    lv->w[i].tick_due |= worker_wants_time(&lv->w[i]);
  pthread_cond_broadcast(&lv->work);
  pthread_mutex_unlock(&lv->mu);
}

void smr_runner_live_stop(smr_runner *r, bool abandon) {
  struct live *lv = r->live;
  if (!lv)
    return;
  if (abandon)
    atomic_store(&lv->abandon, true);
  pthread_mutex_lock(&lv->mu);
  lv->quit = true;
  pthread_cond_broadcast(&lv->work);
  pthread_mutex_unlock(&lv->mu);
  for (size_t i = 0; i < lv->n; i++)
    pthread_join(lv->w[i].th, NULL);
  r->live = NULL;
  live_free(lv);
}

int smr_runner_refresh(smr_runner *r, smr_error *err) {
  pthread_mutex_lock(&r->db_mu);
  int rc = smr_trial_refresh(r->trial, NULL, err);
  pthread_mutex_unlock(&r->db_mu);
  return rc;
}

void smr_runner_lock_results(smr_runner *r) {
  pthread_mutex_lock(&r->mu);
}

void smr_runner_unlock_results(smr_runner *r) {
  pthread_mutex_unlock(&r->mu);
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
