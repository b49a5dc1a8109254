/* cli.h - the subcommands of the smrules binary.  Each takes the
 * arguments after its name and returns the process exit code:
 * 0 success, 1 issues found (run), 2 usage or configuration error,
 * 3 trial or value unreadable (or no trial there), 4 tensor or step
 * unavailable (tensor) or an action failed (run), 5 a rule failed (run;
 * see docs/cli.md for the precedence). */
#ifndef SMR_CLI_H
#define SMR_CLI_H

enum {
  SMR_EXIT_OK = 0,
  SMR_EXIT_ISSUES = 1,
  SMR_EXIT_USAGE = 2,
  SMR_EXIT_UNREADABLE = 3,
  SMR_EXIT_UNAVAILABLE = 4,   /* tensor */
  SMR_EXIT_ACTION_FAILED = 4, /* run */
  SMR_EXIT_RULE_ERROR = 5
};

int smr_cmd_inspect(int argc, char **argv);
int smr_cmd_tensor(int argc, char **argv);
int smr_cmd_run(int argc, char **argv);
int smr_cmd_validate(int argc, char **argv);
int smr_cmd_list(int argc, char **argv);
int smr_cmd_describe(int argc, char **argv);
int smr_cmd_monitor(int argc, char **argv);

/* Print "smrules: <error>" on stderr. */
struct smr_error;
void smr_cli_print_error(const struct smr_error *e);
/* Exit code for a status returned by the reader. */
int smr_cli_exit_for(int status);

#endif
