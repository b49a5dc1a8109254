/* main.c - the smrules command line: pick the subcommand, hand it the
 * rest of the arguments. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} COMMANDS[] = {
    {"inspect", smr_cmd_inspect,
     "summarize a trial: steps, modes, workers, "
     "collections, tensors"},
    {"tensor", smr_cmd_tensor, "show one tensor value at a step, with stats"},
    {"run", smr_cmd_run, "evaluate rules against a trial (rules.yaml)"},
    {"validate", smr_cmd_validate, "check a rules.yaml without running it"},
    {"list", smr_cmd_list, "list the built-in rules"},
    {"describe", smr_cmd_describe, "show a rule's parameters and defaults"},
    {"monitor", smr_cmd_monitor,
     "record this machine's CPU, memory, I/O and GPU metrics for the "
     "profiler rules"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: smrules <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
    fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
  fprintf(f, "\n'smrules <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return SMR_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(stdout);
    return SMR_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("smrules 0.1.0\n");
    return SMR_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
    if (!strcmp(argv[1], COMMANDS[i].name))
      return COMMANDS[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "smrules: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return SMR_EXIT_USAGE;
}
