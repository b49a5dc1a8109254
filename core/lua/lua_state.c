/* lua_state.c - what a Lua rule keeps across runs (docs/lua-api.md,
 * "Keeping state across runs"): the value the script's save_state()
 * returns, written as a Lua constructor expression ("{[\"best\"]=0.5,...}")
 * and read back by a reader of exactly that form (never run as code), so
 * stored text can only build plain values.
 *
 * Values: nil, booleans, integers, floats (nan and infinities included,
 * written as 0/0, 1/0, -1/0), strings (any bytes), and tables of those
 * (keys: strings, numbers, booleans), nested at most MAX_DEPTH deep,
 * without cycles.  Anything else is an error naming the key path. */
#include "lua/lua_state.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "base/common.h"
#include "lua/lua_sandbox.h"

#define MAX_DEPTH 32
#define MAX_TEXT (16u << 20)

/* The text being written: pieces in a Lua table (so that an error
 * raised halfway leaks nothing) and the tables being written (cycles). */
typedef struct out {
  lua_State *L;
  int pieces, seen; /* absolute stack indices */
  lua_Integer n;
  size_t bytes;
} out;

static void add(out *o, const char *s, size_t n) {
  o->bytes += n;
  if (o->bytes > MAX_TEXT)
    luaL_error(o->L, "save_state: the state is larger than %u bytes", MAX_TEXT);
  lua_pushlstring(o->L, s, n);
  lua_rawseti(o->L, o->pieces, ++o->n);
}

static void add_str(out *o, const char *s) {
  add(o, s, strlen(s));
}

static void put_string(out *o, const char *s, size_t n) {
  char buf[512];
  size_t k = 0;
  buf[k++] = '"';
  for (size_t i = 0; i < n; i++) {
    if (k > sizeof buf - 8) {
      add(o, buf, k);
      k = 0;
    }
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      buf[k++] = '\\';
      buf[k++] = (char)c;
    } else if (c < 32 || c > 126) { /* three digits: none can join them */
      k += (size_t)snprintf(buf + k, 6, "\\%03u", c);
    } else {
      buf[k++] = (char)c;
    }
  }
  buf[k++] = '"';
  add(o, buf, k);
}

static void put_number(out *o, int idx) {
  lua_State *L = o->L;
  char s[64];
  if (lua_isinteger(L, idx)) {
    lua_Integer v = lua_tointeger(L, idx);
    if (v == LUA_MININTEGER) /* no literal for it */
      snprintf(s, sizeof s, "(%lld-1)", (long long)(v + 1));
    else
      snprintf(s, sizeof s, "%lld", (long long)v);
  } else {
    double v = lua_tonumber(L, idx);
    if (isnan(v))
      snprintf(s, sizeof s, "(0/0)");
    else if (isinf(v))
      snprintf(s, sizeof s, v > 0 ? "(1/0)" : "(-1/0)");
    else {
      snprintf(s, sizeof s, "%.17g", v);
      if (!strpbrk(s, ".eEn")) /* keep it a float when read back */
        strcat(s, ".0");
    }
  }
  add_str(o, s);
}

static void put_value(out *o, int idx, int depth, const char *path);

static void key_path(lua_State *L, int k, const char *path, char *sub,
                     size_t size) {
  int kt = lua_type(L, k);
  if (kt == LUA_TSTRING)
    snprintf(sub, size, "%s.%s", path, lua_tostring(L, k));
  else if (kt == LUA_TBOOLEAN)
    snprintf(sub, size, "%s[%s]", path, lua_toboolean(L, k) ? "true" : "false");
  else if (kt == LUA_TNUMBER && lua_isinteger(L, k))
    snprintf(sub, size, "%s[%lld]", path, (long long)lua_tointeger(L, k));
  else if (kt == LUA_TNUMBER && !isnan(lua_tonumber(L, k)))
    snprintf(sub, size, "%s[%g]", path, lua_tonumber(L, k));
  else
    luaL_error(L,
               "save_state: %s as a key in %s (keys must be strings, "
               "numbers or booleans)",
               kt == LUA_TNUMBER ? "nan" : luaL_typename(L, k), path);
}

static void put_table(out *o, int idx, int depth, const char *path) {
  lua_State *L = o->L;
  if (depth > MAX_DEPTH)
    luaL_error(L, "save_state: tables nested deeper than %d at %s", MAX_DEPTH,
               path);
  luaL_checkstack(L, 8, "save_state");
  lua_pushvalue(L, idx);
  if (lua_rawget(L, o->seen) != LUA_TNIL)
    luaL_error(L, "save_state: a table contains itself at %s", path);
  lua_pop(L, 1);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, o->seen);
  add_str(o, "{");
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int k = lua_gettop(L) - 1;
    char sub[256];
    key_path(L, k, path, sub, sizeof sub);
    add_str(o, "[");
    put_value(o, k, depth + 1, sub);
    add_str(o, "]=");
    put_value(o, k + 1, depth + 1, sub);
    add_str(o, ",");
    lua_pop(L, 1);
  }
  add_str(o, "}");
  lua_pushvalue(L, idx);
  lua_pushnil(L);
  lua_rawset(L, o->seen);
}

static void put_value(out *o, int idx, int depth, const char *path) {
  lua_State *L = o->L;
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
  case LUA_TNIL:
    add_str(o, "nil");
    break;
  case LUA_TBOOLEAN:
    add_str(o, lua_toboolean(L, idx) ? "true" : "false");
    break;
  case LUA_TNUMBER:
    put_number(o, idx);
    break;
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    put_string(o, s, n);
    break;
  }
  case LUA_TTABLE:
    put_table(o, idx, depth, path);
    break;
  default:
    luaL_error(L, "save_state: cannot keep a %s (at %s)", luaL_typename(L, idx),
               path);
  }
}

/* The value at the top as text (replaces it). */
static void serialize(lua_State *L) {
  int value = lua_gettop(L);
  lua_newtable(L);
  lua_newtable(L);
  out o = {L, value + 1, value + 2, 0, 0};
  put_value(&o, value, 0, "state");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= o.n; i++) {
    lua_rawgeti(L, o.pieces, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  lua_replace(L, value);
  lua_settop(L, value);
}

int smr_lua_state_save(lua_State *L) {
  int type = lua_getglobal(L, "save_state");
  if (type == LUA_TNIL)
    return 0; /* nothing to keep */
  if (type != LUA_TFUNCTION)
    return luaL_error(L, "'save_state' must be a function (it is a %s)",
                      lua_typename(L, type));
  lua_call(L, 0, 1);
  serialize(L);
  return 1;
}

/* ------------------------------------------------------------ reading */

/* The stored text is the trial's (anyone who can write the state file
 * can change it): it is never run.  This reader accepts exactly the form
 * the writer above produces and builds plain values with raw table
 * accesses; no string method, metatable or function is ever reached, and
 * its work is linear in the text. */
typedef struct in {
  lua_State *L;
  const char *s, *p, *end;
} in;

static int bad(in *t, const char *what) {
  return luaL_error(t->L, "stored state: byte %d: %s", (int)(t->p - t->s),
                    what);
}

static bool eat(in *t, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(t->end - t->p) < n || memcmp(t->p, lit, n) != 0)
    return false;
  t->p += n;
  return true;
}

static void get_value(in *t, int depth);

static void get_string(in *t) {
  luaL_Buffer b;
  luaL_buffinit(t->L, &b);
  t->p++; /* the opening quote */
  for (;;) {
    if (t->p >= t->end)
      bad(t, "unterminated string");
    char c = *t->p++;
    if (c == '"')
      break;
    if (c != '\\') {
      luaL_addchar(&b, c);
      continue;
    }
    if (t->p < t->end && (*t->p == '"' || *t->p == '\\')) {
      luaL_addchar(&b, *t->p++);
      continue;
    }
    int v = 0;
    for (int k = 0; k < 3; k++, t->p++) {
      if (t->p >= t->end || *t->p < '0' || *t->p > '9')
        bad(t, "expected \\\" \\\\ or \\ and three digits");
      v = v * 10 + (*t->p - '0');
    }
    if (v > 255)
      bad(t, "character code above 255");
    luaL_addchar(&b, (char)v);
  }
  luaL_pushresult(&b);
}

static bool number_char(const char *q, const char *start) {
  if ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
      *q == '+')
    return true;
  /* a sign: leading, or of an exponent */
  return *q == '-' && (q == start || q[-1] == 'e' || q[-1] == 'E');
}

/* "(N-1)": the smallest integer, which has no literal. */
static void get_min_integer(in *t) {
  if (!eat(t, "(-9223372036854775807-1)"))
    bad(t, "expected a number");
  lua_pushinteger(t->L, LUA_MININTEGER);
}

static void get_number(in *t) {
  if (eat(t, "(0/0)")) {
    lua_pushnumber(t->L, NAN);
    return;
  }
  if (eat(t, "(1/0)")) {
    lua_pushnumber(t->L, HUGE_VAL);
    return;
  }
  if (eat(t, "(-1/0)")) {
    lua_pushnumber(t->L, -HUGE_VAL);
    return;
  }
  if (*t->p == '(') {
    get_min_integer(t);
    return;
  }
  const char *q = t->p;
  bool is_float = false;
  for (; q < t->end && number_char(q, t->p); q++)
    is_float = is_float || *q == '.' || *q == 'e' || *q == 'E';
  char num[64];
  size_t n = (size_t)(q - t->p);
  if (n == 0 || n >= sizeof num)
    bad(t, "expected a number");
  memcpy(num, t->p, n);
  num[n] = '\0';
  char *stop;
  errno = 0;
  if (is_float) {
    double d = strtod(num, &stop);
    if (*stop)
      bad(t, "expected a number");
    lua_pushnumber(t->L, d);
  } else {
    long long v = strtoll(num, &stop, 10);
    if (*stop || errno == ERANGE)
      bad(t, "expected an integer in range");
    lua_pushinteger(t->L, (lua_Integer)v);
  }
  t->p = q;
}

static void get_table(in *t, int depth) {
  if (depth > MAX_DEPTH)
    bad(t, "tables nested too deep");
  luaL_checkstack(t->L, 4, "stored state");
  t->p++; /* { */
  lua_newtable(t->L);
  while (!eat(t, "}")) {
    if (!eat(t, "["))
      bad(t, "expected '[' or '}'");
    get_value(t, depth + 1);
    int kt = lua_type(t->L, -1);
    if (kt == LUA_TNIL || kt == LUA_TTABLE ||
        (kt == LUA_TNUMBER && isnan(lua_tonumber(t->L, -1))))
      bad(t, "a key must be a string, a number or a boolean");
    if (!eat(t, "]="))
      bad(t, "expected ']='");
    get_value(t, depth + 1);
    if (!eat(t, ","))
      bad(t, "expected ','");
    lua_rawset(t->L, -3);
  }
}

static void get_value(in *t, int depth) {
  if (t->p >= t->end)
    bad(t, "the text ends early");
  char c = *t->p;
  if (c == '{')
    get_table(t, depth);
  else if (c == '"')
    get_string(t);
  else if (eat(t, "nil"))
    lua_pushnil(t->L);
  else if (eat(t, "true"))
    lua_pushboolean(t->L, 1);
  else if (eat(t, "false"))
    lua_pushboolean(t->L, 0);
  else if (c == '(' || c == '-' || (c >= '0' && c <= '9'))
    get_number(t);
  else
    bad(t, "expected a value");
}

int smr_lua_state_load(lua_State *L) {
  const char *text = lua_touserdata(L, 1);
  int type = lua_getglobal(L, "load_state");
  if (type != LUA_TFUNCTION)
    return luaL_error(L, "the script defines no function load_state(state)");
  size_t n = strlen(text);
  if (n > MAX_TEXT)
    return luaL_error(L, "stored state: larger than %u bytes", MAX_TEXT);
  in t = {L, text, text, text + n};
  get_value(&t, 0);
  if (t.p != t.end)
    bad(&t, "text after the value");
  lua_call(L, 1, 0);
  return 0;
}
