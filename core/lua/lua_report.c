/* lua_report.c - what a Lua rule reports: report.violation{...} and
 * report.details{...} turn a table of scalars, lists and nested tables
 * into the host's JSON objects (keys sorted, so the report does not
 * depend on Lua's hash order); report.datapoints(n); and logging. */
#include "lua/lua_report.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "lua/lua_sandbox.h"
#include "lua/lua_util.h"

/* Nesting of report tables. */
#define MAX_DEPTH 32

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* String keys of the table at `idx`, sorted (the report is deterministic
 * whatever Lua's hash order).  Pushes the buffer holding them. */
static const char **sorted_keys(lua_State *L, int idx, size_t *n) {
  size_t count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "report: keys must be strings");
    count++;
    lua_pop(L, 1);
  }
  const char **keys =
      lua_newuserdatauv(L, (count ? count : 1) * sizeof *keys, 0);
  size_t i = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    keys[i++] = lua_tostring(L, -2); /* anchored by the table */
    lua_pop(L, 1);
  }
  qsort(keys, count, sizeof *keys, cmp_cstr);
  *n = count;
  return keys;
}

/* Whether the table at `idx` is a sequence 1..#t (an empty table counts). */
static bool is_sequence(lua_State *L, int idx, size_t *len) {
  size_t n = lua_rawlen(L, idx), count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    count++;
    lua_pop(L, 1);
  }
  *len = n;
  return count == n;
}

typedef enum list_kind {
  LIST_INTS,
  LIST_NUMS,
  LIST_STRS,
  LIST_MIXED
} list_kind;

static list_kind kind_of_list(lua_State *L, int idx, size_t n) {
  bool ints = true, nums = true, strs = true;
  for (size_t i = 1; i <= n; i++) {
    int type = lua_rawgeti(L, idx, (lua_Integer)i);
    ints = ints && type == LUA_TNUMBER && lua_isinteger(L, -1);
    nums = nums && type == LUA_TNUMBER;
    strs = strs && type == LUA_TSTRING;
    lua_pop(L, 1);
  }
  return ints ? LIST_INTS : nums ? LIST_NUMS : strs ? LIST_STRS : LIST_MIXED;
}

/* Emit the list at `idx` (j NULL: only check it). */
static void emit_list(lua_State *L, const smrules_api *api, smrules_json *j,
                      const char *key, int idx, size_t n) {
  list_kind kind = kind_of_list(L, idx, n);
  if (kind == LIST_MIXED)
    luaL_error(L, "report: list '%s' must hold only numbers or only strings",
               key);
  if (!j)
    return;
  size_t elem = kind == LIST_INTS   ? sizeof(int64_t)
                : kind == LIST_NUMS ? sizeof(double)
                                    : sizeof(const char *);
  void *buf = lua_newuserdatauv(L, (n ? n : 1) * elem, 0);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i + 1);
    if (kind == LIST_INTS)
      ((int64_t *)buf)[i] = (int64_t)lua_tointeger(L, -1);
    else if (kind == LIST_NUMS)
      ((double *)buf)[i] = (double)lua_tonumber(L, -1);
    else
      ((const char **)buf)[i] = lua_tostring(L, -1); /* anchored by list */
    lua_pop(L, 1);
  }
  if (kind == LIST_INTS)
    api->json_ints(j, key, buf, n);
  else if (kind == LIST_NUMS)
    api->json_nums(j, key, buf, n);
  else
    api->json_strs(j, key, (const char *const *)buf, n);
  lua_pop(L, 1);
}

static void emit_table(lua_State *L, const smrules_api *api, smrules_json *j,
                       int idx, int depth);

/* Bytes the host will hold for the values checked so far (the check
 * pass runs before anything is emitted; one state is one thread). */
static _Thread_local size_t checked_bytes;

/* Emit the value on top of the stack under `key` (j NULL: only check). */
static void emit_value(lua_State *L, const smrules_api *api, smrules_json *j,
                       const char *key, int depth) {
  int top = lua_gettop(L);
  size_t n;
  if (!j) {
    size_t len = 0;
    if (lua_type(L, top) == LUA_TSTRING)
      lua_tolstring(L, top, &len);
    checked_bytes += strlen(key) + len + 32; /* node overhead */
  }
  switch (lua_type(L, top)) {
  case LUA_TBOOLEAN:
    if (j)
      api->json_bool(j, key, lua_toboolean(L, top));
    break;
  case LUA_TNUMBER:
    if (j && lua_isinteger(L, top))
      api->json_int(j, key, (int64_t)lua_tointeger(L, top));
    else if (j)
      api->json_num(j, key, (double)lua_tonumber(L, top));
    break;
  case LUA_TSTRING:
    if (j)
      api->json_str(j, key, lua_tostring(L, top));
    break;
  case LUA_TTABLE:
    if (depth >= MAX_DEPTH)
      luaL_error(L, "report: tables nested more than %d deep", MAX_DEPTH);
    if (is_sequence(L, top, &n))
      emit_list(L, api, j, key, top, n);
    else
      emit_table(L, api, j ? api->json_obj(j, key) : NULL, top, depth + 1);
    break;
  default:
    luaL_error(L,
               "report: '%s' has a %s value (use numbers, strings, booleans "
               "or tables of them)",
               key, luaL_typename(L, top));
  }
}

static void emit_table(lua_State *L, const smrules_api *api, smrules_json *j,
                       int idx, int depth) {
  luaL_checkstack(L, 8, "report: tables nested too deep");
  size_t n;
  const char **keys = sorted_keys(L, idx, &n);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, keys[i]);
    lua_rawget(L, idx);
    emit_value(L, api, j, keys[i], depth);
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* keys */
}

/* Check the whole table first so a bad value adds nothing to the report. */
static void report_into(lua_State *L, smrules_json *(*make)(smrules_ctx *),
                        const char *what, size_t *held) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  smr_lua_host *h = smr_lua_host_of(L);
  checked_bytes = 0;
  emit_table(L, h->api, NULL, 1, 0);
  /* the host keeps this data outside the Lua heap: it counts toward the
   * rule's memory limit all the same */
  if (!smr_lua_sandbox_charge(L, checked_bytes)) {
    char msg[96];
    smr_lua_sandbox_memory_message(L, msg, sizeof msg);
    luaL_error(L, "report.%s: %s (report data counts toward the limit)", what,
               msg);
  }
  *held += checked_bytes;
  smrules_json *j = make(h->ctx);
  if (!j)
    luaL_error(L, "report.%s: not available here", what);
  emit_table(L, h->api, j, 1, 0);
}

static int report_violation(lua_State *L) {
  smr_lua_host *h = smr_lua_host_of(L);
  report_into(L, h->api->violation, "violation", &h->step_bytes);
  return 0;
}

static int report_details(lua_State *L) {
  smr_lua_host *h = smr_lua_host_of(L);
  report_into(L, h->api->details, "details", &h->details_bytes);
  return 0;
}

static int report_datapoints(lua_State *L) {
  lua_Integer n = luaL_optinteger(L, 1, 1);
  luaL_argcheck(L, n >= 0, 1, "a count >= 0");
  smr_lua_host *h = smr_lua_host_of(L);
  h->api->datapoints(h->ctx, (int64_t)n);
  return 0;
}

static const luaL_Reg report_functions[] = {{"violation", report_violation},
                                            {"details", report_details},
                                            {"datapoints", report_datapoints},
                                            {NULL, NULL}};

void smr_lua_report_open(lua_State *L) {
  lua_newtable(L);
  luaL_setfuncs(L, report_functions, 0);
  lua_setglobal(L, "report");
}

/* The message a log line carries is capped; a rule printing megabytes
 * into the log is a bug, not information. */
#define LOG_MAX 8192

int smr_lua_log(lua_State *L) {
  int level = (int)luaL_checkinteger(L, 1);
  int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 2; i <= n; i++) {
    if (i > 2)
      luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  smr_lua_host *h = smr_lua_host_of(L);
  h->api->log(h->ctx,
              level < 0   ? 0
              : level > 3 ? 3
                          : level,
              "%.*s", (int)(len > LOG_MAX ? LOG_MAX : len), msg);
  return 0;
}
