/* lua_util.c - small helpers shared by the Lua bindings (lua_bind.c,
 * lua_value.c, lua_report.c): the host of a state, option tables,
 * reduction names, locked metatables. */
#include "lua/lua_util.h"
#include "base/suggest.h"

#include "format/tensor.h"

smr_lua_host *smr_lua_host_of(lua_State *L) {
  return *(smr_lua_host **)lua_getextraspace(L);
}

/* Options tables are optional: nil or a table. */
void smr_lua_check_opts(lua_State *L, int idx) {
  if (!lua_isnoneornil(L, idx) && !lua_istable(L, idx))
    luaL_typeerror(L, idx, "options table");
}

bool smr_lua_opt_bool(lua_State *L, int opts, const char *key) {
  if (lua_isnoneornil(L, opts))
    return false;
  lua_getfield(L, opts, key);
  bool b = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

int smr_lua_check_reduction(lua_State *L, int idx) {
  const char *rname = luaL_checkstring(L, idx);
  int red = smr_reduction_from_name(rname);
  if (red < 0)
    luaL_error(L,
               "unknown reduction '%s' (expected min, max, mean, std, "
               "variance, sum, prod, l1, l2 or linf)",
               rname);
  return red;
}

void smr_lua_new_metatable(lua_State *L, const char *name) {
  luaL_newmetatable(L, name);
  lua_pushliteral(L, "locked");
  lua_setfield(L, -2, "__metatable");
}

void smr_lua_set_index(lua_State *L, lua_CFunction index,
                       const luaL_Reg *methods) {
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_pushcclosure(L, index, 1);
  lua_setfield(L, -2, "__index");
}

int smr_lua_method(lua_State *L, const char *what, int methods, int key) {
  methods = lua_absindex(L, methods);
  lua_pushvalue(L, key);
  if (lua_rawget(L, methods) != LUA_TNIL || lua_type(L, key) != LUA_TSTRING)
    return 1;
  const char *names[64];
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, methods) != 0) {
    if (lua_type(L, -2) == LUA_TSTRING && n < sizeof names / sizeof *names)
      names[n++] = lua_tostring(L, -2); /* the keys stay in the table */
    lua_pop(L, 1);
  }
  const char *k = lua_tostring(L, key);
  const char *near = smr_suggest(k, names, n);
  if (near)
    return luaL_error(L, "%s has no method '%s': did you mean '%s'?", what, k,
                      near);
  return luaL_error(L, "%s has no method '%s'", what, k);
}
