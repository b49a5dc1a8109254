/* action.c - the dispatcher: triggers from the evaluating threads become
 * jobs on a queue that one worker thread runs in order, each through its
 * kind's `run` (action_kind.h), with the item's retries and backoff;
 * every job is recorded in the action_log table of the trial's state
 * before it runs and after it ends, so no smrules run repeats an action a
 * run before it started; the per-run summary lists every outcome. */
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action/action_kind.h"
#include "action/action_store.h"
#include "base/jsonw.h"

#define MAX_BACKOFF 60.0

typedef struct shared_event {
  smr_act_event *e;
  int refs;
} shared_event;

typedef struct act_job {
  struct act_job *next;
  const smr_act_item *item;
  shared_event *ev;
  char *instance;
  size_t entry; /* index in the summary */
} act_job;

typedef struct act_entry {
  char *rule, *action, *target, *detail;
  const char *outcome;
  int64_t step, trigger;
  int attempts;
  double seconds;
} act_entry;

struct smr_actions {
  const smr_config *cfg;
  smr_actions_opts o;
  smr_act_plan plan;
  smr_act_store *store;
  char *trial;
  pthread_mutex_t mu; /* queue, entries, event references */
  pthread_cond_t cv;
  act_job *head, *tail;
  bool closing, worker_started;
  bool started; /* the kinds' start ran; their finish is due */
  pthread_t worker;
  act_entry *entries;
  size_t n_entries, cap_entries;
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_seconds(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ----------------------------------------------------------- summary */

/* Caller holds a->mu. */
static size_t add_entry(smr_actions *a, const char *rule,
                        const smr_act_item *it, int64_t step, int64_t trigger,
                        const char *outcome, const char *detail) {
  if (a->n_entries == a->cap_entries) {
    a->cap_entries = a->cap_entries ? 2 * a->cap_entries : 8;
    a->entries = smr_xrealloc(a->entries, a->cap_entries * sizeof *a->entries);
  }
  act_entry *e = &a->entries[a->n_entries];
  memset(e, 0, sizeof *e);
  e->rule = smr_act_oneline(rule, 256);
  e->action = smr_xstrdup(it->label);
  e->target = smr_act_oneline(it->target ? it->target : "", 512);
  e->detail = smr_xstrdup(detail ? detail : "");
  e->outcome = outcome;
  e->step = step;
  e->trigger = trigger;
  return a->n_entries++;
}

static void print_entry(FILE *f, const act_entry *e) {
  fprintf(f, "%-16s %-24s %7lld %8lld  %-9s %s\n", e->action, e->rule,
          (long long)e->step, (long long)e->trigger, e->outcome, e->target);
  if (e->detail[0])
    fprintf(f, "    %s\n", e->detail);
}

void smr_actions_print_summary(smr_actions *a, FILE *f) {
  if (!a || a->plan.n_items == 0)
    return;
  pthread_mutex_lock(&a->mu);
  if (a->n_entries == 0) {
    fprintf(f, "\nactions: none due (%zu configured)%s\n", a->plan.n_items,
            a->o.dry_run ? " [dry run]" : "");
  } else {
    fprintf(f, "\nactions%s:\n%-16s %-24s %7s %8s  %-9s %s\n",
            a->o.dry_run ? " [dry run: nothing was done]" : "", "ACTION",
            "RULE", "STEP", "TRIGGER", "OUTCOME", "TARGET");
    for (size_t i = 0; i < a->n_entries; i++)
      print_entry(f, &a->entries[i]);
  }
  pthread_mutex_unlock(&a->mu);
}

void smr_actions_each(smr_actions *a,
                      void (*fn)(void *arg, const char *rule,
                                 const char *action, const char *outcome),
                      void *arg) {
  if (!a)
    return;
  pthread_mutex_lock(&a->mu);
  for (size_t i = 0; i < a->n_entries; i++)
    fn(arg, a->entries[i].rule, a->entries[i].action,
       a->entries[i].outcome ? a->entries[i].outcome : "pending");
  pthread_mutex_unlock(&a->mu);
}

char *smr_actions_json(smr_actions *a) {
  smr_jw w = {0};
  smr_jw_arr(&w);
  if (a)
    pthread_mutex_lock(&a->mu);
  for (size_t i = 0; a && i < a->n_entries; i++) {
    const act_entry *e = &a->entries[i];
    smr_jw_obj(&w);
    const char *keys[] = {"rule", "action", "target", "outcome", "detail"};
    const char *vals[] = {e->rule, e->action, e->target, e->outcome, e->detail};
    for (size_t k = 0; k < 5; k++) {
      smr_jw_key(&w, keys[k]);
      smr_jw_str(&w, vals[k]);
    }
    smr_jw_key(&w, "step");
    smr_jw_int(&w, e->step);
    smr_jw_key(&w, "trigger");
    smr_jw_int(&w, e->trigger);
    smr_jw_key(&w, "attempts");
    smr_jw_int(&w, e->attempts);
    smr_jw_key(&w, "seconds");
    smr_jw_double(&w, e->seconds);
    smr_jw_key(&w, "dry_run");
    smr_jw_bool(&w, a->o.dry_run);
    smr_jw_obj_end(&w);
  }
  if (a)
    pthread_mutex_unlock(&a->mu);
  smr_jw_arr_end(&w);
  return smr_jw_finish(&w);
}

/* ---------------------------------------------------------- dispatch */

/* What a kind's run and lifecycle callbacks see. */
static smr_act_exec exec_of(smr_actions *a) {
  return (smr_act_exec){&a->plan, a->store, &a->o, a->o.dry_run,
                        smr_act_store_persists(a->store)};
}

static void report(const smr_actions *a, const act_job *j,
                   const smr_act_result *r) {
  bool problem = r->rc == SMR_ACT_RETRY || r->rc == SMR_ACT_FAILED ||
                 r->rc == SMR_ACT_REFUSED;
  if (problem || a->o.verbose)
    fprintf(stderr, "smrules: action %s for rule %s (step %lld): %s: %s\n",
            j->item->label, j->ev->e->rule, (long long)j->ev->e->step,
            smr_act_rc_name(r->rc), r->detail);
}

static void run_job(smr_actions *a, act_job *j) {
  const smr_act_item *it = j->item;
  const smr_act_event *e = j->ev->e;
  double t0 = now_seconds();
  smr_act_result r = {.rc = SMR_ACT_SKIPPED};
  int attempts = 0;
  if (smr_act_store_persists(a->store) &&
      !smr_act_log_begin(a->store, j->instance, it->key, e->trigger, e->step)) {
    smr_act_set(&r, SMR_ACT_SKIPPED,
                "already performed by another smrules "
                "run (action log)");
  } else {
    smr_act_retry retry = it->retry;
    smr_act_exec x = exec_of(a);
    double delay = retry.delay;
    for (;;) {
      attempts++;
      memset(&r, 0, sizeof r);
      it->kind->run(&x, it, e, &r);
      if (r.rc != SMR_ACT_RETRY || attempts > retry.retries)
        break;
      fprintf(stderr,
              "smrules: action %s for rule %s: attempt %d of %d "
              "failed: %s; retrying in %gs\n",
              it->label, e->rule, attempts, (int)retry.retries + 1, r.detail,
              delay);
      sleep_seconds(delay);
      delay = delay * 2 > MAX_BACKOFF ? MAX_BACKOFF : delay * 2;
    }
    if (smr_act_store_persists(a->store))
      smr_act_log_end(a->store, j->instance, it->key, e->trigger,
                      smr_act_rc_name(r.rc), attempts, r.detail);
    report(a, j, &r);
  }
  pthread_mutex_lock(&a->mu);
  act_entry *en = &a->entries[j->entry];
  en->outcome = smr_act_rc_name(r.rc);
  en->attempts = attempts;
  en->seconds = now_seconds() - t0;
  free(en->detail);
  en->detail = smr_xstrdup(r.detail);
  pthread_mutex_unlock(&a->mu);
}

static void release_event(smr_actions *a, shared_event *ev) {
  pthread_mutex_lock(&a->mu);
  bool last = --ev->refs == 0;
  pthread_mutex_unlock(&a->mu);
  if (last) {
    smr_act_event_free(ev->e);
    free(ev);
  }
}

static void *worker(void *arg) {
  smr_actions *a = arg;
  /* A hook that closes its stdin early must not kill smrules: SIGPIPE
   * stays pending on this thread and write() returns EPIPE. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  for (;;) {
    pthread_mutex_lock(&a->mu);
    while (!a->head && !a->closing)
      pthread_cond_wait(&a->cv, &a->mu);
    act_job *j = a->head;
    if (j) {
      a->head = j->next;
      if (!a->head)
        a->tail = NULL;
    }
    pthread_mutex_unlock(&a->mu);
    if (!j)
      break;
    run_job(a, j);
    release_event(a, j->ev);
    free(j->instance);
    free(j);
  }
  return NULL;
}

/* ---------------------------------------------------------- triggers */

static shared_event *make_event(smr_actions *a, smr_instance *inst,
                                int64_t step, int64_t ordinal) {
  char *rep = smr_instance_report(inst);
  shared_event *ev = smr_xcalloc(1, sizeof *ev);
  ev->e = smr_act_event_new(smr_instance_name(inst), smr_instance_rule(inst),
                            step, ordinal, a->trial, a->plan.job_name, rep);
  free(rep);
  return ev;
}

static void enqueue(smr_actions *a, act_job *j) {
  pthread_mutex_lock(&a->mu);
  if (a->tail)
    a->tail->next = j;
  else
    a->head = j;
  a->tail = j;
  pthread_cond_signal(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

void smr_actions_on_trigger(void *arg, smr_instance *inst, int64_t step) {
  smr_actions *a = arg;
  const smr_rule_config *rc = smr_instance_config(inst);
  if (!a || !rc || rc < a->cfg->rules || rc >= a->cfg->rules + a->cfg->n_rules)
    return;
  const smr_act_rule_plan *rp = &a->plan.rules[rc - a->cfg->rules];
  int64_t ordinal = (int64_t)smr_instance_triggered(inst)->n;
  const char *name = smr_instance_name(inst);
  shared_event *ev = NULL; /* one reference held here until the end */
  for (size_t k = 0; k < rp->n; k++) {
    const smr_act_item *it = &rp->v[k];
    if (!smr_repeat_due(&it->repeat, ordinal))
      continue;
    char *prev = smr_act_log_previous(a->store, name, it->key, ordinal);
    if (!prev && !ev) {
      ev = make_event(a, inst, step, ordinal);
      ev->refs = 1;
    }
    pthread_mutex_lock(&a->mu);
    if (prev || !a->worker_started) {
      add_entry(a, name, it, step, ordinal, prev ? "skipped" : "failed",
                prev ? prev : "the action worker could not be started");
      pthread_mutex_unlock(&a->mu);
      free(prev);
      continue;
    }
    ev->refs++;
    act_job *j = smr_xcalloc(1, sizeof *j);
    j->item = it;
    j->ev = ev;
    j->instance = smr_xstrdup(name);
    j->entry = add_entry(a, name, it, step, ordinal, "pending", "");
    pthread_mutex_unlock(&a->mu);
    enqueue(a, j);
  }
  if (ev)
    release_event(a, ev);
}

/* ------------------------------------------------------ life cycle */

/* How many items of kind k the plan has. */
static size_t items_of(const smr_act_plan *p, const smr_action_kind *k) {
  size_t n = 0;
  for (size_t i = 0; i < p->n_rules; i++)
    for (size_t j = 0; j < p->rules[i].n; j++)
      n += p->rules[i].v[j].kind == k;
  return n;
}

static int start(smr_actions *a, smr_error *err) {
  int rc = smr_act_store_open(&a->store, a->o.db, !a->o.dry_run, err);
  if (rc)
    return rc;
  smr_act_exec x = exec_of(a);
  for (size_t i = 0; i < smr_n_action_kinds; i++)
    if (smr_action_kinds[i]->start)
      smr_action_kinds[i]->start(&x, items_of(&a->plan, smr_action_kinds[i]));
  a->started = true;
  a->worker_started = pthread_create(&a->worker, NULL, worker, a) == 0;
  if (!a->worker_started)
    fprintf(stderr, "smrules: cannot start the action worker: actions will "
                    "not run\n");
  return SMR_OK;
}

int smr_actions_new(const smr_config *cfg, const smr_actions_opts *o,
                    smr_actions **out, smr_error *err) {
  *out = NULL;
  smr_actions *a = smr_xcalloc(1, sizeof *a);
  a->cfg = cfg;
  a->o = *o;
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  int rc = smr_act_plan_build(cfg, o, &a->plan, err);
  if (rc) {
    smr_actions_free(a);
    return rc;
  }
  char *abs = o->trial_dir ? realpath(o->trial_dir, NULL) : NULL;
  a->trial = smr_xstrdup(abs ? abs : o->trial_dir ? o->trial_dir : "");
  free(abs);
  if (!o->validate_only && a->plan.n_items) {
    if ((rc = start(a, err)) != SMR_OK) {
      smr_actions_free(a);
      return rc;
    }
  }
  *out = a;
  return SMR_OK;
}

bool smr_actions_empty(const smr_actions *a) {
  return !a || a->plan.n_items == 0;
}

void smr_actions_finish(smr_actions *a) {
  if (!a)
    return;
  pthread_mutex_lock(&a->mu);
  a->closing = true;
  pthread_cond_broadcast(&a->cv);
  bool join = a->worker_started;
  a->worker_started = false;
  pthread_mutex_unlock(&a->mu);
  if (join)
    pthread_join(a->worker, NULL);
  if (a->started) { /* once, after the last queued action ran */
    a->started = false;
    smr_act_exec x = exec_of(a);
    for (size_t i = 0; i < smr_n_action_kinds; i++)
      if (smr_action_kinds[i]->finish)
        smr_action_kinds[i]->finish(&x);
  }
}

size_t smr_actions_failed(smr_actions *a) {
  size_t n = 0;
  if (!a)
    return 0;
  pthread_mutex_lock(&a->mu);
  for (size_t i = 0; i < a->n_entries; i++)
    n += a->entries[i].outcome && strcmp(a->entries[i].outcome, "failed") == 0;
  pthread_mutex_unlock(&a->mu);
  return n;
}

const char *smr_actions_stopped_by(smr_actions *a) {
  const char *rule = NULL;
  if (!a)
    return NULL;
  pthread_mutex_lock(&a->mu);
  for (size_t i = 0; i < a->n_entries && !rule; i++)
    if (strcmp(a->entries[i].action, "StopTraining") == 0 &&
        a->entries[i].outcome && strcmp(a->entries[i].outcome, "ok") == 0)
      rule = a->entries[i].rule;
  pthread_mutex_unlock(&a->mu);
  return rule;
}

void smr_actions_free(smr_actions *a) {
  if (!a)
    return;
  smr_actions_finish(a);
  for (size_t i = 0; i < a->n_entries; i++) {
    act_entry *e = &a->entries[i];
    free(e->rule);
    free(e->action);
    free(e->target);
    free(e->detail);
  }
  free(a->entries);
  smr_act_store_close(a->store);
  smr_act_plan_free(&a->plan);
  free(a->trial);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
  free(a);
}
