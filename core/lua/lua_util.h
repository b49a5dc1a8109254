/* lua_util.h - what the Lua binding files share (lua_bind.c, lua_value.c,
 * lua_report.c): the host of a rule state, budget rates, option and
 * metatable helpers.  Internal to core/lua/. */
#ifndef SMR_LUA_UTIL_H
#define SMR_LUA_UTIL_H

#include <stdbool.h>

#include <lauxlib.h>
#include <lua.h>

#include "host/rulectx.h"
#include "smrules/smrules.h"
#include "trial/trial.h"

/* The host side of one rule state.  Kept in the state's extra space; must
 * outlive the state.  `trial` may be NULL (trial methods then fail). */
typedef struct smr_lua_host {
  smrules_ctx *ctx;
  const smrules_api *api;
  smr_trial *trial;
  /* report data held by the host on the rule's behalf, charged to its
   * memory limit (lua_report.c): details for the run, violations for the
   * current step */
  size_t details_bytes, step_bytes;
} smr_lua_host;

/* Host work charged to the instruction budget (see lua_sandbox.c): one
 * instruction per this many bytes of tensor data read, or elements
 * reduced. */
#define SMR_LUA_READ_BYTES_PER_INSTRUCTION 256.0
#define SMR_LUA_REDUCE_ELEMENTS_PER_INSTRUCTION 64.0
/* One instruction per step of PCRE2's match limit (a backtracking step:
 * a few ns with JIT, up to ~75 ns interpreted) when tensor names are
 * matched against regexes. */
#define SMR_LUA_REGEX_STEPS_PER_INSTRUCTION 1.0

smr_lua_host *smr_lua_host_of(lua_State *L);
/* An options argument: none, nil or a table (else raise). */
void smr_lua_check_opts(lua_State *L, int idx);
/* opts[key] as a boolean (false when opts is absent). */
bool smr_lua_opt_bool(lua_State *L, int opts, const char *key);
/* The smr_reduction named by the string at idx (else raise). */
int smr_lua_check_reduction(lua_State *L, int idx);
/* Push a new registry metatable `name`, locked: getmetatable() on its
 * objects gives the string "locked". */
void smr_lua_new_metatable(lua_State *L, const char *name);
/* Set __index of the metatable on top to a closure of `index` over a
 * table of `methods` (its upvalue 1). */
void smr_lua_set_index(lua_State *L, lua_CFunction index,
                       const luaL_Reg *methods);
/* For an __index function: the method `key` of the methods table at
 * `methods`, or an error naming what has no such method, with the nearest
 * name ("trial has no method 'tensor_name': did you mean
 * 'tensor_names'?") instead of Lua's "attempt to call a nil value". */
int smr_lua_method(lua_State *L, const char *what, int methods, int key);

#endif
