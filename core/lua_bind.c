/* lua_bind.c - the Lua side of the host: trial, tensor and tensor value
 * objects, report and log functions, parameter conversion, and error
 * objects for unavailable or unreadable data.
 *
 * Every function here runs inside a protected call and may raise.  C-side
 * containers filled by the trial are kept in a `scratch` userdata while
 * their contents are copied into Lua, so a memory error raised half-way
 * leaks nothing (the collector frees the scratch). */
#include "lua_bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "index.h"
#include "lua_sandbox.h"
#include "tensor.h"
#include "trial.h"

#define TRIAL_MT "smrules.trial"
#define TENSOR_MT "smrules.tensor"
#define VALUE_MT "smrules.value"
#define ERROR_MT "smrules.error"
#define SKIPPED_MT "smrules.skipped"
#define SCRATCH_MT "smrules.scratch"

/* totable() refuses values larger than this: element access and the
 * reductions work on the host's copy without one. */
#define TOTABLE_MAX 1000000
/* Nesting of report tables and of parameter nodes. */
#define MAX_DEPTH 32

/* Host work charged to the instruction budget (see lua_sandbox.c): one
 * instruction per READ_BYTES_PER_INSTRUCTION bytes of tensor data read,
 * per REDUCE_ELEMENTS_PER_INSTRUCTION elements reduced. */
#define READ_BYTES_PER_INSTRUCTION 256.0
#define REDUCE_ELEMENTS_PER_INSTRUCTION 64.0

/* Registry keys (addresses only; never written). */
static const char error_mt_key = 'e';
static const char skipped_key = 's';

static smr_lua_host *host_of(lua_State *L) {
  return *(smr_lua_host **)lua_getextraspace(L);
}

static smr_trial *trial_of(lua_State *L) {
  smr_trial *t = host_of(L)->trial;
  if (!t)
    luaL_error(L, "this rule has no trial to read");
  return t;
}

/* ------------------------------------------------------------ scratch */

typedef struct scratch {
  smr_strv s;
  smr_i64v v;
  smr_tensor_steps ts;
} scratch;

static void scratch_clear(scratch *g) {
  smr_strv_free(&g->s);
  smr_i64v_free(&g->v);
  smr_tensor_steps_free(&g->ts);
  memset(g, 0, sizeof *g);
}

static int scratch_gc(lua_State *L) {
  scratch_clear(lua_touserdata(L, 1));
  return 0;
}

static scratch *new_scratch(lua_State *L) {
  scratch *g = lua_newuserdatauv(L, sizeof *g, 0);
  memset(g, 0, sizeof *g);
  luaL_setmetatable(L, SCRATCH_MT);
  return g;
}

static void push_strv(lua_State *L, const smr_strv *s) {
  lua_createtable(L, (int)s->n, 0);
  for (size_t i = 0; i < s->n; i++) {
    lua_pushstring(L, s->v[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static void push_i64v(lua_State *L, const smr_i64v *v) {
  lua_createtable(L, (int)v->n, 0);
  for (size_t i = 0; i < v->n; i++) {
    lua_pushinteger(L, (lua_Integer)v->v[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* ------------------------------------------------------- error objects */

/* A userdata with uservalues 1 = kind, 2 = message, 3 = file; the host
 * reads them without allocating. */
typedef struct errobj {
  int status; /* smr_status */
  int64_t offset;
} errobj;

static bool is_availability(int status) {
  return status == SMR_STEP_UNAVAILABLE || status == SMR_STEP_NOT_YET ||
         status == SMR_TENSOR_UNAVAILABLE_FOR_STEP ||
         status == SMR_TENSOR_UNAVAILABLE || status == SMR_NO_MORE_DATA;
}

/* SMR_* availability codes to the plugin API's (same meaning). */
static int api_status(int status) {
  switch (status) {
  case SMR_STEP_UNAVAILABLE: return SMRULES_STEP_UNAVAILABLE;
  case SMR_STEP_NOT_YET: return SMRULES_STEP_NOT_YET;
  case SMR_TENSOR_UNAVAILABLE_FOR_STEP:
    return SMRULES_TENSOR_UNAVAILABLE_FOR_STEP;
  case SMR_TENSOR_UNAVAILABLE: return SMRULES_TENSOR_UNAVAILABLE;
  case SMR_NO_MORE_DATA: return SMRULES_NO_MORE_DATA;
  default: return SMRULES_ERR;
  }
}

static errobj *to_errobj(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx))
    return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &error_mt_key);
  bool same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? lua_touserdata(L, idx) : NULL;
}

/* Raise an error object for a failed trial query (availability status or
 * unreadable data, the latter naming file and offset). */
static int raise_status(lua_State *L, int status, const smr_error *err) {
  char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 32];
  smr_error_format(err, msg, sizeof msg);
  errobj *e = lua_newuserdatauv(L, sizeof *e, 3);
  e->status = status;
  e->offset = err->offset;
  lua_pushstring(L, smr_status_name(status));
  lua_setiuservalue(L, -2, 1);
  lua_pushstring(L, msg[0] ? msg : smr_status_name(status));
  lua_setiuservalue(L, -2, 2);
  lua_pushstring(L, err->file);
  lua_setiuservalue(L, -2, 3);
  luaL_setmetatable(L, ERROR_MT);
  return lua_error(L);
}

/* Errors from the trial: usage errors are the script's (plain error with
 * position), everything else an error object. */
static int raise_trial_error(lua_State *L, int status, const smr_error *err) {
  if (status == SMR_ERR_USAGE)
    return luaL_error(L, "%s", err->msg);
  return raise_status(L, status, err);
}

static int errobj_index(lua_State *L) {
  errobj *e = luaL_checkudata(L, 1, ERROR_MT);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "kind") == 0)
    lua_getiuservalue(L, 1, 1);
  else if (strcmp(k, "message") == 0)
    lua_getiuservalue(L, 1, 2);
  else if (strcmp(k, "file") == 0)
    lua_getiuservalue(L, 1, 3);
  else if (strcmp(k, "offset") == 0 && e->offset >= 0)
    lua_pushinteger(L, (lua_Integer)e->offset);
  else if (strcmp(k, "smrules_unavailable") == 0 && is_availability(e->status))
    lua_pushinteger(L, api_status(e->status));
  else
    lua_pushnil(L);
  return 1;
}

int smr_lua_error_status(lua_State *L, int idx, const char **msg) {
  idx = lua_absindex(L, idx);
  if (msg)
    *msg = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
  errobj *e = to_errobj(L, idx);
  if (!e)
    return SMRULES_ERR;
  if (msg) {
    lua_getiuservalue(L, idx, 2); /* anchored by the object */
    *msg = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return is_availability(e->status) ? api_status(e->status) : SMRULES_ERR;
}

static void push_errobj_text(lua_State *L, int idx) {
  lua_getiuservalue(L, idx, 1);
  lua_getiuservalue(L, idx, 2);
  lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), lua_tostring(L, -1));
  lua_replace(L, -3);
  lua_pop(L, 1);
}

static int errobj_tostring(lua_State *L) {
  luaL_checkudata(L, 1, ERROR_MT);
  push_errobj_text(L, 1);
  return 1;
}

const char *smr_lua_error_text(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TSTRING) {
    lua_pushvalue(L, idx);
    return lua_tostring(L, -1);
  }
  if (to_errobj(L, idx)) {
    push_errobj_text(L, idx);
    return lua_tostring(L, -1);
  }
  if (luaL_callmeta(L, idx, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
    return lua_tostring(L, -1);
  return lua_pushfstring(L, "(error object is a %s value)",
                         luaL_typename(L, idx));
}

/* ------------------------------------------------------------ options */

/* Options tables are optional: nil or a table. */
static void check_opts(lua_State *L, int idx) {
  if (!lua_isnoneornil(L, idx) && !lua_istable(L, idx))
    luaL_typeerror(L, idx, "options table");
}

/* SMR_MODE_* of the value at `idx` ("TRAIN", ..., or 1..4); nil: dflt. */
static int to_mode(lua_State *L, int idx, int dflt) {
  int type = lua_type(L, idx);
  if (type == LUA_TNONE || type == LUA_TNIL)
    return dflt;
  if (type == LUA_TNUMBER && lua_isinteger(L, idx)) {
    lua_Integer m = lua_tointeger(L, idx);
    if (m >= SMR_MODE_TRAIN && m <= SMR_MODE_GLOBAL)
      return (int)m;
  } else if (type == LUA_TSTRING) {
    int m = smr_mode_from_name(lua_tostring(L, idx));
    if (m)
      return m;
  }
  return luaL_error(L,
                    "unknown mode '%s' (expected \"TRAIN\", \"EVAL\", "
                    "\"PREDICT\" or \"GLOBAL\")",
                    luaL_tolstring(L, idx, NULL));
}

static int opt_mode(lua_State *L, int opts) {
  if (lua_isnoneornil(L, opts))
    return SMR_MODE_GLOBAL;
  lua_getfield(L, opts, "mode");
  int m = to_mode(L, -1, SMR_MODE_GLOBAL);
  lua_pop(L, 1);
  return m;
}

static bool opt_bool(lua_State *L, int opts, const char *key) {
  if (lua_isnoneornil(L, opts))
    return false;
  lua_getfield(L, opts, key);
  bool b = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

/* opts.worker copied into buf (NULL when absent). */
static const char *opt_worker(lua_State *L, int opts, char *buf, size_t n) {
  if (lua_isnoneornil(L, opts))
    return NULL;
  lua_getfield(L, opts, "worker");
  const char *w = NULL;
  if (!lua_isnil(L, -1)) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (!s || len >= n)
      luaL_error(L, "option 'worker' must be a worker name");
    memcpy(buf, s, len + 1);
    w = buf;
  }
  lua_pop(L, 1);
  return w;
}

/* opts[key] as a list of strings (a string or a sequence of strings).
 * Pushes a buffer of pointers (anchored strings); returns NULL and pushes
 * nothing when the option is absent. */
static const char **opt_strings(lua_State *L, int opts, const char *key,
                                size_t *n) {
  *n = 0;
  if (lua_isnoneornil(L, opts))
    return NULL;
  lua_getfield(L, opts, key); /* stays on the stack: anchors the strings */
  int type = lua_type(L, -1);
  if (type == LUA_TNIL) {
    lua_pop(L, 1);
    return NULL;
  }
  if (type != LUA_TSTRING && type != LUA_TTABLE)
    luaL_error(L, "option '%s' must be a string or a list of strings", key);
  size_t count = type == LUA_TSTRING ? 1 : lua_rawlen(L, -1);
  const char **v = lua_newuserdatauv(L, (count ? count : 1) * sizeof *v, 0);
  if (type == LUA_TSTRING)
    v[0] = lua_tostring(L, -2);
  for (size_t i = 0; type == LUA_TTABLE && i < count; i++) {
    if (lua_rawgeti(L, -2, (lua_Integer)i + 1) != LUA_TSTRING)
      luaL_error(L, "option '%s' must be a string or a list of strings", key);
    v[i] = lua_tostring(L, -1); /* anchored by the list */
    lua_pop(L, 1);
  }
  *n = count;
  return v;
}

/* ---------------------------------------------------------------- trial */

static void check_trial(lua_State *L) {
  luaL_checkudata(L, 1, TRIAL_MT);
}

static int trial_steps(lua_State *L) {
  check_trial(L);
  smr_trial *t = trial_of(L);
  check_opts(L, 2);
  int mode = opt_mode(L, 2);
  bool incomplete = opt_bool(L, 2, "incomplete");
  scratch *g = new_scratch(L);
  smr_trial_steps(t, mode, incomplete, &g->v);
  push_i64v(L, &g->v);
  scratch_clear(g);
  return 1;
}

/* Union of collection members and regex matches (rules.md §0.2); every
 * saved name when neither is given. */
static int select_names(lua_State *L, smr_trial *t, scratch *g) {
  size_t nc, nr;
  const char **colls = opt_strings(L, 2, "collection", &nc);
  const char **res = opt_strings(L, 2, "regex", &nr);
  smr_error err;
  smr_error_clear(&err);
  int rc = SMR_OK;
  if (!colls && !res)
    rc = smr_trial_tensor_names(t, &g->s, &err);
  for (size_t i = 0; rc == SMR_OK && i < nc; i++)
    rc = smr_trial_collection_members(t, colls[i], &g->s, &err);
  if (rc == SMR_OK && nr)
    rc = smr_trial_tensor_names_regex(t, res, nr, &g->s, &err);
  if (rc)
    return raise_trial_error(L, rc, &err);
  smr_strv_sort_unique(&g->s);
  return 0;
}

static int trial_tensor_names(lua_State *L) {
  check_trial(L);
  smr_trial *t = trial_of(L);
  check_opts(L, 2);
  lua_settop(L, 2);
  scratch *g = new_scratch(L);
  select_names(L, t, g);
  push_strv(L, &g->s);
  scratch_clear(g);
  return 1;
}

static void push_tensor(lua_State *L, int name_idx) {
  lua_newuserdatauv(L, 0, 1);
  lua_pushvalue(L, name_idx);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, TENSOR_MT);
}

static int trial_tensor(lua_State *L) {
  check_trial(L);
  const char *name = luaL_checkstring(L, 2);
  if (!smr_trial_has_tensor(trial_of(L), name)) {
    smr_error err;
    smr_error_set(&err, SMR_TENSOR_UNAVAILABLE, "", -1,
                  "tensor '%s' was never saved in this trial", name);
    return raise_status(L, SMR_TENSOR_UNAVAILABLE, &err);
  }
  push_tensor(L, 2);
  return 1;
}

static int trial_has_tensor(lua_State *L) {
  check_trial(L);
  const char *name = luaL_checkstring(L, 2);
  lua_pushboolean(L, smr_trial_has_tensor(trial_of(L), name));
  return 1;
}

static int trial_has_passed_step(lua_State *L) {
  check_trial(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  int mode = to_mode(L, 3, SMR_MODE_GLOBAL);
  smr_availability a = smr_trial_has_passed_step(trial_of(L), step, mode);
  lua_pushstring(L, smr_availability_name(a));
  return 1;
}

static int trial_mode(lua_State *L) {
  check_trial(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  int mode;
  int64_t mode_step;
  if (!smr_trial_step_mode(trial_of(L), step, &mode, &mode_step)) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushstring(L, smr_mode_name(mode));
  lua_pushinteger(L, (lua_Integer)mode_step);
  return 2;
}

static int trial_global_step(lua_State *L) {
  check_trial(L);
  int mode = to_mode(L, 2, 0);
  if (!mode)
    luaL_argerror(L, 2, "a mode");
  lua_Integer mode_step = luaL_checkinteger(L, 3);
  int64_t step;
  if (smr_trial_global_step(trial_of(L), mode, mode_step, &step))
    lua_pushinteger(L, (lua_Integer)step);
  else
    lua_pushnil(L);
  return 1;
}

static int trial_workers(lua_State *L) {
  check_trial(L);
  push_strv(L, smr_trial_workers(trial_of(L)));
  return 1;
}

static int trial_collections(lua_State *L) {
  check_trial(L);
  smr_trial *t = trial_of(L);
  scratch *g = new_scratch(L);
  smr_trial_collection_names(t, &g->s);
  push_strv(L, &g->s);
  scratch_clear(g);
  return 1;
}

static int trial_tostring(lua_State *L) {
  smr_trial *t = host_of(L)->trial;
  lua_pushfstring(L, "trial(%s)", t ? smr_trial_root(t) : "none");
  return 1;
}

static const luaL_Reg trial_methods[] = {
    {"steps", trial_steps},
    {"tensor_names", trial_tensor_names},
    {"tensor", trial_tensor},
    {"has_tensor", trial_has_tensor},
    {"has_passed_step", trial_has_passed_step},
    {"mode", trial_mode},
    {"global_step", trial_global_step},
    {"workers", trial_workers},
    {"collections", trial_collections},
    {NULL, NULL}};

/* --------------------------------------------------------------- tensor */

/* The tensor's name (anchored by the tensor object at index 1). */
static const char *check_tensor(lua_State *L) {
  luaL_checkudata(L, 1, TENSOR_MT);
  lua_getiuservalue(L, 1, 1);
  const char *name = lua_tostring(L, -1);
  lua_pop(L, 1);
  return name;
}

static int tensor_index(lua_State *L) {
  check_tensor(L);
  const char *k = lua_tostring(L, 2);
  if (k && strcmp(k, "name") == 0) {
    lua_getiuservalue(L, 1, 1);
    return 1;
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1)); /* methods */
  return 1;
}

static int tensor_tostring(lua_State *L) {
  lua_pushfstring(L, "tensor(%s)", check_tensor(L));
  return 1;
}

static int tensor_steps(lua_State *L) {
  const char *name = check_tensor(L);
  check_opts(L, 2);
  int mode = opt_mode(L, 2);
  bool incomplete = opt_bool(L, 2, "incomplete");
  scratch *g = new_scratch(L);
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_trial_tensor_step_list(trial_of(L), name, mode, incomplete,
                                      &g->v, &err);
  if (rc)
    return raise_trial_error(L, rc, &err);
  push_i64v(L, &g->v);
  scratch_clear(g);
  return 1;
}

static bool entry_at(const smr_tensor_step *s, int64_t step, int mode) {
  return mode == SMR_MODE_GLOBAL ? s->step == step
                                 : s->mode == mode && s->mode_step == step;
}

/* Everything saved for the tensor, into g->ts. */
static void tensor_entries(lua_State *L, const char *name, scratch *g) {
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_trial_tensor_steps(trial_of(L), name, &g->ts, &err);
  if (rc)
    raise_trial_error(L, rc, &err);
}

static int tensor_has_value(lua_State *L) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  check_opts(L, 3);
  int mode = opt_mode(L, 3);
  scratch *g = new_scratch(L);
  tensor_entries(L, name, g);
  bool found = false;
  for (size_t i = 0; i < g->ts.n && !found; i++)
    found = g->ts.v[i].has_value && entry_at(&g->ts.v[i], step, mode);
  scratch_clear(g);
  lua_pushboolean(L, found);
  return 1;
}

static int tensor_workers(lua_State *L) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  check_opts(L, 3);
  int mode = opt_mode(L, 3);
  scratch *g = new_scratch(L);
  tensor_entries(L, name, g);
  for (size_t i = 0; i < g->ts.n; i++)
    if (entry_at(&g->ts.v[i], step, mode))
      smr_strv_push(&g->s, g->ts.v[i].worker);
  smr_strv_sort_unique(&g->s);
  push_strv(L, &g->s);
  scratch_clear(g);
  return 1;
}

static int tensor_shape(lua_State *L) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  check_opts(L, 3);
  char wbuf[256];
  const char *worker = opt_worker(L, 3, wbuf, sizeof wbuf);
  int ndim = 0;
  int64_t shape[SMR_MAX_DIMS];
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_trial_shape(trial_of(L), name, step, opt_mode(L, 3), worker,
                           &ndim, shape, &err);
  if (rc)
    return raise_trial_error(L, rc, &err);
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, (lua_Integer)shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int check_reduction(lua_State *L, int idx) {
  const char *rname = luaL_checkstring(L, idx);
  int red = smr_reduction_from_name(rname);
  if (red < 0)
    luaL_error(L,
               "unknown reduction '%s' (expected min, max, mean, std, "
               "variance, sum, prod, l1, l2 or linf)",
               rname);
  return red;
}

static double element_count(int ndim, const int64_t *shape) {
  double n = 1;
  for (int i = 0; i < ndim; i++)
    n *= (double)(shape[i] > 0 ? shape[i] : 0);
  return n;
}

/* A reduction computed from the value read it and went over it. */
static void charge_computed_reduction(lua_State *L, const char *name,
                                      int64_t step, int mode,
                                      const char *worker) {
  int ndim = 0;
  int64_t shape[SMR_MAX_DIMS];
  smr_error err;
  if (smr_trial_shape(trial_of(L), name, step, mode, worker, &ndim, shape,
                      &err) != SMR_OK)
    return;
  double n = element_count(ndim, shape);
  smr_lua_sandbox_charge_work(L, n * 4 / READ_BYTES_PER_INSTRUCTION +
                                     n / REDUCE_ELEMENTS_PER_INSTRUCTION);
}

static int tensor_reduction_value(lua_State *L) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  int red = check_reduction(L, 3);
  check_opts(L, 4);
  char wbuf[256];
  const char *worker = opt_worker(L, 4, wbuf, sizeof wbuf);
  double v = 0;
  bool saved = false;
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_trial_reduction(trial_of(L), name, step, opt_mode(L, 4),
                               worker, red, opt_bool(L, 4, "abs"), &v, &saved,
                               NULL, &err);
  if (rc)
    return raise_trial_error(L, rc, &err);
  if (!saved)
    charge_computed_reduction(L, name, step, opt_mode(L, 4), worker);
  lua_pushnumber(L, v);
  lua_pushboolean(L, saved);
  return 2;
}

/* ---------------------------------------------------------- tensor value */

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
  lua_value *v = luaL_checkudata(L, 1, VALUE_MT);
  if (!v->live)
    luaL_error(L, "this tensor value was released");
  return v;
}

static int tensor_value(lua_State *L) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  check_opts(L, 3);
  char wbuf[256];
  const char *worker = opt_worker(L, 3, wbuf, sizeof wbuf);
  int mode = opt_mode(L, 3);
  lua_value *v = lua_newuserdatauv(L, sizeof *v, 1);
  memset(v, 0, sizeof *v);
  luaL_setmetatable(L, VALUE_MT);
  lua_getiuservalue(L, 1, 1);
  lua_setiuservalue(L, -2, 1); /* the value knows its tensor's name */
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_trial_value(trial_of(L), name, step, mode, worker, &v->t,
                           &v->loc, &err);
  if (rc)
    return raise_trial_error(L, rc, &err);
  v->live = true;
  size_t bytes = value_bytes(&v->t);
  if (!smr_lua_sandbox_charge(L, bytes)) {
    value_release(L, v);
    char msg[96];
    smr_lua_sandbox_memory_message(L, msg, sizeof msg);
    return luaL_error(L, "%s", msg);
  }
  v->charged = bytes;
  smr_lua_sandbox_charge_work(L, (double)bytes / READ_BYTES_PER_INSTRUCTION);
  return 1;
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
  lua_value *v = luaL_checkudata(L, 1, VALUE_MT);
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
  lua_value *v = luaL_checkudata(L, 1, VALUE_MT);
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
                                     REDUCE_ELEMENTS_PER_INSTRUCTION);
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
  int red = check_reduction(L, 2);
  check_opts(L, 3);
  return reduce_to_lua(L, v, red, opt_bool(L, 3, "abs"));
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
  if (s.has_finite) {
    set_num(L, "min", s.min);
    set_num(L, "max", s.max);
    set_num(L, "sum", s.sum);
    set_num(L, "mean", s.mean);
    set_num(L, "l1", s.l1);
    set_num(L, "l2", s.l2);
    set_num(L, "linf", s.linf);
  }
  return 1;
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
  value_release(L, luaL_checkudata(L, 1, VALUE_MT));
  return 0;
}

static const luaL_Reg value_methods[] = {
    {"size", value_size},
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

static const luaL_Reg tensor_methods[] = {
    {"steps", tensor_steps},
    {"value", tensor_value},
    {"reduction_value", tensor_reduction_value},
    {"has_value", tensor_has_value},
    {"shape", tensor_shape},
    {"workers", tensor_workers},
    {NULL, NULL}};

/* --------------------------------------------------------------- report */

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
  const char **keys = lua_newuserdatauv(L, (count ? count : 1) * sizeof *keys,
                                        0);
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

typedef enum list_kind { LIST_INTS, LIST_NUMS, LIST_STRS, LIST_MIXED } list_kind;

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

/* Emit the value on top of the stack under `key` (j NULL: only check). */
static void emit_value(lua_State *L, const smrules_api *api, smrules_json *j,
                       const char *key, int depth) {
  int top = lua_gettop(L);
  size_t n;
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
                        const char *what) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  smr_lua_host *h = host_of(L);
  emit_table(L, h->api, NULL, 1, 0);
  smrules_json *j = make(h->ctx);
  if (!j)
    luaL_error(L, "report.%s: not available here", what);
  emit_table(L, h->api, j, 1, 0);
}

static int report_violation(lua_State *L) {
  report_into(L, host_of(L)->api->violation, "violation");
  return 0;
}

static int report_details(lua_State *L) {
  report_into(L, host_of(L)->api->details, "details");
  return 0;
}

static int report_datapoints(lua_State *L) {
  lua_Integer n = luaL_optinteger(L, 1, 1);
  luaL_argcheck(L, n >= 0, 1, "a count >= 0");
  smr_lua_host *h = host_of(L);
  h->api->datapoints(h->ctx, (int64_t)n);
  return 0;
}

static const luaL_Reg report_functions[] = {
    {"violation", report_violation},
    {"details", report_details},
    {"datapoints", report_datapoints},
    {NULL, NULL}};

/* ------------------------------------------------------------ internals */

/* The message a log line carries is capped; a rule printing megabytes
 * into the log is a bug, not information. */
#define LOG_MAX 8192

/* log(level, ...): arguments through tostring, tab-separated, as print. */
static int internal_log(lua_State *L) {
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
  smr_lua_host *h = host_of(L);
  h->api->log(h->ctx, level < 0 ? 0 : level > 3 ? 3 : level, "%.*s",
              (int)(len > LOG_MAX ? LOG_MAX : len), msg);
  return 0;
}

/* error_kind(e): the kind of an error object ("TensorUnavailableForStep",
 * "FormatError", ...), nil for any other value. */
static int internal_error_kind(lua_State *L) {
  if (!to_errobj(L, 1))
    return 0;
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/* unavailable_kind(e): the kind when `e` reports unavailable data. */
static int internal_unavailable_kind(lua_State *L) {
  errobj *e = to_errobj(L, 1);
  if (!e || !is_availability(e->status))
    return 0;
  lua_getiuservalue(L, 1, 1);
  return 1;
}

bool smr_lua_is_skipped(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &skipped_key);
  bool same = lua_rawequal(L, idx, -1);
  lua_pop(L, 1);
  return same;
}

/* ---------------------------------------------------------------- params */

static void push_node_depth(lua_State *L, const smr_node *n, int depth) {
  if (depth > MAX_DEPTH)
    luaL_error(L, "params: nested more than %d deep", MAX_DEPTH);
  luaL_checkstack(L, 4, "params: nested too deep");
  if (!n) {
    lua_pushnil(L);
    return;
  }
  switch (n->type) {
  case SMR_NODE_BOOL: lua_pushboolean(L, n->b); break;
  case SMR_NODE_INT: lua_pushinteger(L, (lua_Integer)n->i); break;
  case SMR_NODE_FLOAT: lua_pushnumber(L, n->f); break;
  case SMR_NODE_STRING: lua_pushstring(L, n->s ? n->s : ""); break;
  case SMR_NODE_LIST:
    lua_createtable(L, (int)n->n, 0);
    for (size_t i = 0; i < n->n; i++) {
      push_node_depth(L, n->items[i], depth + 1);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    break;
  case SMR_NODE_MAP:
    lua_createtable(L, 0, (int)n->n);
    for (size_t i = 0; i < n->n; i++) {
      push_node_depth(L, n->items[i], depth + 1);
      lua_setfield(L, -2, n->keys[i]);
    }
    break;
  default: lua_pushnil(L); break;
  }
}

void smr_lua_push_node(lua_State *L, const smr_node *n) {
  push_node_depth(L, n, 0);
}

/* ----------------------------------------------------------------- open */

/* A locked metatable: getmetatable() from the script sees a string. */
static void new_metatable(lua_State *L, const char *name) {
  luaL_newmetatable(L, name);
  lua_pushliteral(L, "locked");
  lua_setfield(L, -2, "__metatable");
}

static void set_method(lua_State *L, const char *name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  lua_setfield(L, -2, name);
}

/* __index = closure over a methods table built from `methods`. */
static void set_index_with_methods(lua_State *L, lua_CFunction index,
                                   const luaL_Reg *methods) {
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_pushcclosure(L, index, 1);
  lua_setfield(L, -2, "__index");
}

static void open_metatables(lua_State *L) {
  new_metatable(L, SCRATCH_MT);
  set_method(L, "__gc", scratch_gc);
  new_metatable(L, ERROR_MT);
  set_method(L, "__index", errobj_index);
  set_method(L, "__tostring", errobj_tostring);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &error_mt_key);
  new_metatable(L, TRIAL_MT);
  lua_newtable(L);
  luaL_setfuncs(L, trial_methods, 0);
  lua_setfield(L, -2, "__index");
  set_method(L, "__tostring", trial_tostring);
  new_metatable(L, TENSOR_MT);
  set_index_with_methods(L, tensor_index, tensor_methods);
  set_method(L, "__tostring", tensor_tostring);
  new_metatable(L, VALUE_MT);
  set_index_with_methods(L, value_index, value_methods);
  set_method(L, "__newindex", value_newindex);
  set_method(L, "__len", value_len);
  set_method(L, "__tostring", value_tostring);
  set_method(L, "__gc", value_gc);
  new_metatable(L, SKIPPED_MT);
  lua_pushliteral(L, "smrules.SKIPPED");
  lua_setfield(L, -2, "__name");
  lua_pop(L, 6);
}

static void open_globals(lua_State *L) {
  lua_newuserdatauv(L, 0, 0);
  luaL_setmetatable(L, TRIAL_MT);
  lua_setglobal(L, "trial");
  lua_newtable(L);
  luaL_setfuncs(L, report_functions, 0);
  lua_setglobal(L, "report");
}

/* The table handed to lua/smrules.lua. */
static void push_internals(lua_State *L) {
  lua_newtable(L);
  set_method(L, "log", internal_log);
  set_method(L, "error_kind", internal_error_kind);
  set_method(L, "unavailable_kind", internal_unavailable_kind);
  lua_newuserdatauv(L, 0, 0);
  luaL_setmetatable(L, SKIPPED_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &skipped_key);
  lua_setfield(L, -2, "SKIPPED");
}

int smr_lua_bind_open(lua_State *L) {
  luaL_checktype(L, 1, LUA_TLIGHTUSERDATA);
  *(smr_lua_host **)lua_getextraspace(L) = lua_touserdata(L, 1);
  open_metatables(L);
  open_globals(L);
  push_internals(L);
  return 1;
}
