/* lua_bind.c - the Lua side of the host: the trial and tensor objects,
 * parameter conversion, error objects for unavailable or unreadable data,
 * and the setup of everything a rule sees (values: lua_value.c; report
 * and log: lua_report.c).
 *
 * Every function here runs inside a protected call and may raise.  C-side
 * containers filled by the trial are kept in a `scratch` userdata while
 * their contents are copied into Lua, so a memory error raised half-way
 * leaks nothing (the collector frees the scratch). */
#include "lua/lua_bind.h"
#include "lua/lua_util.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "format/index.h"
#include "format/tensor.h"
#include "host/data.h"
#include "lua/lua_report.h"
#include "lua/lua_sandbox.h"
#include "lua/lua_value.h"
#include "trial/trial.h"

#define TRIAL_MT "smrules.trial"
#define TENSOR_MT "smrules.tensor"
#define ERROR_MT "smrules.error"
#define SKIPPED_MT "smrules.skipped"
#define SCRATCH_MT "smrules.scratch"

/* Nesting of parameter nodes. */
#define MAX_DEPTH 32

/* Registry keys (addresses only; never written). */
static const char error_mt_key = 'e';
static const char skipped_key = 's';

static smr_trial *trial_of(lua_State *L) {
  smr_trial *t = smr_lua_host_of(L)->trial;
  if (!t)
    luaL_error(L, "this rule has no trial to read");
  /* live: inside the trial's reader gate (trial.h) until the call ends or
   * the count hook ticks (lua_sandbox.c) */
  smr_trial_reader_enter(t);
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
  case SMR_STEP_UNAVAILABLE:
    return SMRULES_STEP_UNAVAILABLE;
  case SMR_STEP_NOT_YET:
    return SMRULES_STEP_NOT_YET;
  case SMR_TENSOR_UNAVAILABLE_FOR_STEP:
    return SMRULES_TENSOR_UNAVAILABLE_FOR_STEP;
  case SMR_TENSOR_UNAVAILABLE:
    return SMRULES_TENSOR_UNAVAILABLE;
  case SMR_NO_MORE_DATA:
    return SMRULES_NO_MORE_DATA;
  default:
    return SMRULES_ERR;
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
 * position), everything else an error object.  Data that cannot be read
 * (corrupt record, missing event file) is as if it had not been saved:
 * the step is skipped for this rule, as smdebug's TensorUnavailableForStep,
 * and the reason is logged once, exactly as for C plugins (host/data.h
 * turns unreadable values into that already; here the same for the
 * trial's queries; docs/formats.md#differences-from-smdebug, Decision
 * F10). */
static int raise_trial_error(lua_State *L, int status, const smr_error *err) {
  if (status == SMR_ERR_USAGE)
    return luaL_error(L, "%s", err->msg);
  if (status == SMR_ERR_FORMAT || status == SMR_ERR_IO)
    status = smr_data_unreadable(err);
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
  smr_lua_check_opts(L, 2);
  int mode = opt_mode(L, 2);
  bool incomplete = smr_lua_opt_bool(L, 2, "incomplete");
  scratch *g = new_scratch(L);
  smr_trial_steps(t, mode, incomplete, &g->v);
  push_i64v(L, &g->v);
  scratch_clear(g);
  return 1;
}

/* Regex matching over the trial's names (the rule's regexes and those of
 * the trial's collections) runs in C, where the count hook cannot see
 * it: it may take what is left of the instruction budget as PCRE2 match
 * steps, and is charged what it took.  A catastrophic pattern over many
 * names then ends the call with the instruction-limit error instead of
 * taking up to PCRE2's match limit (~0.1 s) per name on every call. */
static smr_regex_meter regex_meter(lua_State *L) {
  int64_t left = smr_lua_sandbox_remaining(L);
  smr_regex_meter m = {.budget = UINT64_MAX};
  if (left >= 0)
    m.budget = (uint64_t)((double)left * SMR_LUA_REGEX_STEPS_PER_INSTRUCTION);
  return m;
}

static void charge_regex_meter(lua_State *L, const smr_regex_meter *m) {
  double cost = (double)m->spent / SMR_LUA_REGEX_STEPS_PER_INSTRUCTION;
  if (m->exhausted) /* more than is left: the budget's own error */
    cost = (double)smr_lua_sandbox_remaining(L) + 1.0;
  smr_lua_sandbox_charge_work(L, cost);
}

/* Union of collection members and regex matches
 * (docs/rule-semantics.md#tensor-selection); every saved name when neither is
 * given. */
static int select_names(lua_State *L, smr_trial *t, scratch *g) {
  size_t nc, nr;
  const char **colls = opt_strings(L, 2, "collection", &nc);
  const char **res = opt_strings(L, 2, "regex", &nr);
  smr_error err;
  smr_error_clear(&err);
  smr_regex_meter meter = regex_meter(L);
  int rc = SMR_OK;
  if (!colls && !res)
    rc = smr_trial_tensor_names(t, &g->s, &err);
  for (size_t i = 0; rc == SMR_OK && !meter.exhausted && i < nc; i++)
    rc = smr_trial_collection_members(t, colls[i], &meter, &g->s, &err);
  if (rc == SMR_OK && !meter.exhausted && nr)
    rc = smr_trial_tensor_names_regex(t, res, nr, &meter, &g->s, &err);
  charge_regex_meter(L, &meter);
  if (rc)
    return raise_trial_error(L, rc, &err);
  smr_strv_sort_unique(&g->s);
  return 0;
}

static int trial_tensor_names(lua_State *L) {
  check_trial(L);
  smr_trial *t = trial_of(L);
  smr_lua_check_opts(L, 2);
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
  smr_trial *t = smr_lua_host_of(L)->trial;
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
  return smr_lua_method(L, "a tensor", lua_upvalueindex(1), 2);
}

static int trial_index(lua_State *L) {
  return smr_lua_method(L, "the trial", lua_upvalueindex(1), 2);
}

static int tensor_tostring(lua_State *L) {
  lua_pushfstring(L, "tensor(%s)", check_tensor(L));
  return 1;
}

static int tensor_steps(lua_State *L) {
  const char *name = check_tensor(L);
  smr_lua_check_opts(L, 2);
  int mode = opt_mode(L, 2);
  bool incomplete = smr_lua_opt_bool(L, 2, "incomplete");
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
  smr_lua_check_opts(L, 3);
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
  smr_lua_check_opts(L, 3);
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
  smr_lua_check_opts(L, 3);
  char wbuf[256];
  const char *worker = opt_worker(L, 3, wbuf, sizeof wbuf);
  int ndim = 0;
  int64_t shape[SMR_MAX_DIMS];
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_data_shape(trial_of(L), name, step, opt_mode(L, 3), worker,
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
  smr_error_clear(&err);
  if (smr_data_shape(trial_of(L), name, step, mode, worker, &ndim, shape,
                     &err) != SMR_OK)
    return;
  double n = element_count(ndim, shape);
  smr_lua_sandbox_charge_work(L,
                              n * 4 / SMR_LUA_READ_BYTES_PER_INSTRUCTION +
                                  n / SMR_LUA_REDUCE_ELEMENTS_PER_INSTRUCTION);
}

static int tensor_reduction_value(lua_State *L) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  int red = smr_lua_check_reduction(L, 3);
  smr_lua_check_opts(L, 4);
  char wbuf[256];
  const char *worker = opt_worker(L, 4, wbuf, sizeof wbuf);
  double v = 0;
  bool saved = false;
  smr_error err;
  smr_error_clear(&err);
  int rc =
      smr_data_reduction(trial_of(L), name, step, opt_mode(L, 4), worker, red,
                         smr_lua_opt_bool(L, 4, "abs"), &v, &saved, &err);
  if (rc)
    return raise_trial_error(L, rc, &err);
  if (!saved)
    charge_computed_reduction(L, name, step, opt_mode(L, 4), worker);
  lua_pushnumber(L, v);
  lua_pushboolean(L, saved);
  return 2;
}

static int tensor_value(lua_State *L) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  smr_lua_check_opts(L, 3);
  char wbuf[256];
  const char *worker = opt_worker(L, 3, wbuf, sizeof wbuf);
  int mode = opt_mode(L, 3);
  lua_getiuservalue(L, 1, 1); /* the value knows its tensor's name */
  smr_tensor *t;
  smr_value_loc *loc;
  smr_lua_value_push(L, lua_gettop(L), &t, &loc);
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_data_value(trial_of(L), name, step, mode, worker, t, loc, &err);
  if (rc)
    return raise_trial_error(L, rc, &err);
  smr_lua_value_ready(L, -1);
  return 1;
}

/* The statistics (or only the counts) of the value at a step, shared
 * with the other rules of the run (host/data.h).  The rule is charged
 * for the value when this call read it. */
static int shared_stats(lua_State *L, smr_stats_what what) {
  const char *name = check_tensor(L);
  lua_Integer step = luaL_checkinteger(L, 2);
  smr_lua_check_opts(L, 3);
  char wbuf[256];
  const char *worker = opt_worker(L, 3, wbuf, sizeof wbuf);
  int mode = opt_mode(L, 3);
  smr_stats s;
  bool read = false;
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_data_stats(trial_of(L), name, step, mode, worker, what, true, &s,
                          &read, &err);
  if (read)
    charge_computed_reduction(L, name, step, mode, worker);
  if (rc)
    return raise_trial_error(L, rc, &err);
  smr_lua_push_stats(L, &s, what == SMR_STATS_FULL);
  return 1;
}

static int tensor_stats(lua_State *L) {
  return shared_stats(L, SMR_STATS_FULL);
}

static int tensor_counts(lua_State *L) {
  return shared_stats(L, SMR_STATS_COUNTS);
}

static const luaL_Reg tensor_methods[] = {
    {"steps", tensor_steps},
    {"value", tensor_value},
    {"stats", tensor_stats},
    {"counts", tensor_counts},
    {"reduction_value", tensor_reduction_value},
    {"has_value", tensor_has_value},
    {"shape", tensor_shape},
    {"workers", tensor_workers},
    {NULL, NULL}};

/* ------------------------------------------------------------ internals */

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
  case SMR_NODE_BOOL:
    lua_pushboolean(L, n->b);
    break;
  case SMR_NODE_INT:
    lua_pushinteger(L, (lua_Integer)n->i);
    break;
  case SMR_NODE_FLOAT:
    lua_pushnumber(L, n->f);
    break;
  case SMR_NODE_STRING:
    lua_pushstring(L, n->s ? n->s : "");
    break;
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
  default:
    lua_pushnil(L);
    break;
  }
}

void smr_lua_push_node(lua_State *L, const smr_node *n) {
  push_node_depth(L, n, 0);
}

/* ----------------------------------------------------------------- open */

static void set_method(lua_State *L, const char *name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  lua_setfield(L, -2, name);
}

static void open_metatables(lua_State *L) {
  smr_lua_new_metatable(L, SCRATCH_MT);
  set_method(L, "__gc", scratch_gc);
  smr_lua_new_metatable(L, ERROR_MT);
  set_method(L, "__index", errobj_index);
  set_method(L, "__tostring", errobj_tostring);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &error_mt_key);
  smr_lua_new_metatable(L, TRIAL_MT);
  smr_lua_set_index(L, trial_index, trial_methods);
  set_method(L, "__tostring", trial_tostring);
  smr_lua_new_metatable(L, TENSOR_MT);
  smr_lua_set_index(L, tensor_index, tensor_methods);
  set_method(L, "__tostring", tensor_tostring);
  smr_lua_new_metatable(L, SKIPPED_MT);
  lua_pushliteral(L, "smrules.SKIPPED");
  lua_setfield(L, -2, "__name");
  lua_pop(L, 5);
  smr_lua_value_open(L);
}

static void open_globals(lua_State *L) {
  lua_newuserdatauv(L, 0, 0);
  luaL_setmetatable(L, TRIAL_MT);
  lua_setglobal(L, "trial");
  smr_lua_report_open(L);
}

/* The table handed to lua/smrules.lua. */
static void push_internals(lua_State *L) {
  lua_newtable(L);
  set_method(L, "log", smr_lua_log);
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
