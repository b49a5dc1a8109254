/* cli_util.c - what the commands share: printing errors (as text, and as
 * JSON for --json), loading rules.yaml, the exit code of a reader status. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/embedded.h"
#include "base/jsonw.h"
#include "base/suggest.h"
#include "base/text.h"
#include "cli/cli.h"

#define DEFAULT_RULES "rules/default.yaml"

void smr_cli_print_error(const smr_error *e) {
  char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 64];
  smr_error_format(e, msg, sizeof msg);
  char *shown = smr_term_safe(msg); /* file names and messages from files */
  fprintf(stderr, "smrules: %s\n", shown);
  free(shown);
}

int smr_cli_exit_for(int status) {
  switch (status) {
  case SMR_OK:
    return SMR_EXIT_OK;
  case SMR_ERR_USAGE:
    return SMR_EXIT_USAGE;
  case SMR_STEP_UNAVAILABLE:
  case SMR_STEP_NOT_YET:
  case SMR_TENSOR_UNAVAILABLE_FOR_STEP:
  case SMR_TENSOR_UNAVAILABLE:
  case SMR_NO_MORE_DATA:
  case SMR_INVALID_WORKER:
    return SMR_EXIT_UNAVAILABLE;
  default:
    return SMR_EXIT_UNREADABLE;
  }
}

void smr_cli_print_json_error(const smr_error *e, bool json) {
  if (!json)
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

int smr_cli_config_error(const smr_error *e, bool json) {
  smr_cli_print_error(e);
  smr_cli_print_json_error(e, json);
  return SMR_EXIT_USAGE;
}

int smr_cli_load_config(const char *path, smr_config *cfg, bool json) {
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
  return rc == SMR_OK ? SMR_EXIT_OK : smr_cli_config_error(&err, json);
}

int smr_cli_take_json_flag(int argc, char **argv, bool *json, char **rest) {
  int n = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0)
      *json = true;
    else
      rest[n++] = argv[i];
  }
  return n;
}

/* The long option `name` (up to '=' or its end), or NULL. */
static const struct option *long_option(const struct option *longopts,
                                        const char *name, size_t len) {
  for (const struct option *o = longopts; o->name; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
      return o;
  return NULL;
}

static void bad_long_option(const char *cmd, const char *arg,
                            const struct option *longopts) {
  const char *name = arg + 2;
  size_t len = strcspn(name, "=");
  const struct option *o = long_option(longopts, name, len);
  if (o && o->has_arg == required_argument) {
    fprintf(stderr, "smrules %s: option '--%s' needs a value\n", cmd, o->name);
    return;
  }
  if (o) {
    fprintf(stderr, "smrules %s: option '--%s' takes no value\n", cmd, o->name);
    return;
  }
  size_t n = 0;
  for (const struct option *q = longopts; q->name; q++)
    n++;
  const char *names[n ? n : 1];
  for (size_t i = 0; i < n; i++)
    names[i] = longopts[i].name;
  char word[128];
  snprintf(word, sizeof word, "%.*s", (int)(len < 127 ? len : 127), name);
  const char *near = smr_suggest(word, names, n);
  fprintf(stderr, "smrules %s: unknown option '--%s'", cmd, word);
  if (near)
    fprintf(stderr, "; did you mean --%s?", near);
  fprintf(stderr, "\n");
}

int smr_cli_bad_option(const char *cmd, char **argv, const char *shortopts,
                       const struct option *longopts) {
  const char *arg = optind > 0 ? argv[optind - 1] : "";
  if (strncmp(arg, "--", 2) == 0 && arg[2]) {
    bad_long_option(cmd, arg, longopts);
  } else if (optopt && strchr(shortopts, optopt)) {
    fprintf(stderr, "smrules %s: option '-%c' needs a value\n", cmd, optopt);
  } else {
    fprintf(stderr, "smrules %s: unknown option '-%c'\n", cmd,
            optopt ? optopt : '?');
  }
  fprintf(stderr, "('smrules %s --help' lists the options)\n", cmd);
  return SMR_EXIT_USAGE;
}
