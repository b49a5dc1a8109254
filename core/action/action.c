/* action.c - the dispatcher: triggers from the evaluating threads become
 * jobs on a queue that one worker thread runs, with retries and backoff;
 * every job is recorded in the action_log table of the trial's state
 * before it runs and after it ends, so no smrules run repeats an action a
 * run before it started; the per-run summary lists every outcome. */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action/action_int.h"
#include "base/jsonw.h"
#include "trial/statedb.h"

#define MAX_BACKOFF 60.0

struct smr_act_store {
  sqlite3 *db;
  bool own;     /* our own connection to the state file */
  bool persist; /* false under --dry-run: nothing is written */
  pthread_mutex_t mu;
};

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
  smr_act_store store;
  char *trial;
  bool curl_ready;
  pthread_mutex_t mu; /* queue, entries, event references */
  pthread_cond_t cv;
  act_job *head, *tail;
  bool closing, worker_started;
  pthread_t worker;
  act_entry *entries;
  size_t n_entries, cap_entries;
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_seconds(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ------------------------------------------------------------- store */

static int store_open(smr_act_store *s, sqlite3 *shared, bool persist,
                      smr_error *err) {
  s->persist = persist;
  const char *file = shared ? sqlite3_db_filename(shared, "main") : NULL;
  int flags =
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  /* A connection of our own: the log is written in its own transactions,
   * whatever the catalog's connection is doing. */
  if (file && file[0]) {
    /* the state file is the trial's: opened as untrusted (statedb.h) */
    int rc = smr_statedb_open(file, flags, &s->db, NULL, err);
    if (rc != SMR_OK)
      return rc;
    s->own = true;
  } else if (shared) {
    s->db = shared;
  } else if (sqlite3_open_v2(":memory:", &s->db, flags, NULL) == SQLITE_OK) {
    s->own = true;
  }
  if (!s->db)
    return smr_error_set(err, SMR_ERR_SQL, "", -1, "action log: no database");
  sqlite3_busy_timeout(s->db, 10000);
  sqlite3_exec(s->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
  if (persist &&
      sqlite3_exec(s->db, SMR_SCHEMA_ACTIONS, NULL, NULL, NULL) != SQLITE_OK)
    return smr_error_set(err, SMR_ERR_SQL, file ? file : "", -1,
                         "action log: %s", sqlite3_errmsg(s->db));
  return SMR_OK;
}

static void store_close(smr_act_store *s) {
  if (s->own)
    sqlite3_close(s->db);
  s->db = NULL;
  pthread_mutex_destroy(&s->mu);
}

static sqlite3_stmt *prep(smr_act_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (!s->db || sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return NULL;
  return st;
}

/* "done at 2024-..." text of an earlier record, or NULL when none. */
static char *log_previous(smr_act_store *s, const char *inst, const char *key,
                          int64_t ordinal) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "SELECT status, datetime(started, 'unixepoch')"
                             " FROM action_log WHERE instance = ?"
                             " AND action = ? AND trigger_ordinal = ?");
  char *out = NULL;
  if (st) {
    sqlite3_bind_text(st, 1, inst, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ordinal);
    if (sqlite3_step(st) == SQLITE_ROW) {
      const char *status = (const char *)sqlite3_column_text(st, 0);
      const char *when = (const char *)sqlite3_column_text(st, 1);
      out = smr_xasprintf("%s in an earlier run (started %s UTC)",
                          strcmp(status ? status : "", "running") == 0
                              ? "started (outcome unknown)"
                          : status ? status
                                   : "?",
                          when ? when : "?");
    }
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
  return out;
}

/* Claims the action: false when a row exists already (another run). */
static bool log_begin(smr_act_store *s, const char *inst, const char *key,
                      int64_t ordinal, int64_t step) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "INSERT INTO action_log(instance, action,"
                             " trigger_ordinal, step, status, started)"
                             " VALUES(?, ?, ?, ?, 'running', ?)");
  bool claimed = false;
  if (st) {
    sqlite3_bind_text(st, 1, inst, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ordinal);
    sqlite3_bind_int64(st, 4, step);
    sqlite3_bind_double(st, 5, wall_seconds());
    int rc = sqlite3_step(st);
    claimed = rc == SQLITE_DONE;
    if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT)
      fprintf(stderr, "smrules: action log: %s\n", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
  return claimed;
}

static void log_end(smr_act_store *s, const char *inst, const char *key,
                    int64_t ordinal, const char *status, int attempts,
                    const char *detail) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "UPDATE action_log SET status = ?,"
                             " attempts = ?, detail = ?, finished = ?"
                             " WHERE instance = ? AND action = ?"
                             " AND trigger_ordinal = ?");
  if (st) {
    sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, attempts);
    sqlite3_bind_text(st, 3, detail, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, wall_seconds());
    sqlite3_bind_text(st, 5, inst, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, ordinal);
    if (sqlite3_step(st) != SQLITE_DONE)
      fprintf(stderr, "smrules: action log: %s\n", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
}

bool smr_act_target_load(smr_act_store *s, const char *key, smr_proc_id *id,
                         double *seen_at) {
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "SELECT pid, start_ticks, boot_id, start_wall,"
                             " seen FROM action_target WHERE target = ?");
  bool found = false;
  if (st) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
      memset(id, 0, sizeof *id);
      id->pid = sqlite3_column_int64(st, 0);
      id->start_ticks = (uint64_t)sqlite3_column_int64(st, 1);
      const char *b = (const char *)sqlite3_column_text(st, 2);
      snprintf(id->boot_id, sizeof id->boot_id, "%s", b ? b : "");
      id->start_wall = sqlite3_column_double(st, 3);
      *seen_at = sqlite3_column_double(st, 4);
      found = true;
    }
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
  return found;
}

void smr_act_target_save(smr_act_store *s, const char *key,
                         const smr_proc_id *id) {
  if (!s->persist)
    return;
  pthread_mutex_lock(&s->mu);
  sqlite3_stmt *st = prep(s, "INSERT OR REPLACE INTO action_target(target,"
                             " pid, start_ticks, boot_id, start_wall, seen)"
                             " VALUES(?, ?, ?, ?, ?, ?)");
  if (st) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, id->pid);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)id->start_ticks);
    sqlite3_bind_text(st, 4, id->boot_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, id->start_wall);
    sqlite3_bind_double(st, 6, wall_seconds());
    if (sqlite3_step(st) != SQLITE_DONE)
      fprintf(stderr, "smrules: action log: %s\n", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
  }
  pthread_mutex_unlock(&s->mu);
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

static void add_arg(smr_act_args *a, const char *name, const char *value) {
  smr_strv_push(&a->names, name);
  smr_strv_push(&a->values, value ? value : "");
}

static void free_args(smr_act_args *a) {
  smr_strv_free(&a->names);
  smr_strv_free(&a->values);
}

static char *sms_text(const smr_act_event *e) {
  char *raw = smr_xasprintf("SMDebugRule:%s fired. %s", e->rule, e->summary);
  char *t = smr_act_oneline(raw, 1000);
  free(raw);
  return t;
}

/* Email, SMS or SNS handed to a configured hook instead. */
static void via_hook(smr_actions *a, const smr_hook_cfg *h,
                     const smr_act_item *it, const smr_act_event *e,
                     smr_act_result *r) {
  smr_act_args args = {0};
  if (it->kind == SMR_ACT_EMAIL) {
    char *to = smr_xstrdup(it->target), *subject = smr_email_subject(e);
    char *body = smr_email_message(&a->plan.email, &it->to, e);
    add_arg(&args, "to", to);
    add_arg(&args, "subject", subject);
    add_arg(&args, "message", body);
    free(to);
    free(subject);
    free(body);
  } else {
    char *text = sms_text(e);
    add_arg(&args, it->kind == SMR_ACT_SMS ? "phone_number" : "topic_arn",
            it->kind == SMR_ACT_SMS ? it->phone : it->topic);
    add_arg(&args, "message", text);
    free(text);
  }
  smr_hook_run(h, it->label, &args, e, NULL, a->o.dry_run, r);
  free_args(&args);
}

static void dispatch(smr_actions *a, const smr_act_item *it,
                     const smr_act_event *e, smr_act_result *r) {
  bool dry = a->o.dry_run;
  switch (it->kind) {
  case SMR_ACT_STOP:
    smr_stop_run(&a->plan.stop, it->prefix, dry, &a->store, a->store.persist,
                 r);
    break;
  case SMR_ACT_EMAIL:
    if (a->plan.email.hook)
      via_hook(a, a->plan.email.hook, it, e, r);
    else
      smr_email_send(&a->plan.email, &it->to, e, dry, r);
    break;
  case SMR_ACT_SMS:
  case SMR_ACT_SNS:
    if (a->plan.sns.hook)
      via_hook(a, a->plan.sns.hook, it, e, r);
    else if (it->kind == SMR_ACT_SMS)
      smr_sns_publish(&a->plan.sns, a->plan.sns.topic_arn, it->phone, e, dry,
                      r);
    else
      smr_sns_publish(&a->plan.sns, it->topic, NULL, e, dry, r);
    break;
  case SMR_ACT_HOOK:
    smr_hook_run(it->hook, it->label, &it->args, e, NULL, dry, r);
    break;
  }
}

static smr_act_retry retry_of(const smr_actions *a, const smr_act_item *it) {
  switch (it->kind) {
  case SMR_ACT_EMAIL:
    return a->plan.email.hook ? a->plan.email.hook->retry : a->plan.email.retry;
  case SMR_ACT_SMS:
  case SMR_ACT_SNS:
    return a->plan.sns.hook ? a->plan.sns.hook->retry : a->plan.sns.retry;
  case SMR_ACT_HOOK:
    return it->hook->retry;
  default:
    return (smr_act_retry){2, 1};
  }
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
  if (a->store.persist &&
      !log_begin(&a->store, j->instance, it->key, e->trigger, e->step)) {
    smr_act_set(&r, SMR_ACT_SKIPPED,
                "already performed by another smrules "
                "run (action log)");
  } else {
    smr_act_retry retry = retry_of(a, it);
    double delay = retry.delay;
    for (;;) {
      attempts++;
      memset(&r, 0, sizeof r);
      dispatch(a, it, e, &r);
      if (r.rc != SMR_ACT_RETRY || attempts > retry.retries)
        break;
      fprintf(stderr,
              "smrules: action %s for rule %s: attempt %d of %d "
              "failed: %s; retrying in %gs\n",
              it->label, e->rule, attempts, retry.retries + 1, r.detail, delay);
      sleep_seconds(delay);
      delay = delay * 2 > MAX_BACKOFF ? MAX_BACKOFF : delay * 2;
    }
    if (a->store.persist)
      log_end(&a->store, j->instance, it->key, e->trigger,
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
  ev->e =
      smr_act_event_new(smr_instance_name(inst), smr_instance_rule(inst), step,
                        ordinal, a->trial, a->plan.stop.job_name, rep);
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
    char *prev = log_previous(&a->store, name, it->key, ordinal);
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

static bool needs_stop(const smr_act_plan *p) {
  for (size_t i = 0; i < p->n_rules; i++)
    for (size_t k = 0; k < p->rules[i].n; k++)
      if (p->rules[i].v[k].kind == SMR_ACT_STOP)
        return true;
  return false;
}

static int start(smr_actions *a, smr_error *err) {
  int rc = store_open(&a->store, a->o.db, !a->o.dry_run, err);
  if (rc)
    return rc;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK)
    a->curl_ready = true;
  if (needs_stop(&a->plan) && a->plan.stop.how != SMR_STOP_NONE)
    smr_stop_prime(&a->plan.stop, &a->store, a->store.persist);
  else if (a->o.training_pid > 0)
    fprintf(stderr, "smrules: warning: --training-pid given but no rule has "
                    "a StopTraining action\n");
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
  pthread_mutex_init(&a->store.mu, NULL);
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
  store_close(&a->store);
  smr_act_plan_free(&a->plan);
  if (a->curl_ready)
    curl_global_cleanup();
  free(a->trial);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
  free(a);
}
