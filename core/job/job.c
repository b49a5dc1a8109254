/* job.c - the order of a `smrules run`'s steps (job.h): launch, wait for
 * the trial, evaluate or watch, actions, the command's end, output files,
 * exit status. */
#include "job/job.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/config_tb.h"
#include "host/rulekind.h"
#include "job/job_int.h"
#include "job/job_profile.h"
#include "metrics/metrics.h"
#include "run/output.h"
#include "source/source.h"
#include "trial/catalog.h"

/* An error that ends the job (`ends`: with --json it is the JSON document
 * on stdout too), or one it got past (stderr only). */
static void report_error(const smr_job_print *p, const smr_error *e,
                         bool ends) {
  if (p->error)
    p->error(p->arg, e, ends);
}

/* Lua limits and job count from the top-level settings of rules.yaml. */
static void apply_settings(const smr_config *cfg, smr_run_opts *o) {
  const smr_node *n;
  if (cfg->lua && (n = smr_node_get(cfg->lua, "instruction_limit")) &&
      n->type == SMR_NODE_INT)
    o->lua.instructions = n->i;
  if (cfg->lua && (n = smr_node_get(cfg->lua, "memory_limit_mb")) &&
      n->type == SMR_NODE_INT)
    o->lua.memory_bytes = (size_t)n->i << 20;
  if (cfg->lua && (n = smr_node_get(cfg->lua, "time_limit_seconds")) &&
      (n->type == SMR_NODE_INT || n->type == SMR_NODE_FLOAT))
    o->lua.seconds = n->type == SMR_NODE_INT ? (double)n->i : n->f;
  if (o->jobs <= 0 && cfg->root && (n = smr_node_get(cfg->root, "jobs")) &&
      n->type == SMR_NODE_INT)
    o->jobs = (int)n->i;
}

static const char *END_NAMES[] = {"end_marker", "trainer_exit", "interrupted",
                                  "timeout", "end_marker"};

const char *smr_job_end_name(const smr_job_end *te) {
  return END_NAMES[te->how];
}

/* Exit status precedence (docs/cli.md): 128+N when smrules itself was
 * interrupted by signal N (the results are partial) > 124 --timeout ended
 * it (partial too) > 5 a rule failed >
 * 4 an action failed > 1 issues found > the launched command's status
 * when it failed > 0. */
static int exit_for_results(smr_runner *r, smr_actions *acts,
                            const smr_job_end *te) {
  if (te && te->interrupted)
    return 128 + te->interrupted;
  if (te && te->timed_out)
    return SMR_EXIT_TIMEOUT; /* the results are partial too */
  bool issues = false, errors = false;
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    smr_rule_status s = smr_instance_status(smr_runner_instance(r, i));
    issues |= s == SMR_RULE_ISSUES;
    errors |= s == SMR_RULE_ERROR;
  }
  if (errors)
    return SMR_EXIT_RULE_ERROR;
  if (smr_actions_failed(acts))
    return SMR_EXIT_ACTION_FAILED;
  if (issues)
    return SMR_EXIT_ISSUES;
  if (te && te->child)
    return smr_launch_wait(te->child);
  return SMR_EXIT_OK;
}

/* --strict (docs/cli.md#exit-status): a rule that evaluated nothing, or a
 * trial file that could not be read, fails a CI job instead of passing. */
static int strict_exit(smr_runner *r) {
  bool nodata = false;
  for (size_t i = 0; i < smr_runner_count(r); i++)
    nodata |=
        smr_instance_status(smr_runner_instance(r, i)) == SMR_RULE_NO_DATA;
  const smr_trial_problem *p;
  bool problems = smr_trial_problems(smr_runner_trial(r), &p) > 0;
  if (nodata || problems)
    fprintf(stderr, "smrules: --strict: %s\n",
            nodata ? "a rule evaluated nothing (NoData)"
                   : "part of the trial could not be read");
  return nodata || problems ? SMR_EXIT_NO_DATA : SMR_EXIT_OK;
}

/* ---- actions: built before the runner so that triggers reach them ---- */
static int start_actions(smr_job_opts *a, const smr_config *cfg, smr_trial *t,
                         bool launched, smr_actions **out, smr_error *err) {
  smr_actions_opts o = {.trial_dir = a->trial,
                        .job_name = a->job_name,
                        .training_pid = a->training_pid,
                        .launched = launched,
                        .dry_run = a->dry_run,
                        .verbose = a->verbose,
                        .db = smr_catalog_db(smr_trial_catalog(t)),
                        .output_dir = a->ropts.output_dir};
  int rc = smr_actions_new(cfg, &o, out, err);
  if (rc == SMR_OK && !smr_actions_empty(*out)) {
    /* an action log planted in the trial is never proof that one ran */
    smr_actions_note_trial_log(smr_trial_root(t), smr_trial_state_path(t));
    a->ropts.on_trigger = smr_actions_on_trigger;
    a->ropts.on_trigger_arg = *out;
  }
  return rc;
}

/* DIR/rule-output; for an S3 trial, next to its local catalog. */
static char *default_output_dir(const smr_job_opts *a) {
  if (!smr_location_is_remote(a->trial))
    return smr_xasprintf("%s/rule-output", a->trial);
  char *cache = smr_location_state_dir(a->trial);
  char *dir = smr_xasprintf("%s/rule-output", cache ? cache : ".");
  free(cache);
  return dir;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static smr_watch_opts watch_opts(const smr_job_opts *a, double timeout_s,
                                 int trainer_fd, const smr_launch *child,
                                 smr_watch_end *ended) {
  bool launched = child != NULL;
  FILE *out = a->json ? stderr : stdout;
  bool s3 = smr_location_is_remote(a->trial);
  smr_watch_opts wo = {.timeout_s = timeout_s,
                       .force_polling = a->poll || s3,
                       .poll_ms = s3 ? 5000 : 0, /* a listing per poll */
                       .progress = out,
                       .tty = isatty(fileno(out)) != 0,
                       .heartbeat_s = a->heartbeat_s,
                       .follow_trainer = trainer_fd >= 0,
                       .trainer_fd = trainer_fd,
                       .trainer_pgid = child ? smr_launch_pid(child) : 0,
                       .forwarding = launched,
                       .ended = ended};
  return wo;
}

/* The watch with a recording beside it (--profile): when training has
 * ended, the recording stops, its end is marked and the profiler rules
 * evaluate their final windows (ProfilerReport writes the HTML at the
 * finish). */
static void finish_profile(smr_profile_session *s, smr_trial *t, smr_runner *r,
                           smr_watch_end how, smr_error *err) {
  bool ended = how == SMR_WATCH_ENDED || how == SMR_WATCH_TRAINER ||
               smr_trial_end_marker(t);
  smr_profile_stop(s, ended);
  if (ended)
    smr_runner_run(r, err);
}

#define DEFAULT_GRACE_S 10.0

/* When smrules stops following before the command it started ends (a
 * timeout, a trial that cannot be read), the command is not left behind:
 * SIGTERM to its process group, SIGKILL after the grace (--kill-after,
 * 10 s).  What was done goes into te (when not NULL). */
/* Whether the command and every process of its group have exited. */
static bool child_over(const smr_launch *child) {
  struct pollfd p = {smr_launch_fd(child), POLLIN, 0};
  return poll(&p, 1, 0) > 0 && smr_proc_group_alive(smr_launch_pid(child)) == 0;
}

/* Waits up to `grace_s` for child_over: on the leader's descriptor while
 * it runs, then by looking at the group every 50 ms (no descriptor says
 * that a process group is empty).  Returns whether it came. */
static bool wait_child_over(const smr_launch *child, double grace_s) {
  double until = mono_s() + grace_s;
  while (!child_over(child)) {
    double left = until - mono_s();
    if (left <= 0)
      return false;
    struct pollfd p = {smr_launch_fd(child), POLLIN, 0};
    bool leader_running = poll(&p, 1, 0) == 0;
    if (!leader_running && left > 0.05)
      left = 0.05;
    poll(&p, leader_running ? 1 : 0, (int)(left * 1000) + 1);
  }
  return true;
}

static void end_child(smr_launch *child, double grace_s, smr_job_end *te) {
  if (child_over(child))
    return;
  if (grace_s < 0)
    grace_s = DEFAULT_GRACE_S;
  if (te && te->timed_out)
    fprintf(stderr,
            "smrules: --timeout %g s passed: SIGTERM sent to the training "
            "command (pid %lld and its process group); SIGKILL if it has "
            "not exited within %g s\n",
            te->timeout_s, (long long)smr_launch_pid(child), grace_s);
  kill(-(pid_t)smr_launch_pid(child), SIGTERM);
  bool killed = !wait_child_over(child, grace_s);
  if (killed)
    kill(-(pid_t)smr_launch_pid(child), SIGKILL);
  if (te) {
    te->sent_term = true;
    te->sent_kill = killed;
    te->grace_s = grace_s;
  }
}

/* An offline run stops at the next step once SIGINT/SIGTERM/SIGHUP came. */
static bool offline_interrupted(void) {
  return smr_interrupt_signal() != 0;
}

/* Evaluate once over what the trial holds (a progress line beside it). */
static void evaluate_offline(smr_runner *r, const smr_job_print *p,
                             smr_error *err) {
  void *pg = p->progress_start ? p->progress_start(p->arg, r) : NULL;
  smr_runner_run(r, err);
  if (p->progress_stop)
    p->progress_stop(p->arg, pg);
}

/* What a metrics snapshot is made of (--metrics-listen, --metrics-file). */
typedef struct metrics_pass {
  smr_metrics *m;
  smr_runner *r;
  smr_trial *t;
  smr_actions *acts;
} metrics_pass;

static void publish_pass(void *arg) {
  metrics_pass *mp = arg;
  smr_metrics_publish(mp->m, mp->r, mp->t, mp->acts);
}

/* Follow the trial until training ends (or the timeout, or a signal). */
static void evaluate_watch(const smr_job_opts *a, smr_trial *t, smr_runner *r,
                           int trainer_fd, double timeout_left,
                           smr_profile_session *prof, smr_job_end *te,
                           metrics_pass *mp, const smr_job_print *p) {
  smr_error err;
  smr_error_clear(&err);
  smr_watch_opts wo =
      watch_opts(a, timeout_left, trainer_fd, te->child, &te->how);
  if (mp->m) {
    wo.on_pass = publish_pass;
    wo.on_pass_arg = mp;
  }
  if (smr_watch_run(t, r, &wo, &err) != SMR_OK)
    report_error(p, &err, false);
  else if (te->how == SMR_WATCH_TIMEOUT && a->timeout_s > 0)
    te->timed_out = true;
  if (prof)
    finish_profile(prof, t, r, te->how, &err);
}

/* With the rules set up: evaluate, let the actions finish, end the
 * command, write the files, print the results; returns the exit status. */
static int evaluate_rules(smr_job_opts *a, smr_trial *t, smr_runner *r,
                          smr_actions *acts, smr_launch *child, int trainer_fd,
                          double timeout_left, smr_profile_session *prof,
                          const smr_job_print *p) {
  smr_error err;
  smr_error_clear(&err);
  smr_job_end te = {.how = SMR_WATCH_TIMEOUT,
                    .child = child,
                    .pid = child ? smr_launch_pid(child) : a->training_pid,
                    .timeout_s = a->timeout_s};
  metrics_pass mp = {a->metrics, r, t, acts};
  publish_pass(&mp);
  if (a->watch)
    evaluate_watch(a, t, r, trainer_fd, timeout_left, prof, &te, &mp, p);
  else
    evaluate_offline(r, p, &err);
  smr_runner_finish(r);
  smr_actions_finish(acts); /* every queued action has run */
  if (child) {
    end_child(child, a->kill_after_s, &te);
    smr_metrics_training(a->metrics, false, smr_launch_wait(child));
  } else if (a->watch && te.how == SMR_WATCH_TRAINER) {
    smr_metrics_training(a->metrics, false, -1); /* its status is not ours */
  }
  publish_pass(&mp);
  te.interrupted = child ? 0 : smr_interrupt_signal();
  te.stopped_by = smr_actions_stopped_by(acts);
  if (smr_output_write_files(r, a->ropts.output_dir, a->trial, &err) != SMR_OK)
    report_error(p, &err, false);
  if (p->results)
    p->results(p->arg, a, r, acts, a->watch ? &te : NULL);
  int rc = exit_for_results(r, acts, a->watch ? &te : NULL);
  if (rc == SMR_EXIT_OK && a->strict)
    rc = strict_exit(r);
  if (!a->watch && smr_interrupt_signal()) {
    fprintf(stderr,
            "smrules: interrupted by %s: the results are partial (rules "
            "not finished are InProgress); run again to go on from there\n",
            smr_signal_text(smr_interrupt_signal()));
    rc = 128 + smr_interrupt_signal();
  }
  return rc;
}

/* Open the trial, set up the actions and the rules, evaluate; returns the
 * exit status. */
static int evaluate(smr_job_opts *a, const smr_config *cfg, smr_launch *child,
                    int trainer_fd, double timeout_left,
                    smr_profile_session *prof, const smr_job_print *p) {
  smr_error err;
  smr_error_clear(&err);
  smr_trial *t = NULL;
  char *debug_dir, *profiler_dir;
  smr_job_resolve_dirs(a, &debug_dir, &profiler_dir);
  a->ropts.profiler_dir = profiler_dir;
  /* python: rules' processes start and load meanwhile (rulekind.h) */
  smr_python_prestart(cfg, debug_dir);
  if (smr_trial_open(debug_dir, &a->topts, &t, &err) != SMR_OK) {
    smr_python_prestart_end();
    report_error(p, &err, true);
    free(debug_dir);
    free(profiler_dir);
    return SMR_EXIT_UNREADABLE;
  }
  smr_runner *r = NULL;
  smr_actions *acts = NULL;
  char *dir = a->output ? smr_xstrdup(a->output) : default_output_dir(a);
  a->ropts.output_dir = dir;
  if (!a->watch) { /* Ctrl-C: finish the step in hand, report, keep state */
    smr_interrupt_install(NULL);
    a->ropts.interrupted = offline_interrupted;
  }
  int rc;
  if (start_actions(a, cfg, t, child != NULL, &acts, &err) != SMR_OK ||
      smr_runner_new(cfg, t, &a->ropts, &r, &err) != SMR_OK) {
    report_error(p, &err, true);
    rc = SMR_EXIT_USAGE;
  } else {
    rc =
        evaluate_rules(a, t, r, acts, child, trainer_fd, timeout_left, prof, p);
  }
  smr_python_prestart_end(); /* those no rule took */
  smr_runner_free(r);
  smr_actions_free(acts);
  free(dir);
  free(debug_dir);
  free(profiler_dir);
  smr_trial_close(t);
  return rc;
}

static int pidfd_of(int64_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
  (void)pid;
  return -1;
#endif
}

/* --timeout passed before a trial appeared: a command started is ended
 * as at the end of a watch, and the exit status says it was the timeout. */
static int timed_out_waiting(const smr_job_opts *a, smr_launch *child) {
  smr_job_end te = {.timed_out = true, .timeout_s = a->timeout_s};
  if (!child)
    return SMR_EXIT_TIMEOUT;
  end_child(child, a->kill_after_s, &te);
  smr_launch_wait(child);
  if (te.sent_kill)
    fprintf(stderr,
            "smrules: training: pid %lld %s (SIGTERM sent, still running "
            "%g s later: SIGKILL sent)\n",
            (long long)smr_launch_pid(child), smr_launch_outcome(child),
            te.grace_s);
  else
    fprintf(stderr, "smrules: training: pid %lld %s%s\n",
            (long long)smr_launch_pid(child), smr_launch_outcome(child),
            te.sent_term ? " (SIGTERM sent)" : "");
  return SMR_EXIT_TIMEOUT;
}

/* Before the trial exists (a watch started before training, a launched
 * command still importing): wait for it; returns nonzero to exit. */
static int wait_for_trial(const smr_job_opts *a, smr_job_presence *pr,
                          smr_launch *child, int trainer_fd,
                          const smr_job_print *p) {
  if (smr_job_trial_present(pr))
    return SMR_EXIT_OK;
  if (!a->watch) {
    smr_error e;
    smr_job_no_trial(pr, &e);
    report_error(p, &e, true);
    return SMR_EXIT_UNREADABLE;
  }
  fprintf(stderr,
          "smrules: waiting for a trial in %s (smdebug's index/ folder, "
          "written once training starts)\n",
          a->trial);
  smr_watch_opts wo = watch_opts(a, a->timeout_s, trainer_fd, child, NULL);
  switch (smr_watch_wait_until(smr_job_trial_present, pr, &wo)) {
  case SMR_WATCH_READY:
    return SMR_EXIT_OK;
  case SMR_WATCH_TRAINER: {
    int st = child ? smr_launch_wait(child) : 0;
    fprintf(stderr,
            "smrules: training ended (%s) before writing a trial "
            "in %s\n",
            child ? smr_launch_outcome(child) : "the process exited", a->trial);
    return st ? st : SMR_EXIT_UNREADABLE;
  }
  case SMR_WATCH_INTERRUPTED:
    return 128 + smr_interrupt_signal();
  default:
    fprintf(stderr, "smrules: %s: no trial appeared within %g s\n", a->trial,
            a->timeout_s);
    return timed_out_waiting(a, child);
  }
}

/* --profile: the recording starts before training does. */
static int start_profile(const smr_job_opts *a, smr_config *cfg,
                         smr_profile_session *prof) {
  if (smr_profile_prepare(a->profile) != 0 ||
      smr_profile_start(prof, a->profile, 500) != 0)
    return SMR_EXIT_UNREADABLE;
  smr_profile_add_report(cfg);
  return SMR_EXIT_OK;
}

/* From the launch on: follow, evaluate; returns the exit status. */
static int follow(smr_job_opts *a, smr_config *cfg, smr_job_presence *pr,
                  smr_launch **child, smr_profile_session *prof,
                  const smr_job_print *p) {
  smr_error err;
  smr_error_clear(&err);
  if (a->command && smr_launch_start(a->command, a->json, child, &err) != 0) {
    report_error(p, &err, false);
    return SMR_EXIT_CANNOT_RUN;
  }
  if (*child || (a->watch && a->training_pid > 0))
    smr_metrics_training(a->metrics, true, 0);
  int trainer_fd = -1;
  if (a->watch) {
    smr_interrupt_install(*child);
    if (*child)
      a->training_pid = smr_launch_pid(*child);
    trainer_fd = *child            ? smr_launch_fd(*child)
                 : a->training_pid ? pidfd_of(a->training_pid)
                                   : -1;
  }
  double t0 = mono_s();
  int rc = wait_for_trial(a, pr, *child, trainer_fd, p);
  if (!rc) {
    double left = a->timeout_s > 0 ? a->timeout_s - (mono_s() - t0) : 0;
    rc = evaluate(a, cfg, *child, trainer_fd,
                  a->timeout_s > 0 && left <= 0 ? 0.001 : left,
                  a->profile ? prof : NULL, p);
  }
  if (trainer_fd >= 0 && !*child)
    close(trainer_fd);
  return rc;
}

/* The metrics' job label: --job-name, else the trial folder's name (the
 * last part of an s3:// prefix). */
static char *job_label(const smr_job_opts *a) {
  if (a->job_name)
    return smr_xstrdup(a->job_name);
  size_t n = strlen(a->trial);
  while (n > 1 && a->trial[n - 1] == '/')
    n--;
  size_t b = n;
  while (b > 0 && a->trial[b - 1] != '/')
    b--;
  return smr_xstrndup(a->trial + b, n - b);
}

/* --metrics-listen / --metrics-file: the listener is up before training
 * starts, so a scrape sees the whole run. */
static int start_metrics(smr_job_opts *a, const smr_job_print *p) {
  if (!a->metrics_listen && !a->metrics_file)
    return SMR_EXIT_OK;
  char *job = job_label(a);
  smr_metrics_opts mo = {.listen = a->metrics_listen,
                         .file = a->metrics_file,
                         .job = job,
                         .announce = true};
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_metrics_start(&mo, &a->metrics, &err);
  free(job);
  if (rc != SMR_OK) {
    report_error(p, &err, true);
    return SMR_EXIT_USAGE;
  }
  return SMR_EXIT_OK;
}

int smr_job_run(smr_job_opts *a, smr_config *cfg, const smr_job_print *p) {
  if (a->command)
    a->watch = a->topts.live = a->ropts.live = true;
  apply_settings(cfg, &a->ropts);
  smr_error err;
  int rc = SMR_EXIT_OK;
  /* with a command, every configuration error is found before it starts */
  if (a->command && smr_job_check_config(cfg, true, &err) != SMR_OK) {
    report_error(p, &err, true);
    return SMR_EXIT_USAGE;
  }
  /* TensorBoard: rules.yaml `tensorboard:` (docs/tensorboard.md) */
  if (smr_config_tb_settings(cfg, &a->tbs, &err) != SMR_OK) {
    report_error(p, &err, true);
    return SMR_EXIT_USAGE;
  }
  a->topts.tensorboard = &a->tbs;
  smr_profile_session prof = {0};
  if (a->profile)
    rc = start_profile(a, cfg, &prof);
  smr_job_presence pr = {a, smr_job_needs_tensor_data(cfg)};
  if (!rc && !a->watch && !smr_job_trial_present(&pr)) {
    smr_job_no_trial(&pr, &err);
    report_error(p, &err, true);
    rc = SMR_EXIT_UNREADABLE;
  }
  if (!rc)
    rc = start_metrics(a, p);
  smr_launch *child = NULL;
  if (!rc)
    rc = follow(a, cfg, &pr, &child, &prof, p);
  if (child) { /* never left running behind smrules (a no-op once it ended) */
    end_child(child, a->kill_after_s, NULL);
    smr_metrics_training(a->metrics, false, smr_launch_wait(child));
  }
  if (a->metrics) {
    if (smr_metrics_write_file(a->metrics, &err) != SMR_OK)
      report_error(p, &err, false);
    smr_metrics_free(a->metrics);
    a->metrics = NULL;
  }
  smr_profile_stop(&prof, false); /* a no-op once it was stopped */
  smr_launch_free(child);
  smr_config_tb_free(&a->tbs);
  return rc;
}
