/* cli_run.c - `smrules run`: its options, and what it prints (the results
 * table or JSON, how training ended).  The run itself is core/job/. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "cli/cli.h"
#include "cli/cli_progress.h"
#include "host/rulehost.h"
#include "run/output.h"
#include "source/source.h"

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
  OPT_HEARTBEAT,
  OPT_KILL_AFTER,
  OPT_FORMAT,
  OPT_METRICS_LISTEN,
  OPT_METRICS_FILE,
  OPT_JOB_NAME,
  OPT_STRICT
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
    "                     and/or profiler-output/; or s3://BUCKET/PREFIX\n"
    "  --profiler DIR     the profiler-output folder (profiler rules), or\n"
    "                     s3://BUCKET/PREFIX\n"
    "  --rules FILE       rules.yaml (default: the built-in default set)\n"
    "  --json             print results as JSON\n"
    "  --strict           for CI: exit 6 when a rule evaluated nothing\n"
    "                     (NoData) or part of the trial could not be read\n"
    "  --output DIR       where rule-output/<rule>/ files go\n"
    "                     (default DIR/rule-output; for s3:// trials\n"
    "                     ~/.cache/smrules/s3/<hash>/rule-output)\n"
    "  --start-step N     first global step to evaluate\n"
    "  --end-step N       stop before this global step\n"
    "  -j N, --jobs N     rules evaluated in parallel (default: jobs: in\n"
    "                     rules.yaml, else the number of cores)\n"
    "  --schedule ORDER   rules: each rule over all steps, side by side;\n"
    "                     steps: all rules step by step (each record read\n"
    "                     once); auto (default): steps for several rules\n"
    "  --live             smdebug's view of a run still writing: stop at\n"
    "                     a step not yet complete (status InProgress)\n"
    "  --state PATH       catalog and rule state (default "
    "DIR/.smrules/state.db)\n"
    "  --fresh            evaluate from scratch; read and store no state\n"
    "  --format F         auto (default), smdebug or tensorboard: what the\n"
    "                     trial folder holds (docs/tensorboard.md)\n"
    "  --training-pid N   the training process StopTraining may stop;\n"
    "                     with --watch its exit ends the watch\n"
    "  --dry-run          report what actions would do and do nothing\n"
    "                     (rules evaluated from the start, no state kept)\n"
    "  --watch            follow a trial while training writes it: evaluate\n"
    "                     each new step at once, end when\n"
    "                     training_job_end.ts appears or the\n"
    "                     --training-pid process exits (implies --live);\n"
    "                     a folder not there yet is waited for\n"
    "  --timeout S        with --watch or a command: stop after S seconds\n"
    "                     and exit 124; a command started here gets\n"
    "                     SIGTERM, then SIGKILL after --kill-after\n"
    "  --kill-after S     with a command: its grace after that SIGTERM\n"
    "                     (default 10)\n"
    "  --profile DIR      with --watch or a command: record this machine's\n"
    "                     system metrics into DIR (smrules monitor),\n"
    "                     evaluate the profiler rules on them live and\n"
    "                     write ProfilerReport when training ends\n"
    "  --poll             with --watch or a command: poll instead of\n"
    "                     using inotify\n"
    "  --sagemaker-windows  profiler rules stop as SageMaker's do, before\n"
    "                     the window holding the last minute of data\n"
    "                     (default: evaluate that final window too)\n"
    "  --heartbeat S      with --watch or a command, not on a terminal: a\n"
    "                     status line every S seconds while nothing else\n"
    "                     is printed (default 60, 0: off)\n"
    "  --metrics-listen HOST:PORT  serve GET /metrics (Prometheus text)\n"
    "                     while the run lasts; HOST defaults to 127.0.0.1,\n"
    "                     port 0 picks one (docs/metrics.md)\n"
    "  --metrics-file PATH  write the same text to PATH, atomically, when\n"
    "                     the run ends (node_exporter's textfile collector)\n"
    "  --job-name NAME    the metrics' job label (default: the trial\n"
    "                     folder's name)\n"
    "  -v, --verbose      log rule warnings and debug messages\n"
    "  --s3-endpoint URL  S3-compatible endpoint for s3:// trials (default\n"
    "                     AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else\n"
    "                     AWS; see docs/s3.md)\n"
    "  -h, --help         this help\n"
    "exit status (first that applies): 128+N interrupted by signal N,\n"
    "124 --timeout passed, 5 a rule failed, 4 an action failed, 1 issues\n"
    "found, the command's status when it failed, 6 with --strict no data,\n"
    "0; before evaluating:\n"
    "2 usage or configuration error, 3 no trial or trial unreadable,\n"
    "127 command cannot run\n";

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

static int parse_run_args(int argc, char **argv, smr_job_opts *a,
                          const char **rules) {
  static const struct option longopts[] = {
      {"trial", required_argument, NULL, 't'},
      {"rules", required_argument, NULL, 'r'},
      {"json", no_argument, NULL, OPT_JSON},
      {"strict", no_argument, NULL, OPT_STRICT},
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
      {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
      {"verbose", no_argument, NULL, 'v'},
      {"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},
      {"sagemaker-windows", no_argument, NULL, OPT_SAGEMAKER_WINDOWS},
      {"profile", required_argument, NULL, OPT_PROFILE},
      {"format", required_argument, NULL, OPT_FORMAT},
      {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
      {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
      {"job-name", required_argument, NULL, OPT_JOB_NAME},
      {"help", no_argument, NULL, 'h'},
      {0, 0, 0, 0}};
  a->ropts.start_step = a->ropts.end_step = -1;
  a->heartbeat_s = 60;
  a->kill_after_s = -1; /* the job's default */
  smr_lua_limits_default(&a->ropts.lua);
  int c, rc;
  optind = 1;
  opterr = 0; /* smr_cli_bad_option says it, with a suggestion */
  while ((c = getopt_long(argc, argv, ":t:r:j:vh", longopts, NULL)) != -1) {
    switch (c) {
    case 't':
      a->trial = optarg;
      break;
    case 'r':
      *rules = optarg;
      break;
    case OPT_JSON:
      a->json = true;
      break;
    case OPT_STRICT:
      a->strict = true;
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
    case OPT_KILL_AFTER: {
      char *end;
      a->kill_after_s = strtod(optarg, &end);
      if (*end || end == optarg || a->kill_after_s < 0) {
        fprintf(stderr, "smrules: --kill-after needs seconds, got '%s'\n",
                optarg);
        return SMR_EXIT_USAGE;
      }
      break;
    }
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
    case OPT_METRICS_LISTEN:
      a->metrics_listen = optarg;
      break;
    case OPT_METRICS_FILE:
      a->metrics_file = optarg;
      break;
    case OPT_JOB_NAME:
      a->job_name = optarg;
      break;
    case OPT_S3_ENDPOINT:
      smr_source_set_endpoint(optarg);
      break;
    case OPT_SAGEMAKER_WINDOWS:
      a->ropts.sagemaker_windows = true;
      break;
    case OPT_PROFILE:
      a->profile = optarg;
      break;
    case OPT_FORMAT: /* TensorBoard (docs/tensorboard.md) */
      if ((a->topts.format = smr_trial_format_parse(optarg)) < 0) {
        fprintf(stderr,
                "smrules: --format takes auto, smdebug or "
                "tensorboard, not '%s'\n",
                optarg);
        return SMR_EXIT_USAGE;
      }
      break;
    case 'v':
      smr_log_set_level(0);
      a->verbose = true;
      break;
    case 'h':
      fputs(RUN_HELP, stdout);
      return -1;
    default:
      return smr_cli_bad_option("run", argv, "trjvh", longopts);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "smrules: unexpected argument '%s'\n", argv[optind]);
    return SMR_EXIT_USAGE;
  }
  if (a->profile && ((!a->watch && !a->command) || a->profiler ||
                     smr_location_is_remote(a->profile))) {
    fprintf(stderr, "smrules: --profile DIR needs --watch or a command, and "
                    "a local DIR, and replaces --profiler\n");
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

/* ---- how training ended: a line under the table, a JSON object ---- */
/* What --timeout did, after the training line. */
static void print_timeout(const smr_job_end *te, FILE *f) {
  fprintf(f, "timeout: --timeout %g s passed", te->timeout_s);
  if (te->child && te->sent_kill)
    fprintf(f,
            "; SIGTERM sent to the command's process group, still running "
            "%g s later: SIGKILL sent",
            te->grace_s);
  else if (te->child && te->sent_term)
    fprintf(f,
            "; SIGTERM sent to the command's process group, which exited "
            "within the %g s grace",
            te->grace_s);
  else if (te->child)
    fprintf(f, "; the command had already exited");
  else if (te->pid > 0)
    fprintf(f, "; smrules did not start pid %lld: it was left running",
            (long long)te->pid);
  else
    fprintf(f, "; stopped following the trial");
  fprintf(f, " (exit %d)\n", SMR_EXIT_TIMEOUT);
}

static void print_training(const smr_job_end *te, FILE *f) {
  fprintf(f, "\ntraining: ");
  if (te->child)
    fprintf(f, "pid %lld %s", (long long)te->pid,
            smr_launch_outcome(te->child));
  else if (te->how == SMR_WATCH_TRAINER)
    fprintf(f, "pid %lld exited", (long long)te->pid);
  else if (te->how == SMR_WATCH_ENDED)
    fprintf(f, "ended (training_job_end.ts)");
  else if (te->how == SMR_WATCH_TIMEOUT && te->timed_out && te->pid > 0)
    fprintf(f, "pid %lld still running when --timeout passed",
            (long long)te->pid);
  else if (te->how == SMR_WATCH_TIMEOUT && te->timed_out)
    fprintf(f, "still running when --timeout passed");
  else
    fprintf(f, "still running");
  if (te->stopped_by)
    fprintf(f, ", stopped by StopTraining (rule %s)", te->stopped_by);
  if (te->interrupted)
    fprintf(f, "; smrules was interrupted by %s",
            smr_signal_text(te->interrupted));
  fprintf(f, "\n");
  if (te->timed_out && !te->interrupted)
    print_timeout(te, f);
}

static char *training_json(const smr_job_end *te) {
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "ended_by");
  smr_jw_str(&w, smr_job_end_name(te));
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
  smr_jw_key(&w, "timeout");
  if (te->timed_out) {
    smr_jw_obj(&w);
    smr_jw_key(&w, "seconds");
    smr_jw_double(&w, te->timeout_s);
    smr_jw_key(&w, "sent");
    smr_jw_str(&w, te->sent_kill   ? "SIGTERM,SIGKILL"
                   : te->sent_term ? "SIGTERM"
                                   : NULL);
    smr_jw_key(&w, "grace_seconds");
    if (te->sent_term)
      smr_jw_double(&w, te->grace_s);
    else
      smr_jw_null(&w);
    smr_jw_obj_end(&w);
  } else {
    smr_jw_null(&w);
  }
  smr_jw_key(&w, "interrupted_by");
  smr_jw_str(&w, te->interrupted ? smr_signal_text(te->interrupted) : NULL);
  smr_jw_obj_end(&w);
  return smr_jw_finish(&w);
}

/* smr_job_print's results: the table (or JSON), the actions, how training
 * ended, where the reports are. */
static void print_results(void *arg, const smr_job_opts *a, smr_runner *r,
                          smr_actions *acts, const smr_job_end *te) {
  (void)arg;
  smr_output_read_problems(r, stderr); /* damaged files, once each */
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

/* Split `run [options] -- COMMAND [ARG...]`; the options part stays in
 * argc/argv.  Returns nonzero on a `--` with nothing after it. */
static int split_command(int *argc, char **argv, smr_job_opts *a) {
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

static void print_error(void *arg, const smr_error *e, bool ends) {
  smr_cli_print_error(e);
  if (ends)
    smr_cli_print_json_error(e, ((const smr_job_opts *)arg)->json);
}

static void *progress_start(void *arg, smr_runner *r) {
  (void)arg;
  return smr_cli_progress_start(r); /* a terminal */
}

static void progress_stop(void *arg, void *progress) {
  (void)arg;
  smr_cli_progress_stop(progress);
}

int smr_cmd_run(int argc, char **argv) {
  smr_job_opts a;
  memset(&a, 0, sizeof a);
  const char *rules = NULL; /* NULL: the built-in default set */
  int rc = split_command(&argc, argv, &a);
  if (!rc)
    rc = parse_run_args(argc, argv, &a, &rules);
  if (rc)
    return rc < 0 ? SMR_EXIT_OK : rc;
  if (a.command && a.training_pid) {
    fprintf(stderr, "smrules: --training-pid and a command: the command "
                    "started after '--' is the training process\n");
    return SMR_EXIT_USAGE;
  }
  smr_config cfg;
  if ((rc = smr_cli_load_config(rules, &cfg, a.json)))
    return rc;
  smr_job_print p = {.arg = &a,
                     .error = print_error,
                     .results = print_results,
                     .progress_start = progress_start,
                     .progress_stop = progress_stop};
  rc = smr_job_run(&a, &cfg, &p);
  smr_config_free(&cfg);
  return rc;
}
