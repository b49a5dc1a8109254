/* cli_rules.c - `smrules run`, `validate`, `list` and `describe`. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "action/action.h"
#include "base/embedded.h"
#include "base/jsonw.h"
#include "cli/cli.h"
#include "cli/cli_profile.h"
#include "cli/cli_progress.h"
#include "config/config.h"
#include "config/params.h"
#include "host/plugin.h"
#include "host/rulehost.h"
#include "lua/lua_params.h"
#include "profiler/profiler.h"
#include "run/launch.h"
#include "run/output.h"
#include "run/runner.h"
#include "run/watch.h"
#include "source/source.h"
#include "trial/catalog.h"
#include "trial/trial.h"

#define DEFAULT_RULES "rules/default.yaml"

/* With `run --json`, errors are also printed as {"error": {...}} on stdout
 * so that a caller parsing stdout always gets one JSON document. */
static bool json_errors;

static void print_json_error(const smr_error *e) {
  if (!json_errors)
    return;
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "error");
  smr_jw_obj(&w);
  smr_jw_key(&w, "status");
  smr_jw_str(&w, smr_status_name(e->status));
  smr_jw_key(&w, "file");
  smr_jw_str(&w, e->file[0] ? e->file : NULL);
  smr_jw_key(&w, "message");
  smr_jw_str(&w, e->msg);
  smr_jw_obj_end(&w);
  smr_jw_obj_end(&w);
  char *text = smr_jw_finish(&w);
  printf("%s\n", text);
  free(text);
}

static int config_error(const smr_error *e) {
  smr_cli_print_error(e);
  print_json_error(e);
  return SMR_EXIT_USAGE;
}

static int load_config(const char *path, smr_config *cfg) {
  smr_error err;
  smr_error_clear(&err);
  int rc;
  if (path) {
    rc = smr_config_load(path, cfg, &err);
  } else {
    size_t len;
    const char *text = smr_embedded(DEFAULT_RULES, &len);
    if (!text) {
      fprintf(stderr, "smrules: no default rule set compiled in\n");
      return SMR_EXIT_USAGE;
    }
    rc = smr_config_parse(text, len, "<default rules>", ".", cfg, &err);
  }
  return rc == SMR_OK ? SMR_EXIT_OK : config_error(&err);
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

/* How the followed training ended (run --watch, run -- COMMAND). */
typedef struct training_end {
  smr_watch_end how;
  smr_launch *child;      /* run -- COMMAND (reaped), else NULL */
  int64_t pid;            /* --training-pid, else the child's */
  int interrupted;        /* the signal smrules got (0: none) */
  const char *stopped_by; /* rule whose StopTraining signalled it */
} training_end;

/* Exit status precedence (docs/cli.md): 128+N when smrules itself was
 * interrupted by signal N (the results are partial) > 5 a rule failed >
 * 4 an action failed > 1 issues found > the launched command's status
 * when it failed > 0. */
static int exit_for_results(smr_runner *r, smr_actions *acts,
                            const training_end *te) {
  if (te && te->interrupted)
    return 128 + te->interrupted;
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

typedef struct run_args {
  const char *trial, *rules, *output, *profiler;
  smr_trial_opts topts;
  smr_run_opts ropts;
  bool json;
  /* actions (core/action.h) */
  int64_t training_pid;
  bool dry_run, verbose;
  /* --watch (core/watch.h) */
  bool watch, poll;
  double timeout_s;
  const char *profile; /* --profile DIR (cli_profile.h) */
  char **command;      /* run [options] -- COMMAND [ARG...] */
  double heartbeat_s;  /* --heartbeat (< 0: not given, 60) */
} run_args;

enum {
  OPT_STATE = 1000,
  OPT_FRESH,
  OPT_LIVE,
  OPT_JSON,
  OPT_START,
  OPT_END,
  OPT_TRAINING_PID,
  OPT_DRY_RUN,
  OPT_WATCH,
  OPT_TIMEOUT,
  OPT_POLL,
  OPT_OUTPUT,
  OPT_PROFILER,
  OPT_S3_ENDPOINT,
  OPT_SCHEDULE,
  OPT_SAGEMAKER_WINDOWS,
  OPT_PROFILE,
  OPT_HEARTBEAT
};

static const char *RUN_HELP =
    "usage: smrules run --trial DIR [--rules rules.yaml] [options]\n"
    "       smrules run --trial DIR [--rules rules.yaml] [options] -- "
    "COMMAND [ARG...]\n"
    "  -- COMMAND ARG...  start the training command, follow DIR while it\n"
    "                     runs (as --watch), StopTraining stops it; ends\n"
    "                     when it exits\n"
    "  --trial DIR        the trial (smdebug out_dir), a profiler-output\n"
    "                     folder, or a job folder holding debug-output/\n"
    "                     and/or profiler-output/\n"
    "  --profiler DIR     the profiler-output folder (profiler rules), or\n"
    "                     s3://BUCKET/PREFIX\n"
    "  --rules FILE       rules.yaml (default: the built-in default set)\n"
    "  --json             print results as JSON\n"
    "  --output DIR       where rule-output/<rule>/ files go\n"
    "                     (default DIR/rule-output; for s3:// trials\n"
    "                     ~/.cache/smrules/s3/<hash>/rule-output)\n"
    "  --start-step N     first global step to evaluate\n"
    "  --end-step N       stop before this global step\n"
    "  --jobs N           rules evaluated in parallel (default: cores)\n"
    "  --schedule ORDER   rules: each rule over all steps, side by side;\n"
    "                     steps: all rules step by step (each record read\n"
    "                     once); auto (default): steps for several rules\n"
    "  --live             smdebug's view of a run still writing: stop at\n"
    "                     a step not yet complete (status InProgress)\n"
    "  --state PATH       catalog and rule state (default "
    "DIR/.smrules/state.db)\n"
    "  --fresh            evaluate from scratch; read and store no state\n"
    "  --training-pid N   the training process StopTraining may stop\n"
    "  --dry-run          report what actions would do and do nothing\n"
    "                     (rules evaluated from the start, no state kept)\n"
    "  --watch            follow a trial while training writes it: evaluate\n"
    "                     each new step at once, end when\n"
    "                     training_job_end.ts appears or the\n"
    "                     --training-pid process exits (implies --live);\n"
    "                     a folder not there yet is waited for\n"
    "  --timeout S        with --watch: stop after S seconds\n"
    "  --profile DIR      with --watch: record this machine's system metrics\n"
    "                     into DIR (smrules monitor), evaluate the profiler\n"
    "                     rules on them live and write ProfilerReport when\n"
    "                     training ends\n"
    "  --poll             with --watch: poll instead of using inotify\n"
    "  --sagemaker-windows  profiler rules stop as SageMaker's do, before\n"
    "                     the window holding the last minute of data\n"
    "                     (default: evaluate that final window too)\n"
    "  --heartbeat S      with --watch, not on a terminal: a status line\n"
    "                     every S seconds while nothing else is printed\n"
    "                     (default 60, 0: off)\n"
    "  -v, --verbose      log rule warnings and debug messages\n"
    "  --s3-endpoint URL  S3-compatible endpoint for s3:// trials (default\n"
    "                     AWS_ENDPOINT_URL, else AWS; see docs/s3.md)\n"
    "exit status (first that applies): 128+N interrupted by signal N,\n"
    "5 a rule failed, 4 an action failed, 1 issues found, the command's\n"
    "status when it failed, 0; before evaluating: 2 usage or configuration\n"
    "error, 3 no trial or trial unreadable, 127 command cannot run\n";

static int parse_step(const char *s, int64_t *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (*end || end == s || v < 0) {
    fprintf(stderr, "smrules: expected a step number, got '%s'\n", s);
    return SMR_EXIT_USAGE;
  }
  *out = v;
  return SMR_EXIT_OK;
}

static int parse_schedule(const char *s, smr_schedule *out) {
  static const char *const names[] = {"auto", "rules", "steps"};
  for (int i = 0; i < 3; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (smr_schedule)i;
      return SMR_EXIT_OK;
    }
  fprintf(stderr,
          "smrules: --schedule: expected auto, rules or steps, got "
          "'%s'\n",
          s);
  return SMR_EXIT_USAGE;
}

static int parse_run_args(int argc, char **argv, run_args *a) {
  static const struct option longopts[] = {
      {"trial", required_argument, NULL, 't'},
      {"rules", required_argument, NULL, 'r'},
      {"json", no_argument, NULL, OPT_JSON},
      {"output", required_argument, NULL, OPT_OUTPUT},
      {"profiler", required_argument, NULL, OPT_PROFILER},
      {"start-step", required_argument, NULL, OPT_START},
      {"end-step", required_argument, NULL, OPT_END},
      {"jobs", required_argument, NULL, 'j'},
      {"schedule", required_argument, NULL, OPT_SCHEDULE},
      {"live", no_argument, NULL, OPT_LIVE},
      {"state", required_argument, NULL, OPT_STATE},
      {"fresh", no_argument, NULL, OPT_FRESH},
      {"training-pid", required_argument, NULL, OPT_TRAINING_PID},
      {"dry-run", no_argument, NULL, OPT_DRY_RUN},
      {"watch", no_argument, NULL, OPT_WATCH},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"poll", no_argument, NULL, OPT_POLL},
      {"heartbeat", required_argument, NULL, OPT_HEARTBEAT},
      {"verbose", no_argument, NULL, 'v'},
      {"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},
      {"sagemaker-windows", no_argument, NULL, OPT_SAGEMAKER_WINDOWS},
      {"profile", required_argument, NULL, OPT_PROFILE},
      {"help", no_argument, NULL, 'h'},
      {0, 0, 0, 0}};
  a->ropts.start_step = a->ropts.end_step = -1;
  a->heartbeat_s = 60;
  smr_lua_limits_default(&a->ropts.lua);
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, "t:r:j:vh", longopts, NULL)) != -1) {
    switch (c) {
    case 't':
      a->trial = optarg;
      break;
    case 'r':
      a->rules = optarg;
      break;
    case OPT_JSON:
      a->json = true;
      break;
    case OPT_OUTPUT:
      a->output = optarg;
      break;
    case OPT_PROFILER:
      a->profiler = optarg;
      break;
    case OPT_START:
      if ((rc = parse_step(optarg, &a->ropts.start_step)))
        return rc;
      break;
    case OPT_END:
      if ((rc = parse_step(optarg, &a->ropts.end_step)))
        return rc;
      break;
    case 'j':
      a->ropts.jobs = atoi(optarg);
      break;
    case OPT_SCHEDULE:
      if ((rc = parse_schedule(optarg, &a->ropts.schedule)))
        return rc;
      break;
    case OPT_LIVE:
      a->topts.live = true;
      a->ropts.live = true;
      break;
    case OPT_STATE:
      a->topts.state_path = optarg;
      break;
    case OPT_FRESH:
      a->topts.fresh = true;
      a->ropts.fresh = true;
      break;
    case OPT_TRAINING_PID:
      if ((rc = parse_step(optarg, &a->training_pid)) || a->training_pid < 2) {
        fprintf(stderr, "smrules: --training-pid needs a process id\n");
        return SMR_EXIT_USAGE;
      }
      break;
    case OPT_DRY_RUN: /* evaluate as from scratch; store no rule state */
      a->dry_run = true;
      a->ropts.fresh = true;
      break;
    case OPT_WATCH:
      a->watch = true;
      a->topts.live = true;
      a->ropts.live = true;
      break;
    case OPT_TIMEOUT: {
      char *end;
      a->timeout_s = strtod(optarg, &end);
      if (*end || end == optarg || a->timeout_s <= 0) {
        fprintf(stderr, "smrules: --timeout needs seconds, got '%s'\n", optarg);
        return SMR_EXIT_USAGE;
      }
      break;
    }
    case OPT_POLL:
      a->poll = true;
      break;
    case OPT_HEARTBEAT: {
      char *end;
      a->heartbeat_s = strtod(optarg, &end);
      if (*end || end == optarg || a->heartbeat_s < 0) {
        fprintf(stderr,
                "smrules: --heartbeat needs seconds (0: off), got '%s'\n",
                optarg);
        return SMR_EXIT_USAGE;
      }
      break;
    }
    case OPT_S3_ENDPOINT:
      smr_source_set_endpoint(optarg);
      break;
    case OPT_SAGEMAKER_WINDOWS:
      a->ropts.sagemaker_windows = true;
      break;
    case OPT_PROFILE:
      a->profile = optarg;
      break;
    case 'v':
      smr_log_set_level(0);
      a->verbose = true;
      break;
    case 'h':
      fputs(RUN_HELP, stdout);
      return -1;
    default:
      fputs(RUN_HELP, stderr);
      return SMR_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "smrules: unexpected argument '%s'\n", argv[optind]);
    return SMR_EXIT_USAGE;
  }
  if (a->profile && ((!a->watch && !a->command) || a->profiler ||
                     smr_location_is_remote(a->profile))) {
    fprintf(stderr, "smrules: --profile DIR needs --watch and a local DIR, "
                    "and replaces --profiler\n");
    return SMR_EXIT_USAGE;
  }
  if (a->profile)
    a->profiler = a->profile;
  if (!a->trial)
    a->trial = a->profiler;
  if (!a->trial) {
    fprintf(stderr, "smrules: run needs --trial DIR\n");
    return SMR_EXIT_USAGE;
  }
  return SMR_EXIT_OK;
}

/* ---- profiler data: which folder is the debug trial, which the
 * profiler output (--trial may name either, or a job folder). ---- */
static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* s3://.../job: debug-output/ when it holds keys; the profiler output is
 * --profiler, else profiler-output/ when it holds keys, else the trial
 * itself when it holds system/ or framework/ keys (as for a local
 * folder).  Each look is one short listing. */
static char *s3_sub(const char *url, const char *sub) {
  size_t n = strlen(url);
  while (n > 5 && url[n - 1] == '/') /* s3://b/job/ names s3://b/job */
    n--;
  return smr_xasprintf("%.*s/%s", (int)n, url, sub);
}

static void resolve_s3_dirs(const run_args *a, char **debug, char **profiler) {
  bool job = smr_location_has(a->trial, "debug-output");
  *debug = job ? s3_sub(a->trial, "debug-output") : smr_xstrdup(a->trial);
  if (a->profiler)
    *profiler = smr_xstrdup(a->profiler);
  else if (smr_location_has(a->trial, "profiler-output"))
    *profiler = s3_sub(a->trial, "profiler-output");
  else if (smr_location_has(a->trial, "system") ||
           smr_location_has(a->trial, "framework"))
    *profiler = smr_xstrdup(a->trial);
  else
    *profiler = NULL;
}

static void resolve_dirs(const run_args *a, char **debug, char **profiler) {
  if (smr_location_is_remote(a->trial)) {
    resolve_s3_dirs(a, debug, profiler);
    return;
  }
  char *dbg = smr_xasprintf("%s/debug-output", a->trial);
  char *prof = smr_xasprintf("%s/profiler-output", a->trial);
  *debug = smr_xstrdup(is_dir(dbg) ? dbg : a->trial);
  if (a->profiler)
    *profiler = smr_xstrdup(a->profiler);
  else if (is_dir(prof))
    *profiler = smr_xstrdup(prof);
  else if (smr_profiler_dir_looks_like(a->trial))
    *profiler = smr_xstrdup(a->trial);
  else
    *profiler = NULL;
  free(dbg);
  free(prof);
}

/* ---- is there a trial?  Checked before anything is written there. */
static bool exists(const char *dir, const char *name) {
  char *p = smr_xasprintf("%s/%s", dir, name);
  struct stat st;
  bool ok = stat(p, &st) == 0;
  free(p);
  return ok;
}

static bool has_debug_data(const char *dir) {
  return exists(dir, "index") || exists(dir, "events") ||
         exists(dir, "training_job_end.ts");
}

/* Whether some rule reads tensors (every rule but profiler plugins). */
static bool needs_tensor_data(const smr_config *cfg) {
  for (size_t i = 0; i < cfg->n_rules; i++) {
    const smr_rule_config *rc = &cfg->rules[i];
    if (rc->lua)
      return true;
    smr_plugin *p;
    smr_error err;
    smr_error_clear(&err);
    int st = rc->plugin ? smr_plugin_load(rc->plugin, &p, &err)
                        : smr_plugin_find(rc->rule, &p, &err);
    if (st != SMR_OK)
      return true; /* reported when the rules are set up */
    bool tensor = p->reg->kind != SMRULES_KIND_PROFILER;
    smr_plugin_unload(p);
    if (tensor)
      return true;
  }
  return false;
}

typedef struct presence {
  const run_args *a;
  bool tensor; /* the rules need smdebug's tensors, not only profiler data */
} presence;

static bool trial_present(void *arg) {
  const presence *p = arg;
  if (smr_location_is_remote(p->a->trial))
    return true; /* read as it is (a listing per look is not free) */
  char *debug, *prof;
  resolve_dirs(p->a, &debug, &prof);
  /* profiler rules alone need profiler data, and the trial folder to
   * exist (it is opened all the same; a launched trainer makes it) */
  bool ok = has_debug_data(debug) ||
            (!p->tensor && prof &&
             (smr_location_is_remote(prof) ||
              (smr_profiler_dir_looks_like(prof) && is_dir(debug))));
  free(debug);
  free(prof);
  return ok;
}

static void print_no_trial(const presence *p) {
  const char *d = p->a->trial;
  smr_error e;
  smr_error_clear(&e);
  if (!is_dir(d))
    smr_error_set(&e, SMR_ERR_IO, d, -1,
                  "no such folder (expected a trial: smdebug's out_dir)");
  else
    smr_error_set(
        &e, SMR_ERR_IO, d, -1,
        "no trial here: expected smdebug's index/ and events/ "
        "folders (or training_job_end.ts) in %s or in "
        "%s/debug-output%s",
        d, d, p->tensor ? "" : ", or profiler data (system/ or framework/)");
  smr_cli_print_error(&e);
  print_json_error(&e);
}

/* ---- actions: built before the runner so that triggers reach them ---- */
static int start_actions(run_args *a, const smr_config *cfg, smr_trial *t,
                         bool launched, smr_actions **out, smr_error *err) {
  smr_actions_opts o = {.trial_dir = a->trial,
                        .training_pid = a->training_pid,
                        .launched = launched,
                        .dry_run = a->dry_run,
                        .verbose = a->verbose,
                        .db = smr_catalog_db(smr_trial_catalog(t))};
  int rc = smr_actions_new(cfg, &o, out, err);
  if (rc == SMR_OK && !smr_actions_empty(*out)) {
    a->ropts.on_trigger = smr_actions_on_trigger;
    a->ropts.on_trigger_arg = *out;
  }
  return rc;
}

/* DIR/rule-output; for an S3 trial, next to its local catalog. */
static char *default_output_dir(const run_args *a) {
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

static smr_watch_opts watch_opts(const run_args *a, int trainer_fd,
                                 bool launched, smr_watch_end *ended) {
  FILE *out = a->json ? stderr : stdout;
  bool s3 = smr_location_is_remote(a->trial);
  smr_watch_opts wo = {.timeout_s = a->timeout_s,
                       .force_polling = a->poll || s3,
                       .poll_ms = s3 ? 5000 : 0, /* a listing per poll */
                       .progress = out,
                       .tty = isatty(fileno(out)) != 0,
                       .heartbeat_s = a->heartbeat_s,
                       .follow_trainer = trainer_fd >= 0,
                       .trainer_fd = trainer_fd,
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

/* ---- how training ended: a line under the table, a JSON object ---- */
static const char *END_NAMES[] = {"end_marker", "trainer_exit", "interrupted",
                                  "timeout", "end_marker"};

static void print_training(const training_end *te, FILE *f) {
  fprintf(f, "\ntraining: ");
  if (te->child)
    fprintf(f, "pid %lld %s", (long long)te->pid,
            smr_launch_outcome(te->child));
  else if (te->how == SMR_WATCH_TRAINER)
    fprintf(f, "pid %lld exited", (long long)te->pid);
  else if (te->how == SMR_WATCH_ENDED)
    fprintf(f, "ended (training_job_end.ts)");
  else if (te->how == SMR_WATCH_TIMEOUT)
    fprintf(f, "still running when --timeout passed");
  else
    fprintf(f, "still running");
  if (te->stopped_by)
    fprintf(f, ", stopped by StopTraining (rule %s)", te->stopped_by);
  if (te->interrupted)
    fprintf(f, "; smrules was interrupted by %s",
            smr_signal_text(te->interrupted));
  fprintf(f, "\n");
}

static char *training_json(const training_end *te) {
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "ended_by");
  smr_jw_str(&w, END_NAMES[te->how]);
  smr_jw_key(&w, "pid");
  if (te->pid > 0)
    smr_jw_int(&w, te->pid);
  else
    smr_jw_null(&w);
  smr_jw_key(&w, "launched");
  smr_jw_bool(&w, te->child != NULL);
  smr_jw_key(&w, "exit_code");
  if (te->child && smr_launch_exit_code(te->child) >= 0)
    smr_jw_int(&w, smr_launch_exit_code(te->child));
  else
    smr_jw_null(&w);
  smr_jw_key(&w, "signal");
  smr_jw_str(&w, te->child && smr_launch_signal(te->child)
                     ? smr_signal_text(smr_launch_signal(te->child))
                     : NULL);
  smr_jw_key(&w, "stopped_by");
  smr_jw_str(&w, te->stopped_by);
  smr_jw_key(&w, "interrupted_by");
  smr_jw_str(&w, te->interrupted ? smr_signal_text(te->interrupted) : NULL);
  smr_jw_obj_end(&w);
  return smr_jw_finish(&w);
}

/* When smrules stops following before the command it started ends (a
 * timeout, a trial that cannot be read), the command is not left behind:
 * SIGTERM to its process group, SIGKILL after 10 s. */
static void end_child(smr_launch *child) {
  int fd = smr_launch_fd(child);
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, 0) > 0)
    return;
  kill(-(pid_t)smr_launch_pid(child), SIGTERM);
  if (poll(&p, 1, 10000) <= 0)
    kill(-(pid_t)smr_launch_pid(child), SIGKILL);
}

static void report_results(const run_args *a, smr_runner *r, smr_actions *acts,
                           const training_end *te) {
  if (a->json) {
    char *aj = smr_actions_json(acts);
    char *tj = te ? training_json(te) : NULL;
    char *s = smr_output_run_json_training(r, a->trial, aj, tj);
    printf("%s\n", s);
    free(s);
    free(aj);
    free(tj);
    /* stdout holds the JSON */
    smr_output_report_paths(r, a->ropts.output_dir, stderr);
  } else {
    smr_output_run_table(r, a->trial);
    smr_actions_print_summary(acts, stdout);
    if (te)
      print_training(te, stdout);
    smr_output_report_paths(r, a->ropts.output_dir, stdout);
  }
}

/* An offline run stops at the next step once SIGINT/SIGTERM/SIGHUP came. */
static bool offline_interrupted(void) {
  return smr_interrupt_signal() != 0;
}

/* Open the trial, evaluate (follow it with --watch), write the reports
 * and state, print the results; returns the exit status. */
static int evaluate(run_args *a, const smr_config *cfg, smr_launch *child,
                    int trainer_fd, double timeout_left,
                    smr_profile_session *prof) {
  smr_error err;
  smr_error_clear(&err);
  smr_trial *t = NULL;
  char *debug_dir, *profiler_dir;
  resolve_dirs(a, &debug_dir, &profiler_dir);
  a->ropts.profiler_dir = profiler_dir;
  if (smr_trial_open(debug_dir, &a->topts, &t, &err) != SMR_OK) {
    smr_cli_print_error(&err);
    print_json_error(&err);
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
  training_end te = {.how = SMR_WATCH_TIMEOUT,
                     .child = child,
                     .pid = child ? smr_launch_pid(child) : a->training_pid};
  int rc;
  if (start_actions(a, cfg, t, child != NULL, &acts, &err) != SMR_OK) {
    rc = config_error(&err);
  } else if (smr_runner_new(cfg, t, &a->ropts, &r, &err) != SMR_OK) {
    rc = config_error(&err);
  } else {
    if (a->watch) {
      run_args wa = *a;
      wa.timeout_s = timeout_left;
      smr_watch_opts wo = watch_opts(&wa, trainer_fd, child != NULL, &te.how);
      if (smr_watch_run(t, r, &wo, &err) != SMR_OK)
        smr_cli_print_error(&err);
      if (prof)
        finish_profile(prof, t, r, te.how, &err);
    } else {
      smr_cli_progress *pg = smr_cli_progress_start(r); /* a terminal */
      smr_runner_run(r, &err);
      smr_cli_progress_stop(pg);
    }
    smr_runner_finish(r);
    smr_actions_finish(acts); /* every queued action has run */
    if (child) {
      end_child(child);
      smr_launch_wait(child);
    }
    te.interrupted = child ? 0 : smr_interrupt_signal();
    te.stopped_by = smr_actions_stopped_by(acts);
    if (smr_output_write_files(r, dir, a->trial, &err) != SMR_OK)
      smr_cli_print_error(&err);
    report_results(a, r, acts, a->watch ? &te : NULL);
    rc = exit_for_results(r, acts, a->watch ? &te : NULL);
    if (!a->watch && smr_interrupt_signal()) {
      fprintf(stderr,
              "smrules: interrupted by %s: the results are partial (rules "
              "not finished are InProgress); run again to go on from there\n",
              smr_signal_text(smr_interrupt_signal()));
      rc = 128 + smr_interrupt_signal();
    }
  }
  smr_runner_free(r);
  smr_actions_free(acts);
  free(dir);
  free(debug_dir);
  free(profiler_dir);
  smr_trial_close(t);
  return rc;
}

static int check_rule_params(const smr_config *cfg);
static int check_actions(const smr_config *cfg, bool launched);

/* Split `run [options] -- COMMAND [ARG...]`; the options part stays in
 * argc/argv.  Returns nonzero on a `--` with nothing after it. */
static int split_command(int *argc, char **argv, run_args *a) {
  for (int i = 1; i < *argc; i++)
    if (strcmp(argv[i], "--") == 0) {
      if (i + 1 >= *argc) {
        fprintf(stderr, "smrules: run: '--' must be followed by the "
                        "training command\n");
        return SMR_EXIT_USAGE;
      }
      a->command = argv + i + 1;
      *argc = i;
      break;
    }
  return SMR_EXIT_OK;
}

static int pidfd_of(int64_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
  (void)pid;
  return -1;
#endif
}

/* Before the trial exists (a watch started before training, a launched
 * command still importing): wait for it; returns nonzero to exit. */
static int wait_for_trial(const run_args *a, presence *pr, smr_launch *child,
                          int trainer_fd) {
  if (trial_present(pr))
    return SMR_EXIT_OK;
  if (!a->watch) {
    print_no_trial(pr);
    return SMR_EXIT_UNREADABLE;
  }
  fprintf(stderr,
          "smrules: waiting for a trial in %s (smdebug's index/ folder, "
          "written once training starts)\n",
          a->trial);
  smr_watch_opts wo = watch_opts(a, trainer_fd, child != NULL, NULL);
  switch (smr_watch_wait_until(trial_present, pr, &wo)) {
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
    if (child)
      end_child(child);
    return SMR_EXIT_UNREADABLE;
  }
}

int smr_cmd_run(int argc, char **argv) {
  run_args a;
  memset(&a, 0, sizeof a);
  int rc = split_command(&argc, argv, &a);
  if (!rc)
    rc = parse_run_args(argc, argv, &a);
  if (rc)
    return rc < 0 ? SMR_EXIT_OK : rc;
  if (a.command && a.training_pid) {
    fprintf(stderr, "smrules: --training-pid and a command: the command "
                    "started after '--' is the training process\n");
    return SMR_EXIT_USAGE;
  }
  if (a.command)
    a.watch = a.topts.live = a.ropts.live = true;
  json_errors = a.json;
  smr_config cfg;
  if ((rc = load_config(a.rules, &cfg)))
    return rc;
  apply_settings(&cfg, &a.ropts);
  /* with a command, every configuration error is found before it starts */
  if (a.command && !(rc = check_rule_params(&cfg)))
    rc = check_actions(&cfg, true);
  /* --profile: the recording starts before training does */
  smr_profile_session prof = {0};
  if (!rc && a.profile) {
    if (smr_profile_prepare(a.profile) != 0 ||
        smr_profile_start(&prof, a.profile, 500) != 0)
      rc = SMR_EXIT_UNREADABLE;
    else
      smr_profile_add_report(&cfg);
  }
  presence pr = {&a, needs_tensor_data(&cfg)};
  if (!rc && !a.watch && !trial_present(&pr)) {
    print_no_trial(&pr);
    rc = SMR_EXIT_UNREADABLE;
  }
  smr_launch *child = NULL;
  smr_error err;
  smr_error_clear(&err);
  if (!rc && a.command &&
      smr_launch_start(a.command, a.json, &child, &err) != SMR_OK) {
    smr_cli_print_error(&err);
    rc = 127; /* as a shell reports a command it cannot run */
  }
  int trainer_fd = -1;
  if (!rc && a.watch) {
    smr_interrupt_install(child);
    if (child)
      a.training_pid = smr_launch_pid(child);
    trainer_fd = child            ? smr_launch_fd(child)
                 : a.training_pid ? pidfd_of(a.training_pid)
                                  : -1;
  }
  double t0 = mono_s();
  if (!rc)
    rc = wait_for_trial(&a, &pr, child, trainer_fd);
  if (!rc) {
    double left = a.timeout_s > 0 ? a.timeout_s - (mono_s() - t0) : 0;
    rc = evaluate(&a, &cfg, child, trainer_fd,
                  a.timeout_s > 0 && left <= 0 ? 0.001 : left,
                  a.profile ? &prof : NULL);
  }
  if (child) { /* never left running behind smrules (a no-op once it ended) */
    end_child(child);
    smr_launch_wait(child);
  }
  if (trainer_fd >= 0 && !child)
    close(trainer_fd);
  smr_profile_stop(&prof, false); /* a no-op once it was stopped */
  smr_launch_free(child);
  smr_config_free(&cfg);
  return rc;
}

/* ------------------------------------------------------------ validate */

/* A rule's problem at its place in rules.yaml (stderr, and stdout as
 * {"error": ...} with --json). */
static int positioned_error(const smr_config *cfg, const smr_rule_config *rc,
                            const smr_error *e) {
  smr_error pe;
  smr_error_clear(&pe);
  smr_error_set(&pe, SMR_ERR_USAGE, cfg->path ? cfg->path : "", -1,
                "line %d, column %d: %s", rc->line, rc->col, e->msg);
  return config_error(&pe);
}

/* Check a rules.yaml completely, including every rule's parameters and
 * the syntax of every Lua script, without reading a trial. */
static int check_rule_params(const smr_config *cfg) {
  for (size_t i = 0; i < cfg->n_rules; i++) {
    const smr_rule_config *rc = &cfg->rules[i];
    smr_error err;
    smr_error_clear(&err);
    if (rc->lua) { /* compiled, not run: running needs the trial */
      if (smr_lua_rule_check(rc->lua, &err) != SMR_OK)
        return positioned_error(cfg, rc, &err);
      smr_params params; /* its -- @param declarations */
      const char *base = strrchr(rc->lua, '/');
      base = base ? base + 1 : rc->lua;
      const char *dot = strrchr(base, '.'); /* named lua:<stem>, as in run */
      int stem =
          (int)(dot && dot != base ? (size_t)(dot - base) : strlen(base));
      char *rule = smr_xasprintf("lua:%.*s", stem, base);
      int st = smr_lua_params_apply(rule, rc->lua, rc->parameters, rc->line,
                                    rc->col, cfg->path, &params, &err);
      free(rule);
      smr_params_free(&params);
      if (st != SMR_OK)
        return err.file[0] ? config_error(&err)
                           : positioned_error(cfg, rc, &err);
      continue;
    }
    smr_plugin *p;
    int st = rc->plugin ? smr_plugin_load(rc->plugin, &p, &err)
                        : smr_plugin_find(rc->rule, &p, &err);
    if (st != SMR_OK)
      return positioned_error(cfg, rc, &err);
    void *settings = smr_xcalloc(1, p->reg->settings_size + 1);
    smr_params params;
    static const smrules_param none[] = {{.type = SMRULES_PARAM_END}};
    st = smr_params_apply(p->reg->name, p->reg->params ? p->reg->params : none,
                          rc->parameters, rc->line, rc->col, cfg->path,
                          settings, &params, &err);
    smr_params_free(&params);
    free(settings);
    smr_plugin_unload(p);
    if (st != SMR_OK)
      return config_error(&err);
  }
  return SMR_EXIT_OK;
}

/* Action settings and every rule's actions (no process is looked at). */
static int check_actions(const smr_config *cfg, bool launched) {
  smr_actions_opts o = {.validate_only = true, .launched = launched};
  smr_actions *acts = NULL;
  smr_error err;
  smr_error_clear(&err);
  if (smr_actions_new(cfg, &o, &acts, &err) != SMR_OK)
    return config_error(&err);
  smr_actions_free(acts);
  return SMR_EXIT_OK;
}

/* `--json` anywhere among the arguments of validate, list, describe;
 * the others are returned in order.  Returns how many there are. */
static int take_json_flag(int argc, char **argv, bool *json, char **rest) {
  int n = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0)
      *json = true;
    else
      rest[n++] = argv[i];
  }
  return n;
}

int smr_cmd_validate(int argc, char **argv) {
  bool json = false;
  char *rest[argc > 0 ? argc : 1];
  int n = take_json_flag(argc, argv, &json, rest);
  if (n != 1 || rest[0][0] == '-') {
    bool help =
        n == 1 && (!strcmp(rest[0], "--help") || !strcmp(rest[0], "-h"));
    fprintf(help ? stdout : stderr,
            "usage: smrules validate [--json] rules.yaml\n");
    return help ? SMR_EXIT_OK : SMR_EXIT_USAGE;
  }
  json_errors = json;
  smr_config cfg;
  int rc = load_config(rest[0], &cfg);
  if (rc)
    return rc;
  rc = check_rule_params(&cfg);
  if (rc == SMR_EXIT_OK)
    rc = check_actions(&cfg, false);
  if (rc == SMR_EXIT_OK && json) {
    smr_jw w = {0};
    smr_jw_obj(&w);
    smr_jw_key(&w, "file");
    smr_jw_str(&w, rest[0]);
    smr_jw_key(&w, "ok");
    smr_jw_bool(&w, true);
    smr_jw_key(&w, "rules");
    smr_jw_arr(&w);
    for (size_t i = 0; i < cfg.n_rules; i++) {
      const smr_rule_config *r = &cfg.rules[i];
      smr_jw_obj(&w);
      smr_jw_key(&w, "name");
      smr_jw_str(&w, r->name);
      smr_jw_key(&w, "rule");
      smr_jw_str(&w, r->rule ? r->rule : r->lua ? r->lua : r->plugin);
      smr_jw_key(&w, "kind");
      smr_jw_str(&w, r->lua ? "lua" : r->plugin ? "plugin" : "builtin");
      smr_jw_key(&w, "line");
      smr_jw_int(&w, r->line);
      smr_jw_obj_end(&w);
    }
    smr_jw_arr_end(&w);
    smr_jw_obj_end(&w);
    char *text = smr_jw_finish(&w);
    printf("%s\n", text);
    free(text);
  } else if (rc == SMR_EXIT_OK) {
    printf("%s: OK (%zu rule%s)\n", rest[0], cfg.n_rules,
           cfg.n_rules == 1 ? "" : "s");
  }
  smr_config_free(&cfg);
  return rc;
}

/* ------------------------------------------------------- list, describe */

static const char *kind_name(const smrules_rule *r) {
  return r->kind == SMRULES_KIND_PROFILER ? "profiler" : "tensor";
}

int smr_cmd_list(int argc, char **argv) {
  bool json = false;
  char *rest[argc > 0 ? argc : 1];
  if (take_json_flag(argc, argv, &json, rest) != 0) {
    fprintf(stderr, "usage: smrules list [--json]\n");
    return SMR_EXIT_USAGE;
  }
  smr_plugin **all;
  size_t n;
  smr_plugin_all(&all, &n);
  smr_jw w = {0};
  if (json)
    smr_jw_arr(&w);
  for (size_t i = 0; i < n; i++) {
    const smrules_rule *r = all[i]->reg;
    if (!json) {
      printf("%-30s %s\n", r->name, r->description ? r->description : "");
      continue;
    }
    smr_jw_obj(&w);
    smr_jw_key(&w, "name");
    smr_jw_str(&w, r->name);
    smr_jw_key(&w, "description");
    smr_jw_str(&w, r->description);
    smr_jw_key(&w, "kind");
    smr_jw_str(&w, kind_name(r));
    smr_jw_key(&w, "plugin");
    smr_jw_str(&w, all[i]->path);
    smr_jw_obj_end(&w);
  }
  if (json) {
    smr_jw_arr_end(&w);
    char *text = smr_jw_finish(&w);
    printf("%s\n", text);
    free(text);
  }
  if (n == 0)
    fprintf(stderr, "smrules: no rule plugins found (searched "
                    "SMRULES_PLUGIN_PATH and next to the executable)\n");
  smr_plugin_all_free(all, n);
  return n ? SMR_EXIT_OK : SMR_EXIT_USAGE;
}

static void bound_text(const smrules_param *p, char *buf, size_t n) {
  buf[0] = '\0';
  size_t used = 0;
  if (p->flags & SMRULES_P_MIN)
    used += (size_t)snprintf(
        buf, n, "%s %g", p->flags & SMRULES_P_MIN_OPEN ? ">" : ">=", p->min);
  if (p->flags & SMRULES_P_MAX)
    snprintf(buf + used, n - used, "%s%s %g", used ? ", " : "",
             p->flags & SMRULES_P_MAX_OPEN ? "<" : "<=", p->max);
  if (p->allowed) {
    used = strlen(buf);
    for (size_t i = 0; p->allowed[i] && used + 2 < n; i++)
      used += (size_t)snprintf(buf + used, n - used, "%s%s",
                               used ? (i ? "|" : ", one of ")
                                    : (i ? "|" : "one of "),
                               p->allowed[i]);
  }
  if (!buf[0])
    snprintf(buf, n, "-");
}

static void describe_json(const smr_plugin *p) {
  const smrules_rule *r = p->reg;
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "name");
  smr_jw_str(&w, r->name);
  smr_jw_key(&w, "description");
  smr_jw_str(&w, r->description);
  smr_jw_key(&w, "kind");
  smr_jw_str(&w, kind_name(r));
  smr_jw_key(&w, "data");
  smr_jw_str(&w, r->data_needed);
  smr_jw_key(&w, "plugin");
  smr_jw_str(&w, p->path);
  smr_jw_key(&w, "parameters");
  smr_jw_arr(&w);
  for (const smrules_param *q = r->params; q && q->type != SMRULES_PARAM_END;
       q++) {
    smr_jw_obj(&w);
    smr_jw_key(&w, "name");
    smr_jw_str(&w, q->name);
    smr_jw_key(&w, "type");
    smr_jw_str(&w, smr_param_type_name(q->type));
    smr_jw_key(&w, "default");
    smr_jw_str(&w, q->default_value);
    smr_jw_key(&w, "required");
    smr_jw_bool(&w, (q->flags & SMRULES_P_REQUIRED) != 0);
    smr_jw_key(&w, "min");
    if (q->flags & SMRULES_P_MIN)
      smr_jw_double(&w, q->min);
    else
      smr_jw_null(&w);
    smr_jw_key(&w, "min_exclusive");
    smr_jw_bool(&w, (q->flags & SMRULES_P_MIN_OPEN) != 0);
    smr_jw_key(&w, "max");
    if (q->flags & SMRULES_P_MAX)
      smr_jw_double(&w, q->max);
    else
      smr_jw_null(&w);
    smr_jw_key(&w, "max_exclusive");
    smr_jw_bool(&w, (q->flags & SMRULES_P_MAX_OPEN) != 0);
    smr_jw_key(&w, "allowed");
    if (q->allowed) {
      smr_jw_arr(&w);
      for (size_t i = 0; q->allowed[i]; i++)
        smr_jw_str(&w, q->allowed[i]);
      smr_jw_arr_end(&w);
    } else {
      smr_jw_null(&w);
    }
    smr_jw_key(&w, "aliases");
    smr_jw_str(&w, q->aliases);
    smr_jw_key(&w, "description");
    smr_jw_str(&w, q->description);
    smr_jw_obj_end(&w);
  }
  smr_jw_arr_end(&w);
  smr_jw_obj_end(&w);
  char *text = smr_jw_finish(&w);
  printf("%s\n", text);
  free(text);
}

int smr_cmd_describe(int argc, char **argv) {
  bool json = false;
  char *rest[argc > 0 ? argc : 1];
  int n = take_json_flag(argc, argv, &json, rest);
  if (n != 1 || rest[0][0] == '-') {
    fprintf(stderr, "usage: smrules describe [--json] RULE\n");
    return SMR_EXIT_USAGE;
  }
  json_errors = json;
  smr_plugin *p;
  smr_error err;
  smr_error_clear(&err);
  if (smr_plugin_find(rest[0], &p, &err) != SMR_OK) {
    smr_cli_print_error(&err);
    print_json_error(&err);
    return SMR_EXIT_USAGE;
  }
  if (json) {
    describe_json(p);
    smr_plugin_unload(p);
    return SMR_EXIT_OK;
  }
  const smrules_rule *r = p->reg;
  printf("%s\n  %s\n\n", r->name, r->description ? r->description : "");
  printf("kind:        %s\n", r->kind == SMRULES_KIND_PROFILER
                                  ? "profiler (evaluated per time window)"
                                  : "tensor (evaluated per step)");
  printf("data:        %s\n", r->data_needed ? r->data_needed : "-");
  printf("plugin:      %s\n\nparameters:\n", p->path);
  printf("  %-28s %-16s %-24s %-20s %s\n", "NAME", "TYPE", "DEFAULT", "VALID",
         "DESCRIPTION");
  for (const smrules_param *q = r->params; q && q->type != SMRULES_PARAM_END;
       q++) {
    char bounds[160];
    bound_text(q, bounds, sizeof bounds);
    printf("  %-28s %-16s %-24s %-20s %s%s\n", q->name,
           smr_param_type_name(q->type),
           q->default_value
               ? q->default_value
               : (q->flags & SMRULES_P_REQUIRED ? "(required)" : "(unset)"),
           bounds, q->description ? q->description : "",
           q->aliases ? " (also accepted as: " : "");
    if (q->aliases)
      printf("  %-28s %s)\n", "", q->aliases);
  }
  smr_plugin_unload(p);
  return SMR_EXIT_OK;
}
