/* lua_value.c - tensor values seen from Lua: userdata holding the host's
 * decoded smr_tensor (elements stay in host memory, counted against the
 * rule's memory limit while the value lives), 1-based element access,
 * shape, dtype, reductions and finite-only statistics. */
#include "lua/lua_value.h"

#include <string.h>

#include <lauxlib.h>

#include "lua/lua_sandbox.h"
#include "lua/lua_util.h"

#define SMR_LUA_VALUE_MT "smrules.value"

/* totable() refuses values larger than this: element access and the
 * reductions work on the host's copy without one. */
#define TOTABLE_MAX 1000000

typedef struct lua_value {
  smr_tensor t;
  smr_value_loc loc;
  size_t charged; /* bytes counted against the memory limit */
  bool live;
} lua_value;

static size_t value_bytes(const smr_tensor *t) {
  size_t n = t->nbytes;
  for (int64_t i = 0; t->strings && t->string_lens && i < t->count; i++)
    n += t->string_lens[i] + sizeof(void *) + sizeof(size_t);
  return n;
}

static void value_release(lua_State *L, lua_value *v) {
  if (!v->live)
    return;
  smr_tensor_release(&v->t);
  smr_lua_sandbox_uncharge(L, v->charged);
  v->charged = 0;
  v->live = false;
}

static int value_gc(lua_State *L) {
  value_release(L, lua_touserdata(L, 1));
  return 0;
}

static lua_value *check_value(lua_State *L) {
  lua_value *v = luaL_checkudata(L, 1, SMR_LUA_VALUE_MT);
  if (!v->live)
    luaL_error(L, "this tensor value was released");
  return v;
}

void smr_lua_value_push(lua_State *L, int name_idx, smr_tensor **t,
                        smr_value_loc **loc) {
  name_idx = lua_absindex(L, name_idx);
  lua_value *v = lua_newuserdatauv(L, sizeof *v, 1);
  memset(v, 0, sizeof *v);
  luaL_setmetatable(L, SMR_LUA_VALUE_MT);
  lua_pushvalue(L, name_idx);
  lua_setiuservalue(L, -2, 1);
  *t = &v->t;
  *loc = &v->loc;
}

void smr_lua_value_ready(lua_State *L, int idx) {
  lua_value *v = luaL_checkudata(L, idx, SMR_LUA_VALUE_MT);
  v->live = true;
  size_t bytes = value_bytes(&v->t);
  if (!smr_lua_sandbox_charge(L, bytes)) {
    value_release(L, v);
    char msg[96];
    smr_lua_sandbox_memory_message(L, msg, sizeof msg);
    luaL_error(L, "%s", msg);
  }
  v->charged = bytes;
  smr_lua_sandbox_charge_work(L, (double)bytes /
                                     SMR_LUA_READ_BYTES_PER_INSTRUCTION);
}

static void push_element(lua_State *L, const smr_tensor *t, int64_t i) {
  if (t->dtype == SMR_DT_STRING && t->strings)
    lua_pushlstring(L, (const char *)t->strings[i], t->string_lens[i]);
  else
    lua_pushnumber(L, smr_tensor_get(t, i));
}

static int value_element(lua_State *L, lua_value *v) {
  lua_Integer i;
  int isint = 0;
  i = lua_tointegerx(L, 2, &isint);
  if (!isint)
    return luaL_error(L, "tensor value index must be an integer");
  if (i < 1 || i > v->t.count)
    return luaL_error(L, "tensor value index %I out of range 1..%I", i,
                      (lua_Integer)v->t.count);
  push_element(L, &v->t, i - 1);
  return 1;
}

/* Fields of a value; false when `k` is not one. */
static bool value_field(lua_State *L, lua_value *v, const char *k) {
  if (strcmp(k, "dtype") == 0)
    lua_pushstring(L, smr_dtype_numpy_name(v->t.dtype));
  else if (strcmp(k, "name") == 0)
    lua_getiuservalue(L, 1, 1);
  else if (strcmp(k, "step") == 0)
    lua_pushinteger(L, (lua_Integer)v->loc.step);
  else if (strcmp(k, "mode") == 0)
    lua_pushstring(L, smr_mode_name(v->loc.mode));
  else if (strcmp(k, "mode_step") == 0)
    lua_pushinteger(L, (lua_Integer)v->loc.mode_step);
  else if (strcmp(k, "worker") == 0)
    lua_pushstring(L, v->loc.worker);
  else if (strcmp(k, "wall_time") == 0)
    lua_pushnumber(L, v->t.wall_time);
  else
    return false;
  return true;
}

static int value_index(lua_State *L) {
  lua_value *v = luaL_checkudata(L, 1, SMR_LUA_VALUE_MT);
  if (lua_type(L, 2) == LUA_TNUMBER)
    return value_element(L, check_value(L));
  const char *k = lua_tostring(L, 2);
  if (k && v->live && value_field(L, v, k))
    return 1;
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1)); /* methods */
  return 1;
}

static int value_newindex(lua_State *L) {
  return luaL_error(L, "tensor values are read-only");
}

static int value_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_value(L)->t.count);
  return 1;
}

static int value_tostring(lua_State *L) {
  lua_value *v = luaL_checkudata(L, 1, SMR_LUA_VALUE_MT);
  if (!v->live) {
    lua_pushliteral(L, "tensor value (released)");
    return 1;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "tensor value ");
  luaL_addstring(&b, smr_dtype_numpy_name(v->t.dtype));
  luaL_addchar(&b, '[');
  for (int i = 0; i < v->t.ndim; i++) {
    lua_pushfstring(L, i ? "x%I" : "%I", (lua_Integer)v->t.shape[i]);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, ']');
  luaL_pushresult(&b);
  return 1;
}

static int value_shape(lua_State *L) {
  lua_value *v = check_value(L);
  lua_createtable(L, v->t.ndim, 0);
  for (int i = 0; i < v->t.ndim; i++) {
    lua_pushinteger(L, (lua_Integer)v->t.shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static void charge_pass(lua_State *L, const lua_value *v) {
  smr_lua_sandbox_charge_work(L, (double)v->t.count /
                                     SMR_LUA_REDUCE_ELEMENTS_PER_INSTRUCTION);
}

static int reduce_to_lua(lua_State *L, lua_value *v, int red, bool abs) {
  charge_pass(L, v);
  double out = 0;
  smr_error err;
  smr_error_clear(&err);
  if (smr_tensor_reduce(&v->t, (smr_reduction)red, abs, &out, &err))
    return luaL_error(L, "%s", err.msg);
  lua_pushnumber(L, out);
  return 1;
}

static int value_reduce(lua_State *L) {
  lua_value *v = check_value(L);
  int red = smr_lua_check_reduction(L, 2);
  smr_lua_check_opts(L, 3);
  return reduce_to_lua(L, v, red, smr_lua_opt_bool(L, 3, "abs"));
}

#define REDUCTION_METHOD(fn, red)                                              \
  static int fn(lua_State *L) {                                                \
    return reduce_to_lua(L, check_value(L), red, false);                       \
  }
REDUCTION_METHOD(value_min, SMR_RED_MIN)
REDUCTION_METHOD(value_max, SMR_RED_MAX)
REDUCTION_METHOD(value_mean, SMR_RED_MEAN)
REDUCTION_METHOD(value_sum, SMR_RED_SUM)
REDUCTION_METHOD(value_prod, SMR_RED_PROD)
REDUCTION_METHOD(value_std, SMR_RED_STD)
REDUCTION_METHOD(value_variance, SMR_RED_VARIANCE)
REDUCTION_METHOD(value_l1, SMR_RED_L1)
REDUCTION_METHOD(value_l2, SMR_RED_L2)
REDUCTION_METHOD(value_linf, SMR_RED_LINF)

static void stats_of(lua_State *L, lua_value *v, smr_stats *s) {
  charge_pass(L, v);
  smr_error err;
  smr_error_clear(&err);
  if (smr_tensor_stats(&v->t, s, &err))
    luaL_error(L, "%s", err.msg);
}

static void set_int(lua_State *L, const char *k, int64_t x) {
  lua_pushinteger(L, (lua_Integer)x);
  lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, double x) {
  lua_pushnumber(L, x);
  lua_setfield(L, -2, k);
}

static int value_stats(lua_State *L) {
  smr_stats s;
  stats_of(L, check_value(L), &s);
  smr_lua_push_stats(L, &s, true);
  return 1;
}

void smr_lua_push_stats(lua_State *L, const smr_stats *ps, bool sums) {
  smr_stats s = *ps;
  lua_createtable(L, 0, 16);
  set_int(L, "count", s.count);
  set_int(L, "finite", s.finite);
  set_int(L, "nan", s.nan);
  set_int(L, "pinf", s.pinf);
  set_int(L, "ninf", s.ninf);
  set_int(L, "inf", s.pinf + s.ninf);
  set_int(L, "zeros", s.zeros);
  lua_pushboolean(L, s.has_finite);
  lua_setfield(L, -2, "has_finite");
  if (s.has_finite && sums) {
    set_num(L, "min", s.min);
    set_num(L, "max", s.max);
    set_num(L, "sum", s.sum);
    set_num(L, "mean", s.mean);
    set_num(L, "l1", s.l1);
    set_num(L, "l2", s.l2);
    set_num(L, "linf", s.linf);
  }
}

static int value_count_nan(lua_State *L) {
  smr_stats s;
  stats_of(L, check_value(L), &s);
  lua_pushinteger(L, (lua_Integer)s.nan);
  return 1;
}

static int value_count_inf(lua_State *L) {
  smr_stats s;
  stats_of(L, check_value(L), &s);
  lua_pushinteger(L, (lua_Integer)(s.pinf + s.ninf));
  return 1;
}

static int value_size(lua_State *L) {
  return value_len(L);
}

static int value_totable(lua_State *L) {
  lua_value *v = check_value(L);
  if (v->t.count > TOTABLE_MAX)
    return luaL_error(L,
                      "totable: the value has %I elements, more than %d; use "
                      "v[i] and the reductions instead",
                      (lua_Integer)v->t.count, TOTABLE_MAX);
  lua_createtable(L, (int)v->t.count, 0);
  for (int64_t i = 0; i < v->t.count; i++) {
    push_element(L, &v->t, i);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

static int value_release_fn(lua_State *L) {
  value_release(L, luaL_checkudata(L, 1, SMR_LUA_VALUE_MT));
  return 0;
}

static const luaL_Reg value_methods[] = {{"size", value_size},
                                         {"shape", value_shape},
                                         {"min", value_min},
                                         {"max", value_max},
                                         {"mean", value_mean},
                                         {"sum", value_sum},
                                         {"prod", value_prod},
                                         {"std", value_std},
                                         {"variance", value_variance},
                                         {"l1", value_l1},
                                         {"l2", value_l2},
                                         {"linf", value_linf},
                                         {"reduce", value_reduce},
                                         {"stats", value_stats},
                                         {"count_nan", value_count_nan},
                                         {"count_inf", value_count_inf},
                                         {"totable", value_totable},
                                         {"release", value_release_fn},
                                         {NULL, NULL}};

static const luaL_Reg value_meta[] = {{"__newindex", value_newindex},
                                      {"__len", value_len},
                                      {"__tostring", value_tostring},
                                      {"__gc", value_gc},
                                      {NULL, NULL}};

void smr_lua_value_open(lua_State *L) {
  smr_lua_new_metatable(L, SMR_LUA_VALUE_MT);
  smr_lua_set_index(L, value_index, value_methods);
  luaL_setfuncs(L, value_meta, 0);
  lua_pop(L, 1);
}
