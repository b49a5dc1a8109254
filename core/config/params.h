/* params.h - parsing rule parameters from configuration nodes into a
 * plugin's settings struct, driven by its declarative parameter table
 * (docs/rule-semantics.md#parameter-values).  The host, not the rule, checks
 * names, types, bounds and allowed values, so every rule rejects bad parameters
 * the same way. */
#ifndef SMR_PARAMS_H
#define SMR_PARAMS_H

#include <stdbool.h>

#include "base/common.h"
#include "config/node.h"
#include "smrules/smrules.h"

/* Memory behind the strings and lists written into a settings struct, and
 * which parameters were set (given or defaulted). */
typedef struct smr_params {
  void **allocs;
  size_t nallocs;
  smr_strv set;  /* names of parameters that have a value */
  smr_buf lines; /* "name:value" lines in declaration order */
} smr_params;

/* Fill `settings` from `given` (a map node, or NULL) and the defaults.
 * Errors are SMR_ERR_USAGE with err->file = `file` and a message starting
 * "line L, column C: " naming the parameter, the rule and what was
 * expected. */
int smr_params_apply(const char *rule, const smrules_param *table,
                     const smr_node *given, int rule_line, int rule_col,
                     const char *file, void *settings, smr_params *out,
                     smr_error *err);
bool smr_params_is_set(const smr_params *p, const char *name);
void smr_params_free(smr_params *p);

/* Type name for documentation ("float", "int", "bool", "string", "list",
 * "list of numbers"). */
const char *smr_param_type_name(smrules_param_type t);

#endif
