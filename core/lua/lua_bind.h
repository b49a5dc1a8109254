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
#include "lua/lua_util.h"

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

#endif
