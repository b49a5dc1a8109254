/* cli_list.c - `smrules list`: the built-in rules (and those on
 * SMRULES_PLUGIN_PATH), as a table or JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "cli/cli.h"
#include "host/plugin.h"

static const char *kind_name(const smrules_rule *r) {
  return r->kind == SMRULES_KIND_PROFILER ? "profiler" : "tensor";
}

static const char *LIST_HELP =
    "usage: smrules list [--json]\n"
    "  the rule plugins found (built-in rules, and those in the folders of\n"
    "  SMRULES_PLUGIN_PATH): name and description\n"
    "  --json           print JSON: name, description, kind, plugin path\n";

int smr_cmd_list(int argc, char **argv) {
  bool json = false;
  char *rest[argc > 0 ? argc : 1];
  int n_rest = smr_cli_take_json_flag(argc, argv, &json, rest);
  if (n_rest != 0) {
    bool help =
        n_rest == 1 && (!strcmp(rest[0], "--help") || !strcmp(rest[0], "-h"));
    fprintf(help ? stdout : stderr, "%s", LIST_HELP);
    return help ? SMR_EXIT_OK : SMR_EXIT_USAGE;
  }
  smr_plugin **all;
  size_t n;
  smr_plugin_all(&all, &n);
  smr_jw w = {0};
  if (json)
    smr_jw_arr(&w);
  int width = 30; /* wider for a longer rule name (a plugin's) */
  for (size_t i = 0; i < n; i++)
    if ((int)strlen(all[i]->reg->name) > width)
      width = (int)strlen(all[i]->reg->name);
  for (size_t i = 0; i < n; i++) {
    const smrules_rule *r = all[i]->reg;
    if (!json) {
      printf("%-*s %s\n", width, r->name, r->description ? r->description : "");
      continue;
    }
    smr_jw_obj(&w);
    smr_jw_key(&w, "name");
    smr_jw_str(&w, r->name);
    smr_jw_key(&w, "description");
    smr_jw_str(&w, r->description);
    smr_jw_key(&w, "kind");
    smr_jw_str(&w, kind_name(r));
    smr_jw_key(&w, "plugin");
    smr_jw_str(&w, all[i]->path);
    smr_jw_obj_end(&w);
  }
  if (json) {
    smr_jw_arr_end(&w);
    char *text = smr_jw_finish(&w);
    printf("%s\n", text);
    free(text);
  }
  if (n == 0)
    fprintf(stderr, "smrules: no rule plugins found (searched "
                    "SMRULES_PLUGIN_PATH and next to the executable)\n");
  smr_plugin_all_free(all, n);
  return n ? SMR_EXIT_OK : SMR_EXIT_USAGE;
}
