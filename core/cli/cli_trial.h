/* cli_trial.h - what `smrules inspect` and `smrules tensor` share: the
 * trial options (--trial, --state, --fresh, --live, --json,
 * --s3-endpoint, --format, --rules), opening the trial, errors as JSON
 * (cli_trial.c). */
#ifndef SMR_CLI_TRIAL_H
#define SMR_CLI_TRIAL_H

#include <getopt.h>
#include <stdbool.h>

#include "config/config.h"
#include "trial/trial.h"

typedef struct smr_trial_args {
  const char *trial;
  smr_trial_opts opts;
  int json;
  /* --rules: the rules.yaml whose `tensorboard:` settings a TensorBoard
   * folder is read with, as `run` reads it (docs/tensorboard.md#settings);
   * kept while the trial is open */
  const char *rules;
  smr_config cfg;
  smr_tb_settings tbs;
  bool have_cfg;
} smr_trial_args;

enum {
  OPT_STATE = 1000,
  OPT_FRESH,
  OPT_LIVE,
  OPT_JSON,
  OPT_S3_ENDPOINT,
  OPT_FORMAT,
  OPT_RULES,
  OPT_TRIAL_LAST /* the commands' own options follow */
};

#define SMR_TRIAL_LONGOPTS                                                     \
  {"trial", required_argument, NULL, 't'},                                     \
      {"state", required_argument, NULL, OPT_STATE},                           \
      {"fresh", no_argument, NULL, OPT_FRESH},                                 \
      {"live", no_argument, NULL, OPT_LIVE},                                   \
      {"json", no_argument, NULL, OPT_JSON},                                   \
      {"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},               \
      {"format", required_argument, NULL, OPT_FORMAT},                         \
      {"rules", required_argument, NULL, OPT_RULES}, {                         \
    "help", no_argument, NULL, 'h'                                             \
  }

/* The help lines of those options. */
extern const char *const SMR_TRIAL_HELP;

/* Take option c if it is one of those; false otherwise. */
bool smr_cli_trial_opt(smr_trial_args *a, int c);
/* Open the trial (the error printed, as JSON too with --json); returns
 * an exit status.  Close it with smr_cli_close_trial. */
int smr_cli_open_trial(smr_trial_args *a, smr_trial **t);
void smr_cli_close_trial(smr_trial_args *a, smr_trial *t);
/* {"error": {...}} on stdout; with ndim >= 0 also the saved shape. */
void smr_cli_jw_error_shape(const smr_error *e, int ndim, const int64_t *shape);

#endif
