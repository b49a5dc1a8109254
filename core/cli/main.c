/* main.c - the smrules command line: pick the subcommand, hand it the
 * rest of the arguments. */
#include <stdio.h>
#include <string.h>

#include "base/suggest.h"
#include "cli/cli.h"
#include "smrules/version.h"

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
  fprintf(f, "\n'smrules <command> --help' or 'smrules help <command>' "
             "describes a command's\noptions.\n");
}

static int find_command(const char *name) {
  for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
    if (!strcmp(name, COMMANDS[i].name))
      return (int)i;
  return -1;
}

static int unknown_command(const char *name) {
  const char *names[sizeof COMMANDS / sizeof *COMMANDS];
  for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
    names[i] = COMMANDS[i].name;
  const char *near = smr_suggest(name, names, sizeof names / sizeof *names);
  fprintf(stderr, "smrules: unknown command '%s'", name);
  if (near)
    fprintf(stderr, "; did you mean %s?", near);
  fprintf(stderr, "\n('smrules --help' lists the commands)\n");
  return SMR_EXIT_USAGE;
}

/* `smrules help [COMMAND]`: the general help, or COMMAND --help. */
static int help(int argc, char **argv) {
  if (argc < 3) {
    usage(stdout);
    return SMR_EXIT_OK;
  }
  int i = find_command(argv[2]);
  if (i < 0)
    return unknown_command(argv[2]);
  char *args[] = {argv[2], "--help", NULL};
  return COMMANDS[i].fn(2, args);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return SMR_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
    return help(1, argv);
  if (!strcmp(argv[1], "help"))
    return help(argc, argv);
  if (!strcmp(argv[1], "--version")) {
    printf("smrules %s\n", SMRULES_VERSION);
    return SMR_EXIT_OK;
  }
  int i = find_command(argv[1]);
  if (i >= 0)
    return COMMANDS[i].fn(argc - 1, argv + 1);
  return unknown_command(argv[1]);
}
