/* lua_sandbox.c - the Lua state a rule runs in: counted, capped heap;
 * instruction budget through a count hook; the safe subset of the standard
 * library; text-only loading. */
#include "lua/lua_sandbox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "lua/lua_pattern.h"
#include "trial/trial.h"

/* The hook runs every HOOK_INTERVAL instructions: often enough to stop a
 * loop quickly, rarely enough to cost nothing measurable. */
#define HOOK_INTERVAL 1000

/* Work done in C inside one VM instruction or library call is charged to
 * the instruction budget too, or a loop over an expensive operation would
 * run for hours within its instruction count: one instruction per
 * ALLOC_BYTES_PER_INSTRUCTION bytes allocated (everything that builds a
 * string or table), per PATTERN_STEPS_PER_INSTRUCTION steps a pattern
 * match takes (counted before it runs, lua_pattern.h), per
 * ELEMENTS_PER_INSTRUCTION elements moved, sorted or scanned. */
#define ALLOC_BYTES_PER_INSTRUCTION 64
#define PATTERN_STEPS_PER_INSTRUCTION 100.0
#define ELEMENTS_PER_INSTRUCTION 4.0
/* Bytes a library function reads or writes in one pass (upper, lower,
 * reverse, rep, format, tonumber, utf8's scans) per instruction: a byte
 * loop in C does about what 16 bytes' worth of VM instructions cost, so a
 * rule with a budget of B instructions touches at most 16 B bytes. */
#define BYTES_PER_INSTRUCTION 16.0

static smr_lua_sandbox *sandbox_of(lua_State *L) {
  void *ud = NULL;
  lua_getallocf(L, &ud);
  return ud;
}

/* ------------------------------------------------------------- memory */

static bool fits(const smr_lua_sandbox *sb, size_t grow) {
  size_t in_use = sb->used + sb->external;
  return in_use <= sb->limit && grow <= sb->limit - in_use;
}

static bool is_retry(const smr_lua_sandbox *sb, const void *ptr, size_t osize,
                     size_t nsize) {
  return sb->mem_pending && ptr == sb->refused_ptr &&
         osize == sb->refused_osize && nsize == sb->refused_nsize;
}

/* Decide whether a growing allocation may proceed.  A refusal is only
 * final when Lua's retry after its emergency collection fails too, or when
 * Lua moves on to another allocation (it raised a memory error). */
static bool admit_growth(smr_lua_sandbox *sb, const void *ptr, size_t osize,
                         size_t nsize, size_t grow) {
  bool retry = is_retry(sb, ptr, osize, nsize);
  if (sb->mem_pending && !retry)
    sb->mem_exceeded = true;
  sb->mem_pending = false;
  if (fits(sb, grow))
    return true;
  if (retry) {
    sb->mem_exceeded = true;
  } else {
    sb->mem_pending = true;
    sb->refused_ptr = ptr;
    sb->refused_osize = osize;
    sb->refused_nsize = nsize;
  }
  return false;
}

static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  smr_lua_sandbox *sb = ud;
  size_t old = ptr ? osize : 0; /* without a block, osize is a type tag */
  if (nsize == 0) {
    free(ptr);
    sb->used -= old;
    return NULL;
  }
  if (nsize > old && !admit_growth(sb, ptr, osize, nsize, nsize - old))
    return NULL;
  void *p = realloc(ptr, nsize);
  if (!p)
    return NULL;
  sb->used = sb->used - old + nsize;
  if (nsize > old) /* noticed by the hook at its next tick */
    sb->executed += (int64_t)((nsize - old) / ALLOC_BYTES_PER_INSTRUCTION);
  return p;
}

void smr_lua_sandbox_memory_message(lua_State *L, char *msg, size_t n) {
  const smr_lua_sandbox *sb = sandbox_of(L);
  snprintf(msg, n, "memory limit of %g MiB exceeded",
           (double)sb->limit / (1024.0 * 1024.0));
}

bool smr_lua_sandbox_charge(lua_State *L, size_t bytes) {
  smr_lua_sandbox *sb = sandbox_of(L);
  if (!fits(sb, bytes)) {
    /* unreachable values still hold host memory the collector cannot see:
     * collect them before refusing */
    lua_gc(L, LUA_GCCOLLECT);
    if (!fits(sb, bytes)) {
      sb->mem_exceeded = true;
      return false;
    }
  }
  sb->external += bytes;
  return true;
}

void smr_lua_sandbox_uncharge(lua_State *L, size_t bytes) {
  smr_lua_sandbox *sb = sandbox_of(L);
  sb->external -= bytes < sb->external ? bytes : sb->external;
}

/* -------------------------------------------------------- instructions */

static double monotonic_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The wall clock, read at each hook tick: whatever the counts miss (work
 * in C that no charge foresaw), a call ends by its deadline. */
static bool past_deadline(smr_lua_sandbox *sb) {
  if (!sb->time_exceeded && sb->seconds > 0 &&
      monotonic_seconds() > sb->deadline)
    sb->time_exceeded = true;
  return sb->time_exceeded;
}

static bool memory_broken(smr_lua_sandbox *sb) {
  /* a refusal still pending when Lua code runs again was final */
  if (sb->mem_pending)
    sb->mem_exceeded = true;
  return sb->mem_exceeded;
}

/* Once a limit is broken, every later instruction of every thread raises
 * again, so a pcall in the script cannot swallow the error: each protected
 * level unwinds within one instruction. */
static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  smr_lua_sandbox *sb = sandbox_of(L);
  /* Between instructions the script holds nothing of the trial (what the
   * bindings read is copied): a live trial may be refreshed now, while the
   * script computes (trial.h, the reader gate). */
  smr_trial_reader_leave();
  if (!sb->budget_exceeded && !memory_broken(sb) && !past_deadline(sb)) {
    int count = lua_gethookcount(L);
    sb->executed += count;
    if (sb->executed <= sb->budget) {
      if (count != sb->chunk) /* left at 1 by an earlier call */
        lua_sethook(L, count_hook, LUA_MASKCOUNT, sb->chunk);
      return;
    }
    sb->budget_exceeded = true;
  }
  lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
  if (sb->budget_exceeded) {
    lua_pushfstring(L, "instruction limit of %I exceeded",
                    (lua_Integer)sb->budget);
  } else if (sb->time_exceeded) {
    lua_pushfstring(L, "time limit of %f s per call exceeded", sb->seconds);
  } else {
    char msg[96];
    smr_lua_sandbox_memory_message(L, msg, sizeof msg);
    lua_pushstring(L, msg);
  }
  lua_error(L);
}

static int raise_budget(lua_State *L, smr_lua_sandbox *sb) {
  sb->budget_exceeded = true;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
  return luaL_error(L, "instruction limit of %I exceeded",
                    (lua_Integer)sb->budget);
}

/* Work charged beyond the budget, or a call past its deadline, raises
 * before the work is done. */

void smr_lua_sandbox_charge_work(lua_State *L, double instructions) {
  smr_lua_sandbox *sb = sandbox_of(L);
  if (!(instructions > 0))
    return;
  if (past_deadline(sb)) {
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    luaL_error(L, "time limit of %f s per call exceeded", sb->seconds);
  }
  if (sb->budget <= 0)
    return;
  if (instructions > (double)(sb->budget - sb->executed))
    raise_budget(L, sb);
  sb->executed += (int64_t)instructions;
}

int64_t smr_lua_sandbox_remaining(lua_State *L) {
  const smr_lua_sandbox *sb = sandbox_of(L);
  if (sb->budget <= 0)
    return -1;
  return sb->executed < sb->budget ? sb->budget - sb->executed : 0;
}

void smr_lua_sandbox_begin_call(lua_State *L) {
  smr_lua_sandbox *sb = sandbox_of(L);
  sb->executed = 0;
  sb->budget_exceeded = false;
  sb->mem_pending = false;
  sb->mem_exceeded = false;
  sb->time_exceeded = false;
  sb->deadline = monotonic_seconds() + sb->seconds;
  if (sb->budget > 0 || sb->seconds > 0)
    lua_sethook(L, count_hook, LUA_MASKCOUNT, sb->chunk);
}

bool smr_lua_sandbox_broken(lua_State *L, char *msg, size_t n) {
  smr_lua_sandbox *sb = sandbox_of(L);
  if (sb->budget_exceeded) {
    snprintf(msg, n, "instruction limit of %lld exceeded",
             (long long)sb->budget);
    return true;
  }
  if (memory_broken(sb)) {
    smr_lua_sandbox_memory_message(L, msg, n);
    return true;
  }
  if (sb->time_exceeded) {
    snprintf(msg, n, "time limit of %g s per call exceeded", sb->seconds);
    return true;
  }
  return false;
}

/* ---------------------------------------------------------- the state */

lua_State *smr_lua_sandbox_new(smr_lua_sandbox *sb, const smr_lua_limits *l) {
  memset(sb, 0, sizeof *sb);
  sb->limit = l->memory_bytes > 0 ? l->memory_bytes : SIZE_MAX;
  sb->budget = l->instructions;
  sb->seconds = l->seconds;
  sb->chunk = sb->budget > 0 && sb->budget < HOOK_INTERVAL ? (int)sb->budget
                                                           : HOOK_INTERVAL;
  return lua_newstate(sandbox_alloc, sb);
}

static bool is_bytecode(const char *src, size_t len) {
  return len > 0 && src[0] == LUA_SIGNATURE[0];
}

int smr_lua_sandbox_load(lua_State *L, const char *src, size_t len,
                         const char *chunkname) {
  if (is_bytecode(src, len)) {
    const char *name =
        chunkname[0] == '@' || chunkname[0] == '=' ? chunkname + 1 : "chunk";
    lua_pushfstring(L,
                    "%s: precompiled Lua bytecode is not accepted; rules "
                    "are loaded from source text only",
                    name);
    return LUA_ERRSYNTAX;
  }
  return luaL_loadbufferx(L, src, len, chunkname, "t");
}

/* load(chunk [, chunkname [, mode [, env]]]) for strings, text only. */
static int sandbox_load_fn(lua_State *L) {
  size_t len;
  const char *src = lua_tolstring(L, 1, &len);
  luaL_argexpected(L, src != NULL, 1,
                   "string (function chunks are not "
                   "supported in rules)");
  const char *name = luaL_optstring(L, 2, src);
  const char *mode = luaL_optstring(L, 3, "t");
  int status;
  if (strcmp(mode, "t") != 0) {
    lua_pushstring(L, "load: binary chunks are not allowed in rules (the "
                      "mode must be \"t\")");
    status = LUA_ERRSYNTAX;
  } else {
    status = smr_lua_sandbox_load(L, src, len, name);
  }
  if (status != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  if (!lua_isnone(L, 4)) { /* new _ENV for the chunk */
    lua_pushvalue(L, 4);
    if (!lua_setupvalue(L, -2, 1))
      lua_pop(L, 1);
  }
  return 1;
}

static int sandbox_collectgarbage(lua_State *L) {
  const char *opt = luaL_optstring(L, 1, "collect");
  if (strcmp(opt, "collect") == 0) {
    lua_gc(L, LUA_GCCOLLECT);
    lua_pushinteger(L, 0);
    return 1;
  }
  if (strcmp(opt, "count") == 0) {
    int kb = lua_gc(L, LUA_GCCOUNT), rest = lua_gc(L, LUA_GCCOUNTB);
    lua_pushnumber(L, (lua_Number)kb + (lua_Number)rest / 1024.0);
    return 1;
  }
  return luaL_error(L,
                    "collectgarbage: option '%s' is not available to rules "
                    "(only \"collect\" and \"count\")",
                    opt);
}

/* xpcall with the script's handler wrapped: an error raised by the count
 * hook (a broken limit) reaches message handlers while Lua has hooks
 * switched off, so a looping handler would never be stopped.  In that case
 * the script's handler is not run at all and the error passes through. */
static int xpcall_handler(lua_State *L) {
  smr_lua_sandbox *sb = sandbox_of(L);
  if (sb->budget_exceeded || memory_broken(sb))
    return 1;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int finish_xpcall(lua_State *L, int status, lua_KContext base) {
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2; /* false, error */
  }
  return lua_gettop(L) - (int)base; /* true, results */
}

static int sandbox_xpcall(lua_State *L) {
  int nargs = lua_gettop(L) - 2;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, xpcall_handler, 1);
  lua_replace(L, 2);
  /* [f, handler, args] -> [f, handler, true, f, args] */
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2);
  int status = lua_pcallk(L, nargs, LUA_MULTRET, 2, 2, finish_xpcall);
  return finish_xpcall(L, status, 2);
}

/* setmetatable without __gc: finalizers would run script code at
 * arbitrary times (inside the host, at lua_close) outside any budget. */
static int sandbox_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    bool has_gc = lua_rawget(L, 2) != LUA_TNIL;
    lua_pop(L, 1);
    if (has_gc)
      return luaL_error(L, "setmetatable: __gc metamethods are not allowed "
                           "in rules");
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
    return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

/* ------------------------------------------- costly library functions */

/* Length of the string argument at idx (0 when it is not one). */
static double arg_len(lua_State *L, int idx) {
  size_t n = 0;
  if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER)
    lua_tolstring(L, idx, &n);
  return (double)n;
}

/* Charge `cost`, then call the original function (upvalue 1) with the
 * same arguments and return all its results. */
static int call_original(lua_State *L, double cost) {
  smr_lua_sandbox_charge_work(L, cost);
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* ------------------------------------------------------ pattern steps */

static double start_pos(lua_Integer pos, double len);

/* Lua's relative string position, as string.find's init reads it. */
static size_t init_offset(lua_State *L, int arg, size_t n) {
  int isnum = 0;
  lua_Integer pos =
      lua_type(L, arg) == LUA_TNUMBER ? lua_tointegerx(L, arg, &isnum) : 1;
  if (!isnum)
    pos = 1;
  size_t start = (size_t)start_pos(pos, (double)n);
  return start - 1;
}

/* The steps a count may take: what the budget has left (none: no limit). */
static uint64_t steps_left(lua_State *L) {
  int64_t left = smr_lua_sandbox_remaining(L);
  if (left < 0)
    return UINT64_MAX;
  return (uint64_t)left * (uint64_t)PATTERN_STEPS_PER_INSTRUCTION +
         (uint64_t)PATTERN_STEPS_PER_INSTRUCTION;
}

/* The counted steps, charged; a count past what is left raises now,
 * before the original matches anything. */
static void charge_steps(lua_State *L, smr_pattern_count k) {
  double cost = (double)k.steps / PATTERN_STEPS_PER_INSTRUCTION;
  if (k.over)
    cost = (double)smr_lua_sandbox_remaining(L) + 1.0;
  smr_lua_sandbox_charge_work(L, cost);
}

/* Subject and pattern, when both are strings (or numbers, which the
 * original converts the same way); NULL: the original raises. */
static bool subject_pattern(lua_State *L, const char **s, size_t *n,
                            const char **p, size_t *m) {
  for (int i = 1; i <= 2; i++) {
    int t = lua_type(L, i);
    if (t != LUA_TSTRING && t != LUA_TNUMBER)
      return false;
  }
  *s = lua_tolstring(L, 1, n);
  *p = lua_tolstring(L, 2, m);
  return true;
}

/* string.find and string.match: the matcher's steps counted
 * (lua_pattern.h) and charged, 100 per instruction, before the original
 * runs. */
static int find_or_match(lua_State *L, bool find) {
  const char *s, *p;
  size_t n, m;
  if (subject_pattern(L, &s, &n, &p, &m)) {
    size_t init = init_offset(L, 3, n);
    bool plain = find && (lua_toboolean(L, 4) || smr_pattern_is_plain(p, m));
    charge_steps(L, smr_pattern_find(s, n, p, m, init, plain, steps_left(L)));
  }
  return call_original(L, 0);
}

static int guarded_find(lua_State *L) {
  return find_or_match(L, true);
}

static int guarded_match(lua_State *L) {
  return find_or_match(L, false);
}

/* string.gsub: every match it will make, counted before it starts. */
static int guarded_gsub(lua_State *L) {
  const char *s, *p;
  size_t n, m;
  if (subject_pattern(L, &s, &n, &p, &m)) {
    int isnum = 0;
    lua_Integer max_n = lua_type(L, 4) == LUA_TNUMBER
                            ? lua_tointegerx(L, 4, &isnum)
                            : (lua_Integer)n + 1;
    if (lua_type(L, 4) != LUA_TNUMBER || isnum)
      charge_steps(L, smr_pattern_gsub(s, n, p, m, max_n, steps_left(L)));
  }
  return call_original(L, 0);
}

/* gmatch's iterator, wrapped: each call counts the steps of the search it
 * is about to make (from where the original's iterator stands, kept in
 * upvalues 4 and 5 the same way) and charges them, then calls it. */
static int guarded_gmatch_next(lua_State *L) {
  size_t n, m;
  const char *s = lua_tolstring(L, lua_upvalueindex(2), &n);
  const char *p = lua_tolstring(L, lua_upvalueindex(3), &m);
  size_t src = (size_t)lua_tointeger(L, lua_upvalueindex(4));
  int64_t last = (int64_t)lua_tointeger(L, lua_upvalueindex(5));
  bool found;
  smr_pattern_count k =
      smr_pattern_gmatch_next(s, n, p, m, &src, &last, &found, steps_left(L));
  lua_pushinteger(L, (lua_Integer)src);
  lua_replace(L, lua_upvalueindex(4));
  lua_pushinteger(L, (lua_Integer)last);
  lua_replace(L, lua_upvalueindex(5));
  charge_steps(L, k);
  lua_settop(L, 0);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_call(L, 0, LUA_MULTRET);
  return lua_gettop(L);
}

static int guarded_gmatch(lua_State *L) {
  const char *s, *p;
  size_t n, m;
  if (!subject_pattern(L, &s, &n, &p, &m))
    return call_original(L, 0);
  size_t init = init_offset(L, 3, n);
  if (init > n)
    init = n + 1;
  int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  for (int i = 1; i <= nargs; i++)
    lua_pushvalue(L, i);
  lua_call(L, nargs, 1); /* the original iterator */
  lua_pushvalue(L, 1);   /* the subject and pattern, as strings */
  lua_pushvalue(L, 2);
  lua_pushinteger(L, (lua_Integer)init);
  lua_pushinteger(L, -1);
  lua_pushcclosure(L, guarded_gmatch_next, 5);
  return 1;
}

/* string.rep: an empty result would still loop `n` times; any other
 * writes n * #s + (n - 1) * #sep bytes, charged before they are written
 * (a result past the memory cap is refused by the cap instead). */
static int guarded_rep(lua_State *L) {
  double s = arg_len(L, 1), sep = arg_len(L, 3);
  if (s == 0 && sep == 0 && lua_type(L, 2) == LUA_TNUMBER) {
    lua_pushliteral(L, "");
    return 1;
  }
  double n = lua_type(L, 2) == LUA_TNUMBER ? (double)lua_tointeger(L, 2) : 0;
  double bytes = n > 0 ? n * s + (n - 1) * sep : 0;
  if (bytes > (double)sandbox_of(L)->limit)
    bytes = 0;
  return call_original(L, bytes / BYTES_PER_INSTRUCTION);
}

/* table.move(a1, f, e, t [, a2]) moves e - f + 1 elements, present or not. */
static int guarded_move(lua_State *L) {
  lua_Integer f = lua_tointeger(L, 2), e = lua_tointeger(L, 3);
  double count = e >= f ? (double)e - (double)f + 1 : 0;
  return call_original(L, count / ELEMENTS_PER_INSTRUCTION);
}

static int guarded_sort(lua_State *L) {
  double n = lua_type(L, 1) == LUA_TTABLE ? (double)lua_rawlen(L, 1) : 0;
  double steps = n > 1 ? n * log2(n) : 0;
  return call_original(L, steps / ELEMENTS_PER_INSTRUCTION);
}

/* table.insert(t, pos, v) / table.remove(t, pos) shift the elements
 * after pos; appending or removing the last is one step. */
static double shifted(lua_State *L, int pos_arg) {
  if (lua_type(L, 1) != LUA_TTABLE || lua_type(L, pos_arg) != LUA_TNUMBER)
    return 0;
  double n = (double)lua_rawlen(L, 1), pos = (double)lua_tointeger(L, pos_arg);
  return n >= pos ? n - pos + 1 : 0;
}

static int guarded_insert(lua_State *L) {
  double moved = lua_gettop(L) >= 3 ? shifted(L, 2) : 0;
  return call_original(L, moved / ELEMENTS_PER_INSTRUCTION);
}

static int guarded_remove(lua_State *L) {
  double moved = lua_gettop(L) >= 2 ? shifted(L, 2) : 0;
  return call_original(L, moved / ELEMENTS_PER_INSTRUCTION);
}

/* table.concat(t, sep, i, j) and table.unpack(t, i, j) visit j - i + 1
 * elements (j defaults to #t). */
static double range_count(lua_State *L, int i_arg) {
  double n = lua_type(L, 1) == LUA_TTABLE ? (double)lua_rawlen(L, 1) : 0;
  double i =
      lua_type(L, i_arg) == LUA_TNUMBER ? (double)lua_tointeger(L, i_arg) : 1;
  double j = lua_type(L, i_arg + 1) == LUA_TNUMBER
                 ? (double)lua_tointeger(L, i_arg + 1)
                 : n;
  return j >= i ? j - i + 1 : 0;
}

static int guarded_concat(lua_State *L) {
  return call_original(L, range_count(L, 3) / ELEMENTS_PER_INSTRUCTION);
}

/* table.unpack's end defaults to #t, with its __len: a table claiming a
 * million elements pushes a million nils. */
static int guarded_unpack(lua_State *L) {
  double count = range_count(L, 2);
  if (lua_type(L, 1) == LUA_TTABLE && lua_type(L, 3) != LUA_TNUMBER &&
      luaL_getmetafield(L, 1, "__len") != LUA_TNIL) {
    lua_pop(L, 1);
    lua_Integer n = luaL_len(L, 1);
    double i = lua_type(L, 2) == LUA_TNUMBER ? (double)lua_tointeger(L, 2) : 1;
    count = (double)n >= i ? (double)n - i + 1 : 0;
  }
  return call_original(L, count / ELEMENTS_PER_INSTRUCTION);
}

/* Lua's string positions: a start below 1 counts from the end (or is
 * 1), an end past the length is the length. */
static double start_pos(lua_Integer pos, double len) {
  if (pos > 0)
    return (double)pos;
  if (pos == 0 || (double)pos < -len)
    return 1;
  return len + (double)pos + 1;
}

static double end_pos(lua_Integer pos, double len) {
  if ((double)pos > len)
    return len;
  if (pos >= 0)
    return (double)pos;
  if ((double)pos < -len)
    return 0;
  return len + (double)pos + 1;
}

/* string.byte(s, i, j) and utf8.codepoint(s, i, j) push a value per byte
 * (code point) of s[i..j]; j defaults to i. */
static int guarded_slice(lua_State *L) {
  double len = arg_len(L, 1);
  lua_Integer i = lua_type(L, 2) == LUA_TNUMBER ? lua_tointeger(L, 2) : 1;
  lua_Integer j = lua_type(L, 3) == LUA_TNUMBER ? lua_tointeger(L, 3) : i;
  double a = start_pos(i, len), b = end_pos(j, len);
  double count = b >= a ? b - a + 1 : 0;
  return call_original(L, count / ELEMENTS_PER_INSTRUCTION);
}

/* string.char(...), utf8.char(...), select(n, ...): a step per argument
 * (the caller's `...` or table.unpack put them there in one
 * instruction). */
static int guarded_args(lua_State *L) {
  return call_original(L, (double)lua_gettop(L) / ELEMENTS_PER_INSTRUCTION);
}

/* upper, lower, reverse, utf8.len, utf8.offset: one pass over the
 * string. */
static int guarded_bytes(lua_State *L) {
  return call_original(L, arg_len(L, 1) / BYTES_PER_INSTRUCTION);
}

/* The base library's originals have no copy in package.loaded (it holds
 * _G itself, where the guards are), so an error raised inside one would
 * name it '?': the guards of select and tonumber check the arguments
 * themselves, and the error names them. */
static int guarded_select(lua_State *L) {
  if (!(lua_type(L, 1) == LUA_TSTRING && *lua_tostring(L, 1) == '#')) {
    lua_Integer i = luaL_checkinteger(L, 1);
    luaL_argcheck(L, i != 0 && (i > 0 || -i < lua_gettop(L)), 1,
                  "index out of range");
  }
  return guarded_args(L);
}

/* tonumber: one pass over a string. */
static int guarded_tonumber(lua_State *L) {
  if (lua_isnoneornil(L, 2)) {
    luaL_checkany(L, 1);
  } else {
    lua_Integer base = luaL_checkinteger(L, 2);
    luaL_checktype(L, 1, LUA_TSTRING);
    luaL_argcheck(L, 2 <= base && base <= 36, 2, "base out of range");
  }
  return guarded_bytes(L);
}

/* Lua's own bound on what one conversion writes besides a %s or %q
 * argument (MAX_ITEM in lstrlib.c: widths and precisions have at most two
 * digits, so "%999d" is an error, not a megabyte of spaces). */
#define FORMAT_ITEM_BYTES 120.0

/* string.format reads the format and copies every string argument (%q
 * up to four bytes per byte), and each conversion writes up to
 * FORMAT_ITEM_BYTES. */
static int guarded_format(lua_State *L) {
  double bytes = 0, items = 0;
  size_t m = 0;
  const char *f = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &m) : "";
  for (size_t i = 0; i < m; i++)
    items += f[i] == '%';
  for (int i = 1; i <= lua_gettop(L); i++)
    bytes += arg_len(L, i);
  return call_original(L, (4 * bytes + FORMAT_ITEM_BYTES * items) /
                              BYTES_PER_INSTRUCTION);
}

/* Replace lib[name] by `guard` calling the original. */
static void guard(lua_State *L, const char *lib, const char *name,
                  lua_CFunction guard_fn) {
  lua_getglobal(L, lib);
  lua_getfield(L, -1, name);
  lua_pushcclosure(L, guard_fn, 1);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

/* Lua names a C function in error messages ("bad argument #1 to
 * 'string.find'") by looking for it in package.loaded.  Keep a copy of the
 * original library there (out of the script's reach) so the originals,
 * called through the guards, keep their names. */
static void keep_original_library(lua_State *L, const char *lib) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_newtable(L);
  lua_getglobal(L, lib);
  lua_pushnil(L);
  while (lua_next(L, -2)) { /* [loaded, copy, lib, k, v] */
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_settable(L, -5);
  }
  lua_pop(L, 1);
  lua_setfield(L, -2, lib);
  lua_pop(L, 1);
}

static void guard_costly_functions(lua_State *L) {
  keep_original_library(L, LUA_STRLIBNAME);
  keep_original_library(L, LUA_TABLIBNAME);
  keep_original_library(L, LUA_UTF8LIBNAME);
  guard(L, LUA_STRLIBNAME, "find", guarded_find);
  guard(L, LUA_STRLIBNAME, "match", guarded_match);
  guard(L, LUA_STRLIBNAME, "gmatch", guarded_gmatch);
  guard(L, LUA_STRLIBNAME, "gsub", guarded_gsub);
  guard(L, LUA_STRLIBNAME, "rep", guarded_rep);
  guard(L, LUA_TABLIBNAME, "move", guarded_move);
  guard(L, LUA_TABLIBNAME, "sort", guarded_sort);
  guard(L, LUA_TABLIBNAME, "insert", guarded_insert);
  guard(L, LUA_TABLIBNAME, "remove", guarded_remove);
  guard(L, LUA_TABLIBNAME, "concat", guarded_concat);
  guard(L, LUA_TABLIBNAME, "unpack", guarded_unpack);
  guard(L, LUA_STRLIBNAME, "format", guarded_format);
  guard(L, LUA_STRLIBNAME, "byte", guarded_slice);
  guard(L, LUA_STRLIBNAME, "char", guarded_args);
  guard(L, LUA_STRLIBNAME, "upper", guarded_bytes);
  guard(L, LUA_STRLIBNAME, "lower", guarded_bytes);
  guard(L, LUA_STRLIBNAME, "reverse", guarded_bytes);
  guard(L, LUA_UTF8LIBNAME, "len", guarded_bytes);
  guard(L, LUA_UTF8LIBNAME, "offset", guarded_bytes);
  guard(L, LUA_UTF8LIBNAME, "codepoint", guarded_slice);
  guard(L, LUA_UTF8LIBNAME, "char", guarded_args);
  guard(L, LUA_GNAME, "select", guarded_select);
  guard(L, LUA_GNAME, "tonumber", guarded_tonumber);
}

static void set_global_nil(lua_State *L, const char *name) {
  lua_pushnil(L);
  lua_setglobal(L, name);
}

static void open_lib(lua_State *L, const char *name, lua_CFunction open) {
  luaL_requiref(L, name, open, 1);
  lua_pop(L, 1);
}

int smr_lua_sandbox_open(lua_State *L) {
  open_lib(L, LUA_GNAME, luaopen_base);
  open_lib(L, LUA_STRLIBNAME, luaopen_string);
  open_lib(L, LUA_TABLIBNAME, luaopen_table);
  open_lib(L, LUA_MATHLIBNAME, luaopen_math);
  open_lib(L, LUA_UTF8LIBNAME, luaopen_utf8);
  open_lib(L, LUA_COLIBNAME, luaopen_coroutine);
  /* base functions that reach files, print to stdout, load bytecode or
   * control the collector */
  static const char *const removed[] = {"dofile", "loadfile", "print", "warn",
                                        NULL};
  for (size_t i = 0; removed[i]; i++)
    set_global_nil(L, removed[i]);
  lua_register(L, "load", sandbox_load_fn);
  lua_register(L, "collectgarbage", sandbox_collectgarbage);
  lua_register(L, "setmetatable", sandbox_setmetatable);
  lua_register(L, "xpcall", sandbox_xpcall);
  /* string.dump makes bytecode; also reachable as ("").dump */
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_pop(L, 1);
  guard_costly_functions(L);
  return 0;
}
