/* metrics.c - the run's state as Prometheus text (metrics.h): rendered by
 * the evaluating thread at each publish, the few live values (seconds
 * since the last step, the training process, the listener's counters)
 * added when a scrape or the file asks. */
#include "metrics/metrics_int.h"
#include "smrules/version.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format/mode.h"

const char *const smr_metrics_refusal_names[SMR_MREF_N] = {
    "too_large", "timeout", "busy", "method", "path", "bad_request"};

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A label value as the exposition format quotes it: \\, \" and \n. */
static void put_label(smr_buf *b, const char *name, const char *v) {
  smr_buf_printf(b, "%s=\"", name);
  for (const char *p = v ? v : ""; *p; p++) {
    if (*p == '\\')
      smr_buf_puts(b, "\\\\");
    else if (*p == '"')
      smr_buf_puts(b, "\\\"");
    else if (*p == '\n')
      smr_buf_puts(b, "\\n");
    else
      smr_buf_append(b, p, 1);
  }
  smr_buf_puts(b, "\"");
}

static void family(smr_buf *b, const char *name, const char *type,
                   const char *help) {
  smr_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* `name{job="..."` : the caller adds its labels and closes it. */
static void series(smr_buf *b, const smr_metrics *m, const char *name) {
  smr_buf_printf(b, "%s{", name);
  put_label(b, "job", m->job);
}

static void value_i(smr_buf *b, int64_t v) {
  smr_buf_printf(b, "} %lld\n", (long long)v);
}

static void value_d(smr_buf *b, double v) {
  char s[40];
  smr_fmt_double(v, s, sizeof s);
  smr_buf_printf(b, "} %s\n", s);
}

int smr_metrics_start(const smr_metrics_opts *o, smr_metrics **out,
                      smr_error *err) {
  smr_metrics *m = smr_xcalloc(1, sizeof *m);
  m->job = smr_xstrdup(o->job ? o->job : "");
  m->file = o->file ? smr_xstrdup(o->file) : NULL;
  m->started = wall_s();
  m->lfd = m->wake[0] = m->wake[1] = -1;
  pthread_mutex_init(&m->mu, NULL);
  if (o->listen && smr_metrics_listen(m, o->listen, o->announce, err)) {
    smr_metrics_free(m);
    *out = NULL;
    return err->status;
  }
  smr_metrics_publish(m, NULL, NULL, NULL);
  *out = m;
  return SMR_OK;
}

/* ---------------------------------------------------------------- rules */

static const char *rule_type(smr_instance *in) {
  const smr_rule_config *c = smr_instance_config(in);
  if (smr_instance_is_profiler(in))
    return "profiler";
  if (c->lua)
    return "lua";
  if (c->plugin)
    return "plugin";
  return "builtin";
}

static void rule_labels(smr_buf *b, const smr_metrics *m, const char *name,
                        smr_instance *in) {
  series(b, m, name);
  smr_buf_puts(b, ",");
  put_label(b, "rule", smr_instance_name(in));
  smr_buf_puts(b, ",");
  put_label(b, "type", rule_type(in));
}

static void render_rules(smr_buf *b, const smr_metrics *m, smr_runner *r) {
  static const smr_rule_status ST[] = {SMR_RULE_IN_PROGRESS, SMR_RULE_NO_ISSUES,
                                       SMR_RULE_ISSUES, SMR_RULE_ERROR};
  size_t n = r ? smr_runner_count(r) : 0;
  if (n > SMR_METRICS_MAX_SERIES / 4)
    n = SMR_METRICS_MAX_SERIES / 4;
  family(b, "smrules_rule_status", "gauge",
         "1 for the rule's current status, 0 for the others.");
  for (size_t i = 0; i < n; i++) {
    smr_instance *in = smr_runner_instance(r, i);
    for (size_t s = 0; s < 4; s++) {
      rule_labels(b, m, "smrules_rule_status", in);
      smr_buf_puts(b, ",");
      put_label(b, "status", smr_rule_status_name(ST[s]));
      value_i(b, smr_instance_status(in) == ST[s]);
    }
  }
  family(b, "smrules_rule_triggers_total", "counter",
         "Steps at which the rule found an issue.");
  for (size_t i = 0; i < n; i++) {
    smr_instance *in = smr_runner_instance(r, i);
    rule_labels(b, m, "smrules_rule_triggers_total", in);
    value_i(b, (int64_t)smr_instance_triggered(in)->n);
  }
  family(b, "smrules_rule_steps_evaluated_total", "counter",
         "Steps (profiler rules: windows) the rule has evaluated.");
  for (size_t i = 0; i < n; i++) {
    smr_instance *in = smr_runner_instance(r, i);
    rule_labels(b, m, "smrules_rule_steps_evaluated_total", in);
    value_i(b, smr_instance_evaluated(in));
  }
}

/* ---------------------------------------------------------------- steps */

/* Steps seen and the latest one per mode; returns the global steps seen. */
static int64_t render_steps(smr_buf *b, const smr_metrics *m, smr_trial *t) {
  int modes[5];
  size_t nm = 0;
  if (t)
    smr_trial_modes(t, modes, &nm);
  bool has_global = false;
  for (size_t i = 0; i < nm; i++)
    has_global |= modes[i] == SMR_MODE_GLOBAL;
  if (t && !has_global) /* global steps always, whatever the modes */
    modes[nm++] = SMR_MODE_GLOBAL;
  int64_t global = 0;
  smr_buf sb = {0}, lb = {0};
  for (size_t i = 0; i < nm; i++) {
    smr_i64v v = {0};
    smr_trial_steps(t, modes[i], true, &v);
    int64_t latest = -1;
    for (size_t k = 0; k < v.n; k++)
      latest = v.v[k] > latest ? v.v[k] : latest;
    if (modes[i] == SMR_MODE_GLOBAL)
      global = (int64_t)v.n;
    series(&sb, m, "smrules_steps_seen");
    smr_buf_puts(&sb, ",");
    put_label(&sb, "mode", smr_mode_name(modes[i]));
    value_i(&sb, (int64_t)v.n);
    if (latest >= 0) {
      series(&lb, m, "smrules_latest_step");
      smr_buf_puts(&lb, ",");
      put_label(&lb, "mode", smr_mode_name(modes[i]));
      value_i(&lb, latest);
    }
    smr_i64v_free(&v);
  }
  family(b, "smrules_steps_seen", "gauge",
         "Steps the trial holds, per mode (GLOBAL: global steps).");
  if (sb.len)
    smr_buf_append(b, sb.data, sb.len);
  family(b, "smrules_latest_step", "gauge",
         "The latest step the trial holds, per mode.");
  if (lb.len)
    smr_buf_append(b, lb.data, lb.len);
  smr_buf_free(&sb);
  smr_buf_free(&lb);
  family(b, "smrules_workers", "gauge", "Workers writing the trial.");
  series(b, m, "smrules_workers");
  value_i(b, t ? smr_trial_num_workers(t) : 0);
  return global;
}

/* Each worker's latest global step (a straggler trails the others), the
 * first SMR_METRICS_MAX_WORKERS workers by name; and the bytes read. */
static void render_workers(smr_buf *b, const smr_metrics *m, smr_trial *t) {
  family(b, "smrules_worker_latest_step", "gauge",
         "The latest global step each worker has written.");
  const char *w = NULL;
  int64_t step = 0;
  size_t n = t ? smr_trial_worker_latest(t, 0, &w, &step) : 0;
  for (size_t i = 0; i < n && i < SMR_METRICS_MAX_WORKERS; i++) {
    smr_trial_worker_latest(t, i, &w, &step);
    series(b, m, "smrules_worker_latest_step");
    smr_buf_puts(b, ",");
    put_label(b, "worker", w);
    value_i(b, step);
  }
  family(b, "smrules_read_bytes_total", "counter",
         "Bytes of trial files read (index, event and collection files).");
  series(b, m, "smrules_read_bytes_total");
  value_i(b, t ? (int64_t)smr_trial_bytes_read(t) : 0);
}

/* --------------------------------------------------------------- actions */

typedef struct outcome_count {
  const char *rule, *action, *outcome; /* valid during smr_actions_each */
  int64_t n;
} outcome_count;

typedef struct outcome_tally {
  outcome_count c[SMR_METRICS_MAX_SERIES];
  size_t n;
  int64_t pending, dropped;
} outcome_tally;

static void tally(void *arg, const char *rule, const char *action,
                  const char *outcome) {
  outcome_tally *t = arg;
  if (!strcmp(outcome, "pending")) { /* not an outcome yet: a gauge */
    t->pending++;
    return;
  }
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->c[i].rule, rule) && !strcmp(t->c[i].action, action) &&
        !strcmp(t->c[i].outcome, outcome)) {
      t->c[i].n++;
      return;
    }
  if (t->n == SMR_METRICS_MAX_SERIES) {
    t->dropped++;
    return;
  }
  t->c[t->n++] = (outcome_count){rule, action, outcome, 1};
}

typedef struct actions_render {
  outcome_tally t;
  smr_buf *b;
  const smr_metrics *m;
} actions_render;

static void render_actions(smr_buf *b, const smr_metrics *m,
                           smr_actions *acts) {
  actions_render *ar = smr_xcalloc(1, sizeof *ar);
  smr_actions_each(acts, tally, &ar->t);
  /* the strings are the entries' own, kept until smr_actions_free (which
   * comes after the last publish) */
  family(b, "smrules_action_outcomes_total", "counter",
         "Actions that ran, per rule, action and outcome.");
  smr_buf lines = {0};
  for (size_t i = 0; i < ar->t.n; i++) {
    series(&lines, m, "smrules_action_outcomes_total");
    smr_buf_puts(&lines, ",");
    put_label(&lines, "rule", ar->t.c[i].rule);
    smr_buf_puts(&lines, ",");
    put_label(&lines, "action", ar->t.c[i].action);
    smr_buf_puts(&lines, ",");
    put_label(&lines, "outcome", ar->t.c[i].outcome);
    value_i(&lines, ar->t.c[i].n);
  }
  if (lines.len)
    smr_buf_append(b, lines.data, lines.len);
  smr_buf_free(&lines);
  family(b, "smrules_actions_pending", "gauge",
         "Actions due that have not finished yet.");
  series(b, m, "smrules_actions_pending");
  value_i(b, ar->t.pending);
  free(ar);
}

/* --------------------------------------------------------------- publish */

void smr_metrics_publish(smr_metrics *m, smr_runner *r, smr_trial *t,
                         smr_actions *acts) {
  if (!m)
    return;
  smr_buf b = {0};
  family(&b, "smrules_build_info", "gauge", "The smrules version.");
  series(&b, m, "smrules_build_info");
  smr_buf_puts(&b, ",");
  put_label(&b, "version", SMRULES_VERSION);
  value_i(&b, 1);
  render_rules(&b, m, r);
  int64_t global = render_steps(&b, m, t);
  render_workers(&b, m, t);
  render_actions(&b, m, acts);
  double now = wall_s();
  pthread_mutex_lock(&m->mu);
  if (global > m->steps_seen) {
    if (m->first_step == 0) {
      m->first_step = now;
      m->first_steps = global;
    } else if (now > m->first_step) {
      m->rate = (double)(global - m->first_steps) / (now - m->first_step);
    }
    m->steps_seen = global;
    m->last_step = now;
  }
  family(&b, "smrules_step_rate", "gauge",
         "New global steps per second, on average since smrules first saw "
         "steps (0 until it saw two batches).");
  series(&b, m, "smrules_step_rate");
  value_d(&b, m->rate);
  char *old = m->snap;
  m->snap = b.data ? b.data : smr_xstrdup("");
  pthread_mutex_unlock(&m->mu);
  free(old);
}

void smr_metrics_training(smr_metrics *m, bool running, int code) {
  if (!m)
    return;
  pthread_mutex_lock(&m->mu);
  m->have_training = true;
  m->running = running;
  m->code = code;
  pthread_mutex_unlock(&m->mu);
}

/* The values that change without a publish; caller holds m->mu. */
static void render_live(smr_buf *b, const smr_metrics *m) {
  double now = wall_s();
  double since = now - (m->last_step > 0 ? m->last_step : m->started);
  family(b, "smrules_seconds_since_last_step", "gauge",
         "Seconds since a new global step last appeared (since smrules "
         "started when none has): a hang shows as a growing value.");
  series(b, m, "smrules_seconds_since_last_step");
  value_d(b, since < 0 ? 0 : since);
  if (m->have_training) {
    family(b, "smrules_training_running", "gauge",
           "1 while the training process runs, 0 once it has exited.");
    series(b, m, "smrules_training_running");
    value_i(b, m->running);
    if (!m->running && m->code >= 0) {
      family(b, "smrules_training_exit_code", "gauge",
             "The training process's exit status (128+N: killed by "
             "signal N).");
      series(b, m, "smrules_training_exit_code");
      value_i(b, m->code);
    }
  }
  family(b, "smrules_metrics_scrapes_total", "counter",
         "GET /metrics requests answered.");
  series(b, m, "smrules_metrics_scrapes_total");
  value_i(b, (int64_t)m->scrapes);
  family(b, "smrules_metrics_refused_total", "counter",
         "Connections the listener refused or cut, per reason.");
  for (size_t i = 0; i < SMR_MREF_N; i++) {
    series(b, m, "smrules_metrics_refused_total");
    smr_buf_puts(b, ",");
    put_label(b, "reason", smr_metrics_refusal_names[i]);
    value_i(b, (int64_t)m->refused[i]);
  }
}

char *smr_metrics_text(smr_metrics *m) {
  smr_buf b = {0};
  pthread_mutex_lock(&m->mu);
  smr_buf_puts(&b, m->snap ? m->snap : "");
  render_live(&b, m);
  pthread_mutex_unlock(&m->mu);
  return b.data;
}

/* ------------------------------------------------------------------ file */

int smr_metrics_write_file(smr_metrics *m, smr_error *err) {
  if (!m || !m->file)
    return SMR_OK;
  char *text = smr_metrics_text(m);
  /* beside the file, so that rename() is atomic: a collector reads the
   * old text or the new one, never a part */
  char *tmp = smr_xasprintf("%s.%ld.tmp", m->file, (long)getpid());
  int fd =
      open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  int rc = SMR_OK;
  size_t len = strlen(text), off = 0;
  if (fd < 0) {
    rc = smr_error_set(err, SMR_ERR_IO, m->file, -1,
                       "cannot write the metrics file: %s", strerror(errno));
  } else {
    while (off < len) {
      ssize_t w = write(fd, text + off, len - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        break;
      off += (size_t)w;
    }
    if (off < len || fsync(fd) != 0 || close(fd) != 0 ||
        rename(tmp, m->file) != 0) {
      rc = smr_error_set(err, SMR_ERR_IO, m->file, -1,
                         "cannot write the metrics file: %s", strerror(errno));
      if (off < len)
        close(fd);
      unlink(tmp);
    }
  }
  free(tmp);
  free(text);
  return rc;
}

void smr_metrics_free(smr_metrics *m) {
  if (!m)
    return;
  smr_metrics_listen_stop(m);
  pthread_mutex_destroy(&m->mu);
  free(m->snap);
  free(m->job);
  free(m->file);
  free(m);
}
