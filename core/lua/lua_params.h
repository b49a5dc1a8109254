/* lua_params.h - the parameters a Lua rule declares, one comment line
 * each, so that they are checked like a plugin's (validate and run, with
 * line and column), defaulted, and listed in the report's RuleParameters:
 *
 *   -- @param threshold float default=1.0 min>0 -- what it means
 *   -- @param mode string default=TRAIN one_of=TRAIN|EVAL|GLOBAL
 *   -- @param window int min=1 max=1000 required
 *
 * TYPE is float, int, bool, string, list (of strings) or numbers (a list
 * of numbers); attributes: default=V, min=N (>=), min>N, max=N (<=),
 * max<N, one_of=A|B|C, required; text after " -- " describes it.  A script
 * that declares nothing takes any parameters, unchecked, as before. */
#ifndef SMR_LUA_PARAMS_H
#define SMR_LUA_PARAMS_H

#include <stddef.h>

#include "base/common.h"
#include "smrules/smrules.h"

typedef struct lua_State lua_State;

typedef struct smr_lua_params {
  smrules_param *table; /* n entries and the END entry */
  size_t n;
  size_t settings_size; /* for smr_params_apply: a 16-byte slot each */
  smr_strv strings;     /* memory behind names, defaults, descriptions */
  char ***allowed;      /* per entry, or NULL */
} smr_lua_params;

/* Read the declarations of a script's text; an error names the script
 * and line (SMR_ERR_USAGE). */
int smr_lua_params_parse(const char *text, size_t len, const char *script,
                         smr_lua_params *out, smr_error *err);
/* The same from the file. */
int smr_lua_params_read(const char *script, smr_lua_params *out,
                        smr_error *err);
/* Set params[name] = default (typed) for every declared parameter with a
 * default that the table at the top of L's stack does not hold. */
void smr_lua_params_push_defaults(lua_State *L, const smr_lua_params *p);
void smr_lua_params_free(smr_lua_params *p);

/* Check the parameters given in rules.yaml (a map node, or NULL) against
 * the declarations of `script`, as a plugin's are checked (errors name
 * rules.yaml's line and column; SMR_ERR_USAGE), and fill `out` (its lines
 * are the report's RuleParameters).  A script that declares nothing gets
 * a "name:value" line per scalar parameter given. */
typedef struct smr_params smr_params;
typedef struct smr_node smr_node;
int smr_lua_params_apply(const char *rule, const char *script,
                         const smr_node *given, int line, int col,
                         const char *file, smr_params *out, smr_error *err);

#endif
