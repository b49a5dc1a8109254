/* cli_describe.c - `smrules describe RULE`: a rule's kind, data and
 * parameters (type, default, valid values), as text or JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "cli/cli.h"
#include "config/params.h"
#include "host/plugin.h"

static const char *kind_name(const smrules_rule *r) {
  return r->kind == SMRULES_KIND_PROFILER ? "profiler" : "tensor";
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

static const char *default_text(const smrules_param *q) {
  if (q->default_value)
    return q->default_value;
  return q->flags & SMRULES_P_REQUIRED ? "(required)" : "(unset)";
}

static int widest(int w, const char *s) {
  int n = (int)strlen(s);
  return n > w ? n : w;
}

/* The parameter table, each column as wide as its longest entry. */
static void print_params(const smrules_param *params) {
  int w[4] = {4, 4, 7, 5}; /* NAME TYPE DEFAULT VALID */
  char bounds[160];
  for (const smrules_param *q = params; q && q->type != SMRULES_PARAM_END;
       q++) {
    bound_text(q, bounds, sizeof bounds);
    w[0] = widest(w[0], q->name);
    w[1] = widest(w[1], smr_param_type_name(q->type));
    w[2] = widest(w[2], default_text(q));
    w[3] = widest(w[3], bounds);
  }
  printf("  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], "NAME", w[1], "TYPE", w[2],
         "DEFAULT", w[3], "VALID", "DESCRIPTION");
  for (const smrules_param *q = params; q && q->type != SMRULES_PARAM_END;
       q++) {
    bound_text(q, bounds, sizeof bounds);
    printf("  %-*s  %-*s  %-*s  %-*s  %s%s\n", w[0], q->name, w[1],
           smr_param_type_name(q->type), w[2], default_text(q), w[3], bounds,
           q->description ? q->description : "",
           q->aliases ? " (also accepted as: " : "");
    if (q->aliases)
      printf("  %-*s  %s)\n", w[0], "", q->aliases);
  }
}

static void describe_json(const smr_plugin *p) {
  const smrules_rule *r = p->reg;
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "name");
  smr_jw_str(&w, r->name);
  smr_jw_key(&w, "description");
  smr_jw_str(&w, r->description);
  smr_jw_key(&w, "kind");
  smr_jw_str(&w, kind_name(r));
  smr_jw_key(&w, "data");
  smr_jw_str(&w, r->data_needed);
  smr_jw_key(&w, "plugin");
  smr_jw_str(&w, p->path);
  smr_jw_key(&w, "parameters");
  smr_jw_arr(&w);
  for (const smrules_param *q = r->params; q && q->type != SMRULES_PARAM_END;
       q++) {
    smr_jw_obj(&w);
    smr_jw_key(&w, "name");
    smr_jw_str(&w, q->name);
    smr_jw_key(&w, "type");
    smr_jw_str(&w, smr_param_type_name(q->type));
    smr_jw_key(&w, "default");
    smr_jw_str(&w, q->default_value);
    smr_jw_key(&w, "required");
    smr_jw_bool(&w, (q->flags & SMRULES_P_REQUIRED) != 0);
    smr_jw_key(&w, "min");
    if (q->flags & SMRULES_P_MIN)
      smr_jw_double(&w, q->min);
    else
      smr_jw_null(&w);
    smr_jw_key(&w, "min_exclusive");
    smr_jw_bool(&w, (q->flags & SMRULES_P_MIN_OPEN) != 0);
    smr_jw_key(&w, "max");
    if (q->flags & SMRULES_P_MAX)
      smr_jw_double(&w, q->max);
    else
      smr_jw_null(&w);
    smr_jw_key(&w, "max_exclusive");
    smr_jw_bool(&w, (q->flags & SMRULES_P_MAX_OPEN) != 0);
    smr_jw_key(&w, "allowed");
    if (q->allowed) {
      smr_jw_arr(&w);
      for (size_t i = 0; q->allowed[i]; i++)
        smr_jw_str(&w, q->allowed[i]);
      smr_jw_arr_end(&w);
    } else {
      smr_jw_null(&w);
    }
    smr_jw_key(&w, "aliases");
    smr_jw_str(&w, q->aliases);
    smr_jw_key(&w, "description");
    smr_jw_str(&w, q->description);
    smr_jw_obj_end(&w);
  }
  smr_jw_arr_end(&w);
  smr_jw_obj_end(&w);
  char *text = smr_jw_finish(&w);
  printf("%s\n", text);
  free(text);
}

static const char *DESCRIBE_HELP =
    "usage: smrules describe [--json] RULE\n"
    "  a rule's kind, the data it reads and its parameters (type, default,\n"
    "  valid values); an unknown RULE gets the nearest known name\n"
    "  --json           print JSON instead of text\n";

int smr_cmd_describe(int argc, char **argv) {
  bool json = false;
  char *rest[argc > 0 ? argc : 1];
  int n = smr_cli_take_json_flag(argc, argv, &json, rest);
  if (n != 1 || rest[0][0] == '-') {
    bool help =
        n == 1 && (!strcmp(rest[0], "--help") || !strcmp(rest[0], "-h"));
    fprintf(help ? stdout : stderr, "%s", DESCRIBE_HELP);
    return help ? SMR_EXIT_OK : SMR_EXIT_USAGE;
  }
  smr_plugin *p;
  smr_error err;
  smr_error_clear(&err);
  if (smr_plugin_find(rest[0], &p, &err) != SMR_OK) {
    smr_cli_print_error(&err);
    smr_cli_print_json_error(&err, json);
    return SMR_EXIT_USAGE;
  }
  if (json) {
    describe_json(p);
    smr_plugin_unload(p);
    return SMR_EXIT_OK;
  }
  const smrules_rule *r = p->reg;
  printf("%s\n  %s\n\n", r->name, r->description ? r->description : "");
  printf("kind:        %s\n", r->kind == SMRULES_KIND_PROFILER
                                  ? "profiler (evaluated per time window)"
                                  : "tensor (evaluated per step)");
  printf("data:        %s\n", r->data_needed ? r->data_needed : "-");
  printf("plugin:      %s\n\nparameters:\n", p->path);
  print_params(r->params);
  smr_plugin_unload(p);
  return SMR_EXIT_OK;
}
