/* fuzz_lua_state.c - libFuzzer target for stored Lua state text (the
 * rule_state.impl_state column, which anyone who can write the trial can
 * change): the input goes through the plain-data reader of lua_state.c
 * inside a sandbox with small limits, into a load_state() that walks what
 * it gets.  Whatever the text, the reader either builds plain values or
 * fails with a message; it never runs code. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "lua/lua_rule.h"
#include "lua/lua_sandbox.h"
#include "lua/lua_state.h"

/* load_state walks the value: every table reached must be plain (no
 * metatable), and the walk itself is bounded by the instruction limit. */
static const char SCRIPT[] =
    "local function walk(v, d)\n"
    "  if type(v) == 'table' then\n"
    "    assert(getmetatable(v) == nil, 'a stored table has a metatable')\n"
    "    for k, x in pairs(v) do walk(k, d + 1) walk(x, d + 1) end\n"
    "  else\n"
    "    local t = type(v)\n"
    "    assert(t == 'nil' or t == 'boolean' or t == 'number' or\n"
    "           t == 'string', 'a stored value is a ' .. t)\n"
    "  end\n"
    "end\n"
    "function load_state(s) walk(s, 0) end\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  smr_lua_sandbox sb;
  smr_lua_limits lim = {
      .instructions = 1000000, .memory_bytes = (size_t)16 << 20, .seconds = 10};
  lua_State *L = smr_lua_sandbox_new(&sb, &lim);
  if (!L) {
    free(text);
    return 0;
  }
  lua_pushcfunction(L, smr_lua_sandbox_open);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK ||
      smr_lua_sandbox_load(L, SCRIPT, sizeof SCRIPT - 1, "=fuzz") != LUA_OK ||
      lua_pcall(L, 0, 0, 0) != LUA_OK)
    abort(); /* the harness itself is broken */
  smr_lua_sandbox_begin_call(L);
  lua_pushcfunction(L, smr_lua_state_load);
  lua_pushlightuserdata(L, text);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (!msg || !msg[0])
      abort(); /* every failure must explain itself */
    if (strstr(msg, "a stored table has a metatable") ||
        strstr(msg, "a stored value is a"))
      abort(); /* the reader built something that is not plain data */
  }
  lua_close(L);
  free(text);
  return 0;
}
