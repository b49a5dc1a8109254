/* cli_validate.c - `smrules validate`: a rules.yaml checked completely
 * (every rule's parameters, every Lua script's syntax, the actions)
 * without reading a trial. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "cli/cli.h"

int smr_cmd_validate(int argc, char **argv) {
  bool json = false;
  char *rest[argc > 0 ? argc : 1];
  int n = smr_cli_take_json_flag(argc, argv, &json, rest);
  if (n != 1 || rest[0][0] == '-') {
    bool help =
        n == 1 && (!strcmp(rest[0], "--help") || !strcmp(rest[0], "-h"));
    fprintf(help ? stdout : stderr,
            "usage: smrules validate [--json] rules.yaml\n"
            "  check a rules.yaml completely (schema, rule names, every\n"
            "  parameter, actions, Lua syntax) without reading a trial\n"
            "  --json           print JSON: the file, ok, its rules\n");
    return help ? SMR_EXIT_OK : SMR_EXIT_USAGE;
  }
  smr_config cfg;
  int rc = smr_cli_load_config(rest[0], &cfg, json);
  if (rc)
    return rc;
  smr_error err;
  if (smr_job_check_config(&cfg, false, &err) != SMR_OK)
    rc = smr_cli_config_error(&err, json);
  if (rc == SMR_EXIT_OK && json) {
    smr_jw w = {0};
    smr_jw_obj(&w);
    smr_jw_key(&w, "file");
    smr_jw_str(&w, rest[0]);
    smr_jw_key(&w, "ok");
    smr_jw_bool(&w, true);
    smr_jw_key(&w, "rules");
    smr_jw_arr(&w);
    for (size_t i = 0; i < cfg.n_rules; i++) {
      const smr_rule_config *r = &cfg.rules[i];
      smr_jw_obj(&w);
      smr_jw_key(&w, "name");
      smr_jw_str(&w, r->name);
      smr_jw_key(&w, "rule");
      smr_jw_str(&w, r->rule ? r->rule : r->lua ? r->lua : r->plugin);
      smr_jw_key(&w, "kind");
      smr_jw_str(&w, r->lua ? "lua" : r->plugin ? "plugin" : "builtin");
      smr_jw_key(&w, "line");
      smr_jw_int(&w, r->line);
      smr_jw_obj_end(&w);
    }
    smr_jw_arr_end(&w);
    smr_jw_obj_end(&w);
    char *text = smr_jw_finish(&w);
    printf("%s\n", text);
    free(text);
  } else if (rc == SMR_EXIT_OK) {
    printf("%s: OK (%zu rule%s)\n", rest[0], cfg.n_rules,
           cfg.n_rules == 1 ? "" : "s");
  }
  smr_config_free(&cfg);
  return rc;
}
