/* test_lua_charges.c - what a Lua rule's instruction budget is charged for
 * work the standard library does in C (docs/security.md, "What a Lua rule
 * can cost").
 *
 * Each case makes one call whose work is counted here without a clock, in
 * units that grow with what C does: values pushed, elements moved, bytes
 * read or written, comparisons of the pattern matcher.  The budget must
 * lose at least units / k for the unit's rate k (lua_sandbox.c: 4
 * elements, 16 bytes, 100 matcher steps per instruction), so a rule with
 * a budget of B instructions does at most k * B units of that work; and,
 * where the charge is not a worst case, at most a small multiple of it,
 * so that honest work is not refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "base/common.h"
#include "lua/lua_sandbox.h"
#include "unit.h"

#define ELEMENTS 4.0
#define BYTES 16.0
#define STEPS 100.0

typedef struct meter {
  smr_lua_sandbox sb;
  lua_State *L;
} meter;

static void meter_open(meter *m) {
  smr_lua_limits l;
  smr_lua_limits_default(&l);
  l.instructions = (int64_t)1e15; /* never reached: only counted */
  l.seconds = 0;
  m->L = smr_lua_sandbox_new(&m->sb, &l);
  CHECK(m->L != NULL);
  lua_pushcfunction(m->L, smr_lua_sandbox_open);
  CHECK_EQ_INT(lua_pcall(m->L, 0, 0, 0), LUA_OK);
}

/* Instructions charged for `call` (a chunk of a few VM instructions,
 * fewer than the count hook's interval, so that only charges count), run
 * after `setup`; -1 when it fails unexpectedly. */
static double charged(meter *m, const char *setup, const char *call) {
  if (setup && luaL_dostring(m->L, setup) != LUA_OK) {
    fprintf(stderr, "setup failed: %s\n", lua_tostring(m->L, -1));
    lua_pop(m->L, 1);
    return -1;
  }
  if (luaL_loadstring(m->L, call) != LUA_OK) {
    fprintf(stderr, "load failed: %s\n", lua_tostring(m->L, -1));
    lua_pop(m->L, 1);
    return -1;
  }
  smr_lua_sandbox_begin_call(m->L);
  int rc = lua_pcall(m->L, 0, 0, 0);
  if (rc != LUA_OK) {
    fprintf(stderr, "%s: %s\n", call, lua_tostring(m->L, -1));
    lua_pop(m->L, 1);
    return -1;
  }
  return (double)m->sb.executed;
}

/* The budget lost at least units / k, and (when `tight`) at most
 * 3 units / k (the charge itself, plus the allocation of the result or of
 * the stack the values are pushed on). */
static void expect_charge(meter *m, const char *setup, const char *call,
                          double units, double k, bool tight) {
  double c = charged(m, setup, call);
  bool ok = c >= units / k && (!tight || c <= 3 * units / k);
  if (!ok)
    fprintf(stderr, "  %s: charged %.0f for %.0f units (rate %g)\n", call, c,
            units, k);
  CHECK(ok);
}

#define N 100000

static const char *const STRING_N = "s = ('x'):rep(100000)";
static const char *const TABLE_N = "t = {} for i = 1, 100000 do t[i] = 65 end";

static void test_values_pushed(void) {
  meter m;
  meter_open(&m);
  /* a value pushed per byte of the range */
  expect_charge(&m, STRING_N, "s:byte(1, -1)", N, ELEMENTS, true);
  expect_charge(&m, STRING_N, "string.byte(s, -50000, 100000)", N / 2, ELEMENTS,
                true);
  expect_charge(&m, STRING_N, "utf8.codepoint(s, 1, -1)", N, ELEMENTS, true);
  /* the elements of a table range; with __len, the length it claims */
  expect_charge(&m, TABLE_N, "table.unpack(t)", N, ELEMENTS, true);
  expect_charge(&m, NULL,
                "table.unpack(setmetatable({}, {__len = function() "
                "return 100000 end}))",
                N, ELEMENTS, false);
  /* unpack's N values, then as many arguments read */
  expect_charge(&m, TABLE_N, "string.char(table.unpack(t))", 2 * N, ELEMENTS,
                true);
  expect_charge(&m, TABLE_N, "utf8.char(table.unpack(t))", 2 * N, ELEMENTS,
                true);
  expect_charge(&m, TABLE_N, "select('#', table.unpack(t))", 2 * N, ELEMENTS,
                true);
  expect_charge(&m, TABLE_N, "select(-1, table.unpack(t))", 2 * N, ELEMENTS,
                true);
  lua_close(m.L);
}

static void test_bytes_touched(void) {
  meter m;
  meter_open(&m);
  expect_charge(&m, STRING_N, "s:upper()", N, BYTES, true);
  expect_charge(&m, STRING_N, "string.lower(s)", N, BYTES, true);
  expect_charge(&m, STRING_N, "s:reverse()", N, BYTES, true);
  expect_charge(&m, "s = ('1'):rep(100000)", "tonumber(s)", N, BYTES, true);
  expect_charge(&m, STRING_N, "utf8.len(s)", N, BYTES, true);
  expect_charge(&m, STRING_N, "utf8.offset(s, -1)", N, BYTES, true);
  /* written: n * #s + (n - 1) * #sep */
  expect_charge(&m, NULL, "string.rep('ab', 50000)", N, BYTES, true);
  expect_charge(&m, NULL, "string.rep('a', 50000, '-')", N - 1, BYTES, true);
  /* format: its arguments copied, each conversion's own output */
  expect_charge(&m, STRING_N, "string.format('%s%s', s, s)", 2 * N, BYTES,
                false);
  expect_charge(&m, STRING_N, "string.format('%q', s)", N, BYTES, false);
  expect_charge(&m,
                "f = ('%5.2f'):rep(10000) u = {} for i = 1, 10000 do "
                "u[i] = 1.5 end",
                "string.format(f, table.unpack(u))", 50000, BYTES, false);
  /* Lua itself refuses widths of more than two digits: no megabyte of
   * padding from a short format */
  CHECK(luaL_dostring(m.L, "return string.format('%999d', 1)") != LUA_OK);
  lua_pop(m.L, 1);
  /* table.concat visits every element (and copies their bytes) */
  expect_charge(&m, "c = {} for i = 1, 100000 do c[i] = 'ab' end",
                "table.concat(c)", N, ELEMENTS, false);
  lua_close(m.L);
}

static void test_elements_moved(void) {
  meter m;
  meter_open(&m);
  expect_charge(&m, TABLE_N, "table.insert(t, 1, 0)", N, ELEMENTS, true);
  expect_charge(&m, TABLE_N, "table.remove(t, 1)", N, ELEMENTS, true);
  expect_charge(&m, NULL, "table.move({}, 1, 100000, 2)", N, ELEMENTS, true);
  /* comparisons of sorting n elements: at least n log2 n / 2 */
  expect_charge(&m,
                "t = {} for i = 1, 100000 do t[i] = (i * 7919) % 100003 end",
                "table.sort(t)", N * log2(N) / 2, ELEMENTS, false);
  lua_close(m.L);
}

/* Steps of Lua's matcher for "(.*)%1x" over n 'a's, as lstrlib.c takes
 * them: at each of the n + 1 starts with r bytes left, ".*" expands over
 * r bytes, then backs off one length L at a time; the back-reference
 * compares L bytes when 2 L <= r (then 'x' fails), else fails at once. */
static double backref_steps(int n) {
  double steps = 0;
  for (int r = n; r >= 0; r--) {
    steps += r;
    for (int len = r; len >= 0; len--)
      steps += 1 + (2 * len <= r ? len : 0);
  }
  return steps;
}

static void test_pattern_steps(void) {
  meter m;
  meter_open(&m);
  const char *setup = "a = ('a'):rep(400)";
  double steps = backref_steps(400); /* about 400^3 / 24 */
  CHECK(steps > 400.0 * 400 * 400 / 30);
  expect_charge(&m, setup, "a:find('(.*)%1x')", steps, STEPS, false);
  expect_charge(&m, setup, "a:match('(.*)%1x')", steps, STEPS, false);
  expect_charge(&m, setup, "a:gsub('(.*)%1x', '')", steps, STEPS, false);
  expect_charge(&m, setup, "for _ in a:gmatch('(.*)%1x') do end", steps, STEPS,
                false);
  /* the steps are counted, not bounded: within a small factor of the
   * model's both ways */
  double c = charged(&m, setup, "a:find('(.*)%1x')");
  if (c > 3 * steps / STEPS)
    fprintf(stderr, "  charged %.0f for %.0f steps\n", c, steps);
  CHECK(c <= 3 * steps / STEPS);
  /* a linear pattern over a long subject costs linear steps: 1 MB of
   * gsub('%s+', ' ') is about 2 million steps, well inside a budget (a
   * worst-case bound of n^2 refused it) */
  double big = charged(&m, "w = ('ab '):rep(350000)", "w:gsub('%s+', ' ')");
  CHECK(big >= 1050000 / STEPS && big <= 8 * 1050000 / STEPS);
  /* gmatch is charged per call of its iterator: stopping early costs only
   * what was searched; an exhausted iterator called again searches again */
  double first = charged(&m, "w = ('a'):rep(100000) .. 'b'",
                         "for x in w:gmatch('b') do break end");
  CHECK(first >= N / STEPS && first <= 4 * N / STEPS);
  double again = charged(&m, "it = w:gmatch('c') it()", "it() it() it() it()");
  CHECK(again >= 4 * N / STEPS);
  /* three lazy repetitions: n^4 / 24 comparisons at least */
  double n = 200;
  expect_charge(&m, "b = ('a'):rep(200)", "b:find('.-.-.-b')",
                n * n * n * n / 24, STEPS, false);
  /* a plain find is one pass */
  expect_charge(&m, STRING_N, "s:find('y', 1, true)", N, STEPS, false);
  lua_close(m.L);
}

/* Random patterns, malformed ones included, and random subjects: the
 * counter never reads outside the strings (the sanitizer build) and Lua's
 * own functions, run after it, give the same results as without it. */
static void test_random_patterns(void) {
  meter m;
  meter_open(&m);
  lua_State *plain = luaL_newstate();
  luaL_openlibs(plain);
  static const char alphabet[] = "()%[]^$*+-?.ab1bf";
  uint32_t x = 12345;
  int same = 0;
  for (int k = 0; k < 3000; k++) {
    char p[12], s[24];
    size_t pm = 0, sn = 0;
    x = x * 1103515245u + 12345u;
    size_t plen = (x >> 16) % sizeof p, slen = (x >> 8) % sizeof s;
    for (; pm < plen; pm++) {
      x = x * 1103515245u + 12345u;
      p[pm] = alphabet[(x >> 16) % (sizeof alphabet - 1)];
    }
    for (; sn < slen; sn++) {
      x = x * 1103515245u + 12345u;
      s[sn] = "ab()"[(x >> 16) % 4];
    }
    const char *fns[] = {"find", "match", "gsub", "gmatch"};
    const char *fn = fns[k % 4];
    char *code = smr_xasprintf(
        "local s, p = ... local ok, a, b = pcall(string.%s, s, p%s) "
        "if ok and type(a) == 'function' then ok, a, b = pcall(a) end "
        "return tostring(ok) .. tostring(a) .. tostring(b)",
        fn, strcmp(fn, "gsub") == 0 ? ", 'x'" : "");
    const char *got[2] = {NULL, NULL};
    lua_State *states[2] = {m.L, plain};
    for (int i = 0; i < 2; i++) {
      lua_State *L = states[i];
      if (luaL_loadstring(L, code) != LUA_OK)
        break;
      lua_pushlstring(L, s, sn);
      lua_pushlstring(L, p, pm);
      if (i == 0)
        smr_lua_sandbox_begin_call(L);
      if (lua_pcall(L, 2, 1, 0) == LUA_OK)
        got[i] = lua_tostring(L, -1);
    }
    bool eq = got[0] && got[1] && strcmp(got[0], got[1]) == 0;
    if (!eq)
      fprintf(stderr, "  string.%s(%.*s, %.*s): %s vs %s\n", fn, (int)sn, s,
              (int)pm, p, got[0] ? got[0] : "?", got[1] ? got[1] : "?");
    same += eq;
    lua_settop(m.L, 0);
    lua_settop(plain, 0);
    free(code);
  }
  CHECK_EQ_INT(same, 3000);
  lua_close(plain);
  lua_close(m.L);
}

/* With a budget, the same calls in a loop end at the budget (they are not
 * only counted but refused before the work is done). */
static void test_budget_refuses(void) {
  static const char *const loops[] = {
      "local s = ('x'):rep(100000) while true do local _ = s:byte(1, -1) end",
      "local s = ('a'):rep(400) while true do s:find('(.*)%1x') end",
      "local s = ('x'):rep(1 << 20) while true do s:upper() end",
      "local t = {} for i = 1, 100000 do t[i] = 1 end\n"
      "while true do local _ = select('#', table.unpack(t)) end",
  };
  for (size_t i = 0; i < sizeof loops / sizeof loops[0]; i++) {
    smr_lua_sandbox sb;
    smr_lua_limits l;
    smr_lua_limits_default(&l);
    l.instructions = 1000000;
    l.seconds = 0;
    lua_State *L = smr_lua_sandbox_new(&sb, &l);
    lua_pushcfunction(L, smr_lua_sandbox_open);
    CHECK_EQ_INT(lua_pcall(L, 0, 0, 0), LUA_OK);
    CHECK_EQ_INT(luaL_loadstring(L, loops[i]), LUA_OK);
    smr_lua_sandbox_begin_call(L);
    CHECK(lua_pcall(L, 0, 0, 0) != LUA_OK);
    char msg[128];
    CHECK(smr_lua_sandbox_broken(L, msg, sizeof msg));
    CHECK(strstr(msg, "instruction limit of 1000000") != NULL);
    lua_close(L);
  }
}

/* Guarded functions behave as Lua's own and their errors name them. */
static void test_same_behaviour(void) {
  meter m;
  meter_open(&m);
  static const char *const checks[] = {
      "assert(select(-1, 1, 2, 3) == 3 and select(2, 'a', 'b') == 'b')",
      "assert(select('#') == 0 and select('#', nil, nil) == 2)",
      "assert(tonumber('z', 36) == 35 and tonumber(' 0x10 ') == 16)",
      "assert(tonumber({}) == nil and tonumber('1e2') == 100)",
      "assert(('abc'):byte(-1) == 99 and select('#', ('abc'):byte(5)) == 0)",
      "assert(utf8.codepoint(utf8.char(0x10FFFF)) == 0x10FFFF)",
      "assert(('ab'):rep(3, ',') == 'ab,ab,ab' and ('x'):rep(0) == '')",
      "assert(table.unpack({1, 2, 3}, 2) == 2)",
      "local ok, e = pcall(select) assert(e:find(\"to 'select'\"))",
      "local ok, e = pcall(select, 0) assert(e:find('index out of range'))",
      "local ok, e = pcall(tonumber) assert(e:find(\"to 'tonumber'\"))",
      "local ok, e = pcall(tonumber, 'z', 99) assert(e:find('base out of "
      "range'))",
      "local ok, e = pcall(string.byte, {}) assert(e:find(\"'string.byte'\"))",
      "local ok, e = pcall(utf8.char, -1) assert(e:find(\"'utf8.char'\"))",
  };
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    bool ok = luaL_dostring(m.L, checks[i]) == LUA_OK;
    if (!ok) {
      fprintf(stderr, "  %s: %s\n", checks[i], lua_tostring(m.L, -1));
      lua_pop(m.L, 1);
    }
    CHECK(ok);
  }
  lua_close(m.L);
}

int main(void) {
  TEST_RUN(test_same_behaviour);
  TEST_RUN(test_values_pushed);
  TEST_RUN(test_bytes_touched);
  TEST_RUN(test_elements_moved);
  TEST_RUN(test_pattern_steps);
  TEST_RUN(test_random_patterns);
  TEST_RUN(test_budget_refuses);
  return TEST_REPORT("test_lua_charges");
}
