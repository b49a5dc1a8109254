/* lua_bind.h - what a Lua rule sees of the host: the `trial` object,
 * tensors, tensor values (userdata over host memory, no copies), `report`,
 * logging, `params`, and the error objects that carry smdebug's
 * availability exceptions back to the runner.  Internal to the Lua rule
 * runtime; the API itself is documented in docs/lua-api.md. */
#ifndef SMR_LUA_BIND_H
#define SMR_LUA_BIND_H

#include <stdbool.h>

#include <lauxlib.h>
#include <lua.h>

#include "config/node.h"
#include "host/rulectx.h"
#include "smrules/smrules.h"

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

/* lua_CFunction, run with lua_pcall after smr_lua_sandbox_open.  Argument
 * 1: a light userdata smr_lua_host *.  Defines the globals `trial` and
 * `report` and returns the table of internals handed to lua/smrules.lua
 * (log, SKIPPED, error_kind, unavailable_kind). */
int smr_lua_bind_open(lua_State *L);

/* Push a parameter node as a Lua value (a map becomes a table; NULL and
 * null nodes nil).  Protected context only. */
void smr_lua_push_node(lua_State *L, const smr_node *n);

/* Classify the error value at `idx` without allocating and without running
 * script code (safe outside protected mode): the negative SMRULES_*
 * availability status of an unavailable-data error object, else
 * SMRULES_ERR.  *msg (optional) receives the message when the value is a
 * string or an error object, else NULL. */
int smr_lua_error_status(lua_State *L, int idx, const char **msg);

/* Push a printable message for the error value at `idx` (error objects:
 * "Kind: message"; others through __tostring).  Protected context only. */
const char *smr_lua_error_text(lua_State *L, int idx);

/* Whether the value at `idx` is smrules.SKIPPED. */
bool smr_lua_is_skipped(lua_State *L, int idx);

/* ---- shared by lua_bind.c, lua_value.c and lua_report.c ---- */

/* Host work charged to the instruction budget (see lua_sandbox.c): one
 * instruction per this many bytes of tensor data read, or elements
 * reduced. */
#define SMR_LUA_READ_BYTES_PER_INSTRUCTION 256.0
#define SMR_LUA_REDUCE_ELEMENTS_PER_INSTRUCTION 64.0

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

#endif
