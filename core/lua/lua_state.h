/* lua_state.h - a Lua rule's own state across runs (save_state and
 * load_state of the script; see lua_state.c for the stored form). */
#ifndef SMR_LUA_STATE_H
#define SMR_LUA_STATE_H

#include <lua.h>

/* lua_CFunctions for lua_pcall inside the rule's sandbox.
 * smr_lua_state_save: calls the script's save_state() and returns its
 * value as text (a string), or nothing when the script defines none.
 * smr_lua_state_load: argument 1 a light userdata pointing at such text;
 * calls the script's load_state(value). */
int smr_lua_state_save(lua_State *L);
int smr_lua_state_load(lua_State *L);

#endif
