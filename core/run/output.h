/* output.h - presenting run results: the table on stdout, the --json
 * document, and the files under rule-output/. */
#ifndef SMR_OUTPUT_H
#define SMR_OUTPUT_H

#include <stdio.h>

#include "base/jsonw.h"
#include "run/runner.h"

/* {"trial":..,"rules":[{name, rule, status, first_trigger_step, ...}]} */
char *smr_output_run_json(smr_runner *r, const char *trial);
/* The same with an "actions" array (JSON text from smr_actions_json;
 * NULL: an empty array) after "rules". */
char *smr_output_run_json_actions(smr_runner *r, const char *trial,
                                  const char *actions_json);
/* The same with a "training" object (JSON text; NULL: no key) at the
 * end: how the training process being followed ended. */
char *smr_output_run_json_training(smr_runner *r, const char *trial,
                                   const char *actions_json,
                                   const char *training_json);
void smr_output_run_table(smr_runner *r, const char *trial);
/* "<instance>: HTML report written to <path>" for every profiler rule
 * that wrote <dir>/<instance>/profiler-output/profiler-report.html. */
void smr_output_report_paths(smr_runner *r, const char *dir, FILE *f);
/* <dir>/<instance>/report.json and result.json for every instance. */
int smr_output_write_files(smr_runner *r, const char *dir, const char *trial,
                           smr_error *err);

/* Problems met reading the trial (damaged index or collections files),
 * once each, as "smrules: warning: FILE: MESSAGE (step N not evaluated
 * by any rule)" lines, at most 20 and then one line with how many more;
 * returns how many were shown.  And as the JSON array
 * [{"file","offset","message","steps_lost":[N]}]. */
size_t smr_output_read_problems(smr_runner *r, FILE *f);
void smr_output_read_problems_json(smr_runner *r, smr_jw *w);

#endif
