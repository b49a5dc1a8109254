/* lua_rule.c - custom rules written in Lua 5.4: one sandboxed state per
 * rule instance (lua_sandbox.c), the host bindings (lua_bind.c), the
 * embedded helpers (lua/smrules.lua), and the smr_rule_ops the runner
 * drives.
 *
 * Every call into a state goes through run_protected(): the host itself
 * never touches the state outside lua_pcall except to push light values,
 * so neither a memory error nor script code (metamethods) can hit Lua's
 * panic handler.  Nothing here is global: rules run in parallel. */
#include "lua/lua_rule.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "base/embedded.h"
#include "lua/lua_bind.h"
#include "lua/lua_params.h"
#include "lua/lua_sandbox.h"
#include "lua/lua_state.h"

#define SCRIPT_MAX_BYTES (16u << 20)
#define HELPERS_PATH "lua/smrules.lua"

typedef struct lua_rule {
  smr_lua_sandbox sb; /* the allocator's accounting: lives with the state */
  smr_lua_host host;
  lua_State *L;
  char *saved; /* save_state's text, taken by lua_rule_save */
  bool clock;  /* the script defines invoke_at_time(now) */
} lua_rule;

void smr_lua_limits_default(smr_lua_limits *l) {
  l->instructions = 10 * 1000 * 1000;
  l->memory_bytes = (size_t)64 << 20;
  l->seconds = 60;
}

/* What the loading steps need inside the protected calls. */
typedef struct load_job {
  lua_rule *r;
  const smr_node *params;
  smr_lua_params decls; /* the script's -- @param declarations */
  const char *src;
  size_t len;
  const char *chunkname;
} load_job;

/* ------------------------------------------------ protected functions */

/* Error objects for unavailable data pass through untouched (the host
 * maps them to statuses); anything else becomes "message\ntraceback". */
static int message_handler(lua_State *L) {
  if (smr_lua_error_status(L, 1, NULL) != SMRULES_ERR)
    return 1;
  char limit[128];
  if (smr_lua_sandbox_broken(L, limit, sizeof limit))
    /* raised by the count hook: Lua runs this handler with hooks off, so
     * no script code (__tostring) may run here */
    luaL_traceback(L, L, limit, 1);
  else
    luaL_traceback(L, L, smr_lua_error_text(L, 1), 1);
  return 1;
}

static int setup_state(lua_State *L) {
  load_job *job = lua_touserdata(L, 1);
  lua_pushcfunction(L, smr_lua_sandbox_open);
  lua_call(L, 0, 0);
  lua_pushcfunction(L, smr_lua_bind_open);
  lua_pushlightuserdata(L, &job->r->host);
  lua_call(L, 1, 1); /* the internals, for the helpers */
  size_t len = 0;
  const char *src = smr_embedded(HELPERS_PATH, &len);
  if (!src)
    return luaL_error(L, "%s is not built into this binary", HELPERS_PATH);
  if (smr_lua_sandbox_load(L, src, len, "=smrules.lua") != LUA_OK)
    return lua_error(L);
  lua_insert(L, -2);
  lua_call(L, 1, 0);
  smr_lua_push_node(L, job->params);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
  smr_lua_params_push_defaults(L, &job->decls); /* -- @param defaults */
  lua_setglobal(L, "params");
  return 0;
}

static int run_script(lua_State *L) {
  load_job *job = lua_touserdata(L, 1);
  if (smr_lua_sandbox_load(L, job->src, job->len, job->chunkname) != LUA_OK)
    return lua_error(L);
  lua_call(L, 0, 0);
  if (lua_getglobal(L, "invoke_at_step") != LUA_TFUNCTION)
    return luaL_error(L, "the script defines no function invoke_at_step(step)");
  return 0;
}

/* Call global function `name` with the arguments on the stack above it if
 * the script defines it. */
static bool get_optional_function(lua_State *L, const char *name) {
  int type = lua_getglobal(L, name);
  if (type == LUA_TNIL) {
    lua_pop(L, 1);
    return false;
  }
  if (type != LUA_TFUNCTION)
    luaL_error(L, "'%s' must be a function (it is a %s)", name,
               lua_typename(L, type));
  return true;
}

static int call_init(lua_State *L) {
  if (get_optional_function(L, "init")) {
    lua_getglobal(L, "params");
    lua_call(L, 1, 0);
  }
  return 0;
}

static int call_finish(lua_State *L) {
  if (get_optional_function(L, "finish"))
    lua_call(L, 0, 0);
  return 0;
}

/* save_state() as text, copied out to the rule (arg 1) before the
 * protected call returns. */
static int call_save(lua_State *L) {
  lua_rule *r = lua_touserdata(L, 1);
  lua_pushcfunction(L, smr_lua_state_save);
  lua_call(L, 0, 1);
  size_t n;
  const char *text = lua_tolstring(L, -1, &n);
  if (text)
    r->saved = smr_xstrndup(text, n);
  return 0;
}

/* The value a script function returned (top of the stack) as
 * SMRULES_TRIGGERED / NO_TRIGGER / SKIPPED, pushed as an integer. */
static int push_result_status(lua_State *L, const char *fn) {
  int status;
  if (lua_isnil(L, -1) || (lua_isboolean(L, -1) && !lua_toboolean(L, -1)))
    status = SMRULES_NO_TRIGGER;
  else if (lua_isboolean(L, -1))
    status = SMRULES_TRIGGERED;
  else if (smr_lua_is_skipped(L, -1))
    status = SMRULES_SKIPPED;
  else
    return luaL_error(L,
                      "%s must return true, false or "
                      "smrules.SKIPPED (it returned a %s)",
                      fn, luaL_typename(L, -1));
  lua_pushinteger(L, status);
  return 1;
}

/* invoke_at_step(step) -> SMRULES_TRIGGERED / NO_TRIGGER / SKIPPED. */
static int call_invoke(lua_State *L) {
  lua_Integer step = lua_tointeger(L, 2);
  if (lua_getglobal(L, "invoke_at_step") != LUA_TFUNCTION)
    return luaL_error(L, "invoke_at_step is not a function any more");
  lua_pushinteger(L, step);
  lua_call(L, 1, 1);
  return push_result_status(L, "invoke_at_step");
}

/* invoke_at_time(now) for a script that defines it; arg 1 points to the
 * time (seconds since the epoch). */
static int call_at_time(lua_State *L) {
  const double *now = lua_touserdata(L, 1);
  if (lua_getglobal(L, "invoke_at_time") != LUA_TFUNCTION)
    return luaL_error(L, "invoke_at_time is not a function any more");
  lua_pushnumber(L, *now);
  lua_call(L, 1, 1);
  return push_result_status(L, "invoke_at_time");
}

/* Whether the script defines the global function `name` (raw access: no
 * script code runs). */
static bool defines_function(lua_State *L, const char *name) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushstring(L, name);
  bool is_fn = lua_rawget(L, -2) == LUA_TFUNCTION;
  lua_pop(L, 2);
  return is_fn;
}

/* ----------------------------------------------------------- the host */

typedef struct outcome {
  int code;   /* 0, or SMRULES_ERR / a negative availability status */
  int result; /* the integer the protected function returned */
  char *msg;  /* malloc'ed, when code != 0 */
} outcome;

/* The traceback part of an error message, "" when there is none. */
static const char *traceback_of(const char *msg) {
  const char *tb = msg ? strstr(msg, "\nstack traceback:") : NULL;
  return tb ? tb : "";
}

static void run_protected(lua_rule *r, lua_CFunction fn, void *arg,
                          lua_Integer n, outcome *o) {
  lua_State *L = r->L;
  int base = lua_gettop(L);
  lua_pushcfunction(L, message_handler);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, arg);
  lua_pushinteger(L, n);
  smr_lua_sandbox_begin_call(L);
  int st = lua_pcall(L, 2, 1, base + 1);
  char limit[128];
  bool broken = smr_lua_sandbox_broken(L, limit, sizeof limit);
  memset(o, 0, sizeof *o);
  const char *msg = NULL;
  if (st != LUA_OK)
    o->code = smr_lua_error_status(L, -1, &msg);
  if (broken) { /* whatever the script made of the error */
    o->code = SMRULES_ERR;
    o->msg = smr_xasprintf("%s%s", limit, traceback_of(msg));
  } else if (st != LUA_OK) {
    o->msg = smr_xstrdup(msg ? msg : "(error object is not a string)");
  } else {
    o->result = (int)lua_tointeger(L, -1);
  }
  lua_settop(L, base);
  if (broken) /* give the heap back before anything else runs */
    lua_gc(L, LUA_GCCOLLECT);
}

static void set_ctx(lua_rule *r, smrules_ctx *ctx) {
  r->host.ctx = ctx;
  r->host.trial = ctx ? smr_ctx_trial(ctx) : NULL;
}

static void lua_rule_destroy(void *impl) {
  lua_rule *r = impl;
  if (!r)
    return;
  if (r->L)
    lua_close(r->L);
  free(r->saved);
  free(r);
}

/* A message about the script as `smrules validate` gives it: the error is
 * already named by the script's path, so Lua's "PATH:N: " prefix becomes
 * "line N: ", and a traceback of C frames alone (a syntax error, raised
 * while loading) says nothing and goes.  In place: the result is never
 * longer. */
static void tidy_load_error(char *msg, const char *path) {
  char *tb = strstr(msg, "\nstack traceback:");
  if (tb) {
    bool script_frame = false;
    for (const char *l = strchr(tb + 1, '\n'); l && !script_frame;
         l = strchr(l + 1, '\n'))
      script_frame = strncmp(l + 1, "\t[C]:", 5) != 0 && l[1] != '\0';
    if (!script_frame)
      *tb = '\0';
  }
  size_t n = strlen(path);
  if (strncmp(msg, path, n) == 0 && msg[n] == ':' &&
      isdigit((unsigned char)msg[n + 1])) {
    char *num = msg + n + 1, *end = num;
    while (isdigit((unsigned char)*end))
      end++;
    if (*end == ':' && (size_t)(end - num) < n + 1) {
      char line[32];
      snprintf(line, sizeof line, "line %.*s", (int)(end - num), num);
      size_t ll = strlen(line);
      memmove(msg + ll, end, strlen(end) + 1);
      memcpy(msg, line, ll);
    }
  }
}

int smr_lua_rule_load(const char *script_path, const smr_node *params,
                      const smr_lua_limits *limits, smrules_ctx *ctx,
                      void **impl, smr_error *err) {
  *impl = NULL;
  smr_lua_limits dflt;
  if (!limits) {
    smr_lua_limits_default(&dflt);
    limits = &dflt;
  }
  load_job job = {.params = params};
  char *src = NULL;
  int rc = smr_read_file(script_path, SCRIPT_MAX_BYTES, &src, &job.len, err);
  if (rc)
    return rc;
  /* checked already (smr_lua_params_apply); a bad line here only loses
   * the defaults */
  smr_error ignored;
  smr_lua_params_parse(src, job.len, script_path, &job.decls, &ignored);
  lua_rule *r = smr_xcalloc(1, sizeof *r);
  r->host.api = smr_host_api();
  set_ctx(r, ctx);
  r->L = smr_lua_sandbox_new(&r->sb, limits);
  job.r = r;
  job.src = src;
  char *chunkname = smr_xasprintf("@%s", script_path);
  job.chunkname = chunkname;
  outcome o = {.code = SMRULES_ERR};
  if (!r->L) {
    o.msg = smr_xasprintf("the memory limit (%zu bytes) is too small for a "
                          "Lua state",
                          limits->memory_bytes);
  } else {
    run_protected(r, setup_state, &job, 0, &o);
    if (o.code == 0)
      run_protected(r, run_script, &job, 0, &o);
    if (o.code == 0)
      run_protected(r, call_init, &job, 0, &o);
  }
  free(chunkname);
  free(src);
  smr_lua_params_free(&job.decls);
  if (o.code != 0) {
    bool data = o.code != SMRULES_ERR; /* unavailable data in init() */
    tidy_load_error(o.msg, script_path);
    smr_error_set(err, SMR_ERR_USAGE, script_path, -1, "%s%s%s",
                  data ? smr_status_name(o.code) : "", data ? ": " : "", o.msg);
    free(o.msg);
    lua_rule_destroy(r);
    return SMR_ERR_USAGE;
  }
  r->clock = defines_function(r->L, "invoke_at_time");
  *impl = r;
  return SMR_OK;
}

int smr_lua_rule_check(const char *script_path, smr_error *err) {
  char *src = NULL;
  size_t len = 0;
  int rc = smr_read_file(script_path, SCRIPT_MAX_BYTES, &src, &len, err);
  if (rc)
    return rc;
  smr_lua_limits limits;
  smr_lua_limits_default(&limits);
  smr_lua_sandbox sb;
  lua_State *L = smr_lua_sandbox_new(&sb, &limits);
  char *chunkname = smr_xasprintf("@%s", script_path);
  rc = SMR_OK;
  if (!L)
    rc = smr_error_set(err, SMR_ERR_USAGE, script_path, -1,
                       "cannot create a Lua state");
  else if (smr_lua_sandbox_load(L, src, len, chunkname) != LUA_OK)
    rc = smr_error_set(err, SMR_ERR_USAGE, script_path, -1, "%s",
                       lua_isstring(L, -1) ? lua_tostring(L, -1)
                                           : "the script does not compile");
  if (L)
    lua_close(L);
  free(chunkname);
  free(src);
  return rc;
}

static int lua_rule_invoke(void *impl, smrules_ctx *ctx, int64_t step) {
  lua_rule *r = impl;
  set_ctx(r, ctx);
  /* the host drops the last step's violations now: so does the charge */
  smr_lua_sandbox_uncharge(r->L, r->host.step_bytes);
  r->host.step_bytes = 0;
  outcome o;
  run_protected(r, call_invoke, NULL, (lua_Integer)step, &o);
  if (o.code == 0)
    return o.result;
  if (o.code == SMRULES_ERR) /* the step, then script:line: message */
    r->host.api->fail(ctx, "step %lld: %s", (long long)step, o.msg);
  else /* unavailable data: the runner skips, waits or stops */
    r->host.api->log(ctx, 0, "step %lld: %s", (long long)step, o.msg);
  free(o.msg);
  return o.code;
}

static int lua_rule_finish(void *impl, smrules_ctx *ctx) {
  lua_rule *r = impl;
  set_ctx(r, ctx);
  outcome o;
  run_protected(r, call_finish, NULL, 0, &o);
  if (o.code == 0)
    return 0;
  r->host.api->fail(ctx, "%s", o.msg);
  free(o.msg);
  return SMRULES_ERR;
}

/* A state that cannot be kept is a warning, not an error: the next run
 * evaluates the rule from the first step again. */
static char *lua_rule_save(void *impl, smrules_ctx *ctx) {
  lua_rule *r = impl;
  set_ctx(r, ctx);
  outcome o;
  run_protected(r, call_save, r, 0, &o);
  if (o.code != 0) {
    r->host.api->log(ctx, 2 /* warning */,
                     "state not kept (the next run starts over): %s", o.msg);
    free(o.msg);
  }
  char *text = r->saved;
  r->saved = NULL;
  return text;
}

static int lua_rule_load(void *impl, smrules_ctx *ctx, const char *text) {
  lua_rule *r = impl;
  set_ctx(r, ctx);
  outcome o;
  run_protected(r, smr_lua_state_load, (void *)text, 0, &o);
  if (o.code == 0)
    return 0;
  r->host.api->log(ctx, 2 /* warning */,
                   "stored state not restored (starting over): %s", o.msg);
  free(o.msg);
  return -1;
}

static bool lua_rule_wants_time(const void *impl) {
  const lua_rule *r = impl;
  return r->clock;
}

/* Data not there yet is no error for a rule driven by the clock: it has
 * nothing to say this time. */
static int lua_rule_at_time(void *impl, smrules_ctx *ctx, double now) {
  lua_rule *r = impl;
  set_ctx(r, ctx);
  outcome o;
  run_protected(r, call_at_time, &now, 0, &o);
  if (o.code == 0)
    return o.result == SMRULES_SKIPPED ? SMRULES_NO_TRIGGER : o.result;
  if (o.code == SMRULES_ERR) {
    r->host.api->fail(ctx, "invoke_at_time: %s", o.msg);
    free(o.msg);
    return SMRULES_ERR;
  }
  free(o.msg);
  return SMRULES_NO_TRIGGER;
}

const smr_rule_ops smr_lua_rule_ops = {
    .kind = "lua",
    .wants_time = lua_rule_wants_time,
    .invoke_at_time = lua_rule_at_time,
    .invoke_at_step = lua_rule_invoke,
    .finish = lua_rule_finish,
    .destroy = lua_rule_destroy,
    .save_state = lua_rule_save,
    .load_state = lua_rule_load,
};
