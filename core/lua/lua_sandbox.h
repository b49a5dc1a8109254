/* lua_sandbox.h - a Lua 5.4 state that cannot reach the machine: only the
 * safe parts of the standard library, text chunks only, a counted heap with
 * a hard cap and a per-call instruction budget that a script cannot catch
 * with pcall.  Internal to the Lua rule runtime (lua_rule.c, lua_bind.c). */
#ifndef SMR_LUA_SANDBOX_H
#define SMR_LUA_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "lua/lua_limits.h"

/* Accounting of one state.  Owned by the caller, must outlive the state;
 * nothing in it is shared between states. */
typedef struct smr_lua_sandbox {
  size_t limit;    /* cap on heap + external bytes (SIZE_MAX: none) */
  size_t used;     /* bytes of the Lua heap */
  size_t external; /* host memory held by Lua objects (tensor values) */
  /* A refused allocation: Lua retries it once after an emergency
   * collection; only when that retry fails is the limit broken. */
  bool mem_pending;
  const void *refused_ptr;
  size_t refused_osize, refused_nsize;
  bool mem_exceeded;
  int64_t budget;   /* instructions per call (<= 0: none) */
  int64_t executed; /* instructions counted in the current call */
  int chunk;        /* hook interval */
  bool budget_exceeded;
  double seconds;  /* wall clock per call (<= 0: none) */
  double deadline; /* CLOCK_MONOTONIC seconds the current call ends by */
  bool time_exceeded;
} smr_lua_sandbox;

/* A new state whose allocations are counted in (and capped by) `sb`.  NULL
 * when not even an empty state fits the memory limit.  Limits <= 0 / 0
 * mean "no limit". */
lua_State *smr_lua_sandbox_new(smr_lua_sandbox *sb, const smr_lua_limits *l);

/* lua_CFunction, to be run with lua_pcall: open base, string, table, math,
 * utf8 and coroutine and take out everything that reaches outside the
 * state (see docs/lua-api.md, "Sandbox"). */
int smr_lua_sandbox_open(lua_State *L);

/* Load text source as a chunk (bytecode is refused with a clear message).
 * Pushes the function or an error message; returns a Lua status. */
int smr_lua_sandbox_load(lua_State *L, const char *src, size_t len,
                         const char *chunkname);

/* Before each call into the script: a fresh instruction budget and clear
 * limit flags. */
void smr_lua_sandbox_begin_call(lua_State *L);
/* After the call: true when it broke a limit (even if the script caught the
 * error); `msg` receives "instruction limit of N exceeded" or "memory limit
 * of N MiB exceeded". */
bool smr_lua_sandbox_broken(lua_State *L, char *msg, size_t n);
/* The "memory limit of N MiB exceeded" message. */
void smr_lua_sandbox_memory_message(lua_State *L, char *msg, size_t n);

/* Charge work done in C (reading, reducing a tensor) as `instructions`;
 * raises the instruction-limit error when the budget cannot cover it. */
void smr_lua_sandbox_charge_work(lua_State *L, double instructions);

/* Instructions left of the current call's budget (0 once it is spent),
 * or -1 when the rule has no instruction limit: for host work that
 * bounds itself by what is left (regex matching). */
int64_t smr_lua_sandbox_remaining(lua_State *L);

/* Count `bytes` of host memory kept alive by a Lua object against the cap
 * (after a full collection if needed).  False, with the memory limit marked
 * broken, when it does not fit. */
bool smr_lua_sandbox_charge(lua_State *L, size_t bytes);
void smr_lua_sandbox_uncharge(lua_State *L, size_t bytes);

#endif
