/* fuzz_config.c - libFuzzer target for rules.yaml: the input goes through
 * YAML parsing, schema validation and rule building, then the action plan
 * (every action kind's settings table and items, as `smrules validate`
 * builds it: nothing runs).  Lua scripts are looked up under a directory
 * that does not exist, so no file is read apart from the input itself
 * (and a credentials file the input names: opened, checked, not read). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "action/action_int.h"
#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size heap copy, so ASan catches any read past `size` */
  char *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  smr_config c;
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_config_parse(copy, size, "fuzz.yaml", "/nonexistent", &c, &err);
  if (rc == SMR_OK) {
    if (c.n_rules == 0 || !c.root)
      abort(); /* the schema requires at least one rule */
    smr_actions_opts o = {.trial_dir = "fuzz", .validate_only = true};
    smr_act_plan p;
    smr_error_clear(&err);
    if (smr_act_plan_build(&c, &o, &p, &err) == SMR_OK)
      smr_act_plan_free(&p);
    else if (err.msg[0] == '\0')
      abort();
    smr_config_free(&c);
  } else if (err.msg[0] == '\0') {
    abort(); /* every failure must explain itself */
  }
  free(copy);
  return 0;
}
