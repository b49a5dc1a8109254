/* cli_trial.c - the trial options `inspect` and `tensor` share. */
#include "cli/cli_trial.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "cli/cli.h"
#include "config/config_tb.h"
#include "source/source.h"

bool smr_cli_trial_opt(smr_trial_args *a, int c) {
  switch (c) {
  case 't':
    a->trial = optarg;
    return true;
  case OPT_STATE:
    a->opts.state_path = optarg;
    return true;
  case OPT_FRESH:
    a->opts.fresh = true;
    return true;
  case OPT_LIVE:
    a->opts.live = true;
    return true;
  case OPT_JSON:
    a->json = 1;
    return true;
  case OPT_S3_ENDPOINT:
    smr_source_set_endpoint(optarg);
    return true;
  case OPT_RULES:
    a->rules = optarg;
    return true;
  case OPT_FORMAT: /* TensorBoard (docs/tensorboard.md) */
    if ((a->opts.format = smr_trial_format_parse(optarg)) < 0) {
      fprintf(stderr,
              "smrules: --format takes auto, smdebug or tensorboard, "
              "not '%s'\n",
              optarg);
      exit(SMR_EXIT_USAGE);
    }
    return true;
  default:
    return false;
  }
}

const char *const SMR_TRIAL_HELP =
    "  --trial DIR      the trial (smdebug out_dir) to read, a directory or\n"
    "                   s3://BUCKET/PREFIX (docs/s3.md)\n"
    "  --json           print JSON instead of a table\n"
    "  --live           smdebug's view of a run still writing: only\n"
    "                   training_job_end.ts ends training\n"
    "  --state PATH     keep the catalog in this file (default: in memory,\n"
    "                   nothing is written into the trial; for s3:// trials\n"
    "                   a file under ~/.cache/smrules/s3/)\n"
    "  --fresh          use a private in-memory catalog\n"
    "  --format F       auto (default), smdebug or tensorboard: what the\n"
    "                   folder holds (docs/tensorboard.md)\n"
    "  --rules FILE     read a TensorBoard folder with the tensorboard:\n"
    "                   settings of this rules.yaml, as run does (its rules\n"
    "                   are not run)\n"
    "  --s3-endpoint URL  S3-compatible endpoint for s3:// trials\n"
    "                   (default AWS_ENDPOINT_URL, else AWS)\n";

/* --rules: its `tensorboard:` settings, checked as `run` checks them. */
static int load_tb_settings(smr_trial_args *a) {
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_config_load(a->rules, &a->cfg, &err);
  if (rc == SMR_OK) {
    a->have_cfg = true;
    rc = smr_config_tb_settings(&a->cfg, &a->tbs, &err);
  }
  if (rc != SMR_OK) {
    smr_cli_print_error(&err);
    if (a->json)
      smr_cli_jw_error_shape(&err, -1, NULL);
    if (a->have_cfg)
      smr_config_free(&a->cfg);
    a->have_cfg = false;
    return SMR_EXIT_USAGE;
  }
  a->opts.tensorboard = &a->tbs;
  return SMR_EXIT_OK;
}

static void free_tb_settings(smr_trial_args *a) {
  if (!a->have_cfg)
    return;
  smr_config_tb_free(&a->tbs);
  smr_config_free(&a->cfg);
  a->opts.tensorboard = NULL;
  a->have_cfg = false;
}

void smr_cli_close_trial(smr_trial_args *a, smr_trial *t) {
  smr_trial_close(t);
  free_tb_settings(a);
}

int smr_cli_open_trial(smr_trial_args *a, smr_trial **t) {
  smr_error err;
  smr_error_clear(&err);
  if (!a->trial) {
    fprintf(stderr, "smrules: --trial DIR is required\n");
    return SMR_EXIT_USAGE;
  }
  if (a->rules) {
    int st = load_tb_settings(a);
    if (st)
      return st;
  }
  /* read-only commands write nothing into a local trial: without --state
   * their catalog lives in memory (an s3:// trial's lives in the per-user
   * cache, ~/.cache/smrules/s3/) */
  smr_trial_opts o = a->opts;
  if (!o.state_path && strncmp(a->trial, "s3://", 5) != 0)
    o.fresh = true;
  int rc = smr_trial_open(a->trial, &o, t, &err);
  if (rc != SMR_OK) {
    smr_cli_print_error(&err);
    if (a->json)
      smr_cli_jw_error_shape(&err, -1, NULL);
    free_tb_settings(a);
    return SMR_EXIT_UNREADABLE;
  }
  return SMR_EXIT_OK;
}

void smr_cli_jw_error_shape(const smr_error *e, int ndim,
                            const int64_t *shape) {
  smr_jw w = {0};
  smr_jw_obj(&w);
  if (ndim >= 0) {
    smr_jw_key(&w, "shape");
    smr_jw_arr(&w);
    for (int i = 0; i < ndim; i++)
      smr_jw_int(&w, shape[i]);
    smr_jw_arr_end(&w);
  }
  smr_jw_key(&w, "error");
  smr_jw_obj(&w);
  smr_jw_key(&w, "status");
  smr_jw_str(&w, smr_status_name(e->status));
  smr_jw_key(&w, "file");
  smr_jw_str(&w, e->file[0] ? e->file : NULL);
  smr_jw_key(&w, "offset");
  if (e->offset >= 0)
    smr_jw_int(&w, e->offset);
  else
    smr_jw_null(&w);
  smr_jw_key(&w, "message");
  smr_jw_str(&w, e->msg);
  smr_jw_obj_end(&w);
  smr_jw_obj_end(&w);
  char *s = smr_jw_finish(&w);
  printf("%s\n", s);
  free(s);
}
