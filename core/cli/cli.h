/* cli.h - the subcommands of the smrules binary.  Each takes the
 * arguments after its name and returns the process exit code (the
 * SMR_EXIT_* statuses of job/job.h; docs/cli.md gives the precedence),
 * and the helpers they share (cli_util.c). */
#ifndef SMR_CLI_H
#define SMR_CLI_H

#include <stdbool.h>

#include "config/config.h"
#include "job/job.h"

int smr_cmd_inspect(int argc, char **argv);
int smr_cmd_tensor(int argc, char **argv);
int smr_cmd_run(int argc, char **argv);
int smr_cmd_validate(int argc, char **argv);
int smr_cmd_list(int argc, char **argv);
int smr_cmd_describe(int argc, char **argv);
int smr_cmd_monitor(int argc, char **argv);

/* Print "smrules: <error>" on stderr. */
void smr_cli_print_error(const smr_error *e);
/* With `json`, also print the error as {"error": {...}} on stdout, so
 * that a caller parsing stdout always gets one JSON document. */
void smr_cli_print_json_error(const smr_error *e, bool json);
/* Print a configuration error (stderr, and stdout with `json`); returns
 * SMR_EXIT_USAGE. */
int smr_cli_config_error(const smr_error *e, bool json);
/* Load rules.yaml from path, or the built-in default rule set when path is
 * NULL; returns an exit status (the error printed). */
int smr_cli_load_config(const char *path, smr_config *cfg, bool json);
/* `--json` anywhere among the arguments of validate, list, describe;
 * the others are returned in order in rest.  Returns how many there are. */
int smr_cli_take_json_flag(int argc, char **argv, bool *json, char **rest);
/* The getopt_long error of command `cmd` (call with opterr = 0 where
 * getopt_long returned '?' or ':'): "unknown option '--trail'; did you
 * mean --trial?" or "option '--step' needs a value", and where --help
 * lists the options, on stderr.  Returns SMR_EXIT_USAGE. */
struct option;
int smr_cli_bad_option(const char *cmd, char **argv, const char *shortopts,
                       const struct option *longopts);
/* Exit code for a status returned by the reader. */
int smr_cli_exit_for(int status);

#endif
