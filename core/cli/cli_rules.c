/* cli_rules.c - `smrules run`, `validate`, `list` and `describe`. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "action/action.h"
#include "base/embedded.h"
#include "base/jsonw.h"
#include "cli/cli.h"
#include "config/config.h"
#include "config/params.h"
#include "host/plugin.h"
#include "host/rulehost.h"
#include "profiler/profiler.h"
#include "run/output.h"
#include "run/runner.h"
#include "run/watch.h"
#include "source/source_s3.h"
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
  if (o->jobs <= 0 && cfg->root && (n = smr_node_get(cfg->root, "jobs")) &&
      n->type == SMR_NODE_INT)
    o->jobs = (int)n->i;
}

static int exit_for_results(smr_runner *r) {
  bool issues = false, errors = false;
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    smr_rule_status s = smr_instance_status(smr_runner_instance(r, i));
    issues |= s == SMR_RULE_ISSUES;
    errors |= s == SMR_RULE_ERROR;
  }
  if (issues)
    return SMR_EXIT_ISSUES;
  return errors ? SMR_EXIT_RULE_ERROR : SMR_EXIT_OK;
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
  OPT_SCHEDULE
};

static const char *RUN_HELP =
    "usage: smrules run --trial DIR [--rules rules.yaml] [options]\n"
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
    "                     training_job_end.ts appears (implies --live)\n"
    "  --timeout S        with --watch: stop after S seconds\n"
    "  --poll             with --watch: poll instead of using inotify\n"
    "  -v, --verbose      log rule warnings and debug messages\n"
    "  --s3-endpoint URL  S3-compatible endpoint for s3:// trials (default\n"
    "                     AWS_ENDPOINT_URL, else AWS; see docs/s3.md)\n"
    "exit status: 0 no issues, 1 issues found, 2 usage or configuration\n"
    "error, 3 trial unreadable, 5 a rule failed (and none found issues)\n";

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
      {"verbose", no_argument, NULL, 'v'},
      {"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},
      {"help", no_argument, NULL, 'h'},
      {0, 0, 0, 0}};
  a->ropts.start_step = a->ropts.end_step = -1;
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
    case OPT_S3_ENDPOINT:
      smr_s3_set_endpoint(optarg);
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
  bool job = smr_s3_location_has(a->trial, "debug-output");
  *debug = job ? s3_sub(a->trial, "debug-output") : smr_xstrdup(a->trial);
  if (a->profiler)
    *profiler = smr_xstrdup(a->profiler);
  else if (smr_s3_location_has(a->trial, "profiler-output"))
    *profiler = s3_sub(a->trial, "profiler-output");
  else if (smr_s3_location_has(a->trial, "system") ||
           smr_s3_location_has(a->trial, "framework"))
    *profiler = smr_xstrdup(a->trial);
  else
    *profiler = NULL;
}

static void resolve_dirs(const run_args *a, char **debug, char **profiler) {
  if (smr_is_s3_location(a->trial)) {
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

/* ---- actions: built before the runner so that triggers reach them ---- */
static int start_actions(run_args *a, const smr_config *cfg, smr_trial *t,
                         smr_actions **out, smr_error *err) {
  smr_actions_opts o = {.trial_dir = a->trial,
                        .training_pid = a->training_pid,
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
  if (!smr_is_s3_location(a->trial))
    return smr_xasprintf("%s/rule-output", a->trial);
  char *cache = smr_s3_cache_dir(a->trial);
  char *dir = smr_xasprintf("%s/rule-output", cache ? cache : ".");
  free(cache);
  return dir;
}

/* Follow the trial until training ends (or --timeout); progress goes to
 * stdout (stderr with --json), as a redrawn block on a terminal. */
static void watch(const run_args *a, smr_trial *t, smr_runner *r,
                  smr_error *err) {
  FILE *out = a->json ? stderr : stdout;
  bool s3 = smr_is_s3_location(a->trial);
  smr_watch_opts wo = {.timeout_s = a->timeout_s,
                       .force_polling = a->poll || s3,
                       .poll_ms = s3 ? 5000 : 0, /* a listing per poll */
                       .progress = out,
                       .tty = isatty(fileno(out)) != 0};
  if (smr_watch_run(t, r, &wo, err) != SMR_OK)
    smr_cli_print_error(err);
}

int smr_cmd_run(int argc, char **argv) {
  run_args a;
  memset(&a, 0, sizeof a);
  int rc = parse_run_args(argc, argv, &a);
  if (rc)
    return rc < 0 ? SMR_EXIT_OK : rc;
  json_errors = a.json;
  smr_config cfg;
  if ((rc = load_config(a.rules, &cfg)))
    return rc;
  apply_settings(&cfg, &a.ropts);
  smr_error err;
  smr_error_clear(&err);
  smr_trial *t = NULL;
  char *debug_dir, *profiler_dir;
  resolve_dirs(&a, &debug_dir, &profiler_dir);
  a.ropts.profiler_dir = profiler_dir;
  if (smr_trial_open(debug_dir, &a.topts, &t, &err) != SMR_OK) {
    smr_cli_print_error(&err);
    print_json_error(&err);
    smr_config_free(&cfg);
    free(debug_dir);
    free(profiler_dir);
    return SMR_EXIT_UNREADABLE;
  }
  smr_runner *r = NULL;
  smr_actions *acts = NULL;
  char *dir = a.output ? smr_xstrdup(a.output) : default_output_dir(&a);
  a.ropts.output_dir = dir;
  if (start_actions(&a, &cfg, t, &acts, &err) != SMR_OK) {
    rc = config_error(&err);
  } else if (smr_runner_new(&cfg, t, &a.ropts, &r, &err) != SMR_OK) {
    rc = config_error(&err);
  } else {
    if (a.watch)
      watch(&a, t, r, &err);
    else
      smr_runner_run(r, &err);
    smr_runner_finish(r);
    smr_actions_finish(acts); /* every queued action has run */
    if (smr_output_write_files(r, dir, a.trial, &err) != SMR_OK)
      smr_cli_print_error(&err);
    if (a.json) {
      char *aj = smr_actions_json(acts);
      char *s = smr_output_run_json_actions(r, a.trial, aj);
      printf("%s\n", s);
      free(s);
      free(aj);
    } else {
      smr_output_run_table(r, a.trial);
      smr_actions_print_summary(acts, stdout);
    }
    rc = exit_for_results(r);
  }
  smr_runner_free(r);
  smr_actions_free(acts);
  free(dir);
  free(debug_dir);
  free(profiler_dir);
  smr_trial_close(t);
  smr_config_free(&cfg);
  return rc;
}

/* ------------------------------------------------------------ validate */

/* Check a rules.yaml completely, including every rule's parameters and
 * the syntax of every Lua script, without reading a trial. */
static int check_rule_params(const smr_config *cfg) {
  for (size_t i = 0; i < cfg->n_rules; i++) {
    const smr_rule_config *rc = &cfg->rules[i];
    smr_error err;
    smr_error_clear(&err);
    if (rc->lua) { /* compiled, not run: running needs the trial */
      if (smr_lua_rule_check(rc->lua, &err) == SMR_OK)
        continue;
      fprintf(stderr, "smrules: %s: line %d, column %d: %s\n", cfg->path,
              rc->line, rc->col, err.msg);
      return SMR_EXIT_USAGE;
    }
    smr_plugin *p;
    int st = rc->plugin ? smr_plugin_load(rc->plugin, &p, &err)
                        : smr_plugin_find(rc->rule, &p, &err);
    if (st != SMR_OK) {
      fprintf(stderr, "smrules: %s: line %d, column %d: %s\n", cfg->path,
              rc->line, rc->col, err.msg);
      return SMR_EXIT_USAGE;
    }
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
static int check_actions(const smr_config *cfg) {
  smr_actions_opts o = {.validate_only = true};
  smr_actions *acts = NULL;
  smr_error err;
  smr_error_clear(&err);
  if (smr_actions_new(cfg, &o, &acts, &err) != SMR_OK)
    return config_error(&err);
  smr_actions_free(acts);
  return SMR_EXIT_OK;
}

int smr_cmd_validate(int argc, char **argv) {
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(argc == 2 ? stdout : stderr,
            "usage: smrules validate rules.yaml\n");
    return argc == 2 ? SMR_EXIT_OK : SMR_EXIT_USAGE;
  }
  smr_config cfg;
  int rc = load_config(argv[1], &cfg);
  if (rc)
    return rc;
  rc = check_rule_params(&cfg);
  if (rc == SMR_EXIT_OK)
    rc = check_actions(&cfg);
  if (rc == SMR_EXIT_OK)
    printf("%s: OK (%zu rule%s)\n", argv[1], cfg.n_rules,
           cfg.n_rules == 1 ? "" : "s");
  smr_config_free(&cfg);
  return rc;
}

/* ------------------------------------------------------- list, describe */

int smr_cmd_list(int argc, char **argv) {
  (void)argc;
  (void)argv;
  smr_plugin **all;
  size_t n;
  smr_plugin_all(&all, &n);
  for (size_t i = 0; i < n; i++)
    printf("%-30s %s\n", all[i]->reg->name,
           all[i]->reg->description ? all[i]->reg->description : "");
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

int smr_cmd_describe(int argc, char **argv) {
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: smrules describe RULE\n");
    return SMR_EXIT_USAGE;
  }
  smr_plugin *p;
  smr_error err;
  if (smr_plugin_find(argv[1], &p, &err) != SMR_OK) {
    smr_cli_print_error(&err);
    return SMR_EXIT_USAGE;
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
