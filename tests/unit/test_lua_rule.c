/* test_lua_rule.c - Lua rules against real fixture trials: the example
 * rules fire exactly where an independent C evaluation says; the trial,
 * tensor and value bindings; unavailable data maps to the runner's
 * statuses; the sandbox holds (no files, no bytecode, memory cap,
 * instruction budget even under pcall) and leaves other states working. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "format/index.h"
#include "host/rulehost.h"
#include "lua/lua_rule.h"
#include "trial/trial.h"
#include "unit.h"

#define TRIALS "tests/fixtures/trials/"
#define EXPLODING TRIALS "exploding_mse_high_lr"
#define HEALTHY TRIALS "healthy_mlp_digits"
#define STALLED TRIALS "stalled_lr_zero"
#define CRC_CASE "tests/fixtures/corrupt/data_crc_mismatch"

static char tmp_dir[64];

/* ------------------------------------------------------------ helpers */

static smr_trial *open_trial(const char *dir) {
  smr_trial *t = NULL;
  smr_error err;
  int rc = smr_trial_open(dir, &(smr_trial_opts){.fresh = true}, &t, &err);
  if (rc)
    fprintf(stderr, "cannot open %s: %s\n", dir, err.msg);
  CHECK_EQ_INT(rc, SMR_OK);
  return t;
}

/* Write `text` to <tmp>/<name> and return the path (static buffer). */
static const char *script_file(const char *name, const char *text, size_t len) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) {
    fwrite(text, 1, len, f);
    fclose(f);
  }
  return path;
}

/* One rule instance: its context and Lua state. */
typedef struct rule {
  smrules_ctx *ctx;
  void *impl;
  smr_error err;
  int rc;
} rule;

static void rule_load_path(rule *r, smr_trial *t, const char *path,
                           const smr_node *params,
                           const smr_lua_limits *limits) {
  memset(r, 0, sizeof *r);
  r->ctx = smr_ctx_new(t, "test", "lua:test", NULL);
  smr_error_clear(&r->err);
  r->rc = smr_lua_rule_load(path, params, limits, r->ctx, &r->impl, &r->err);
}

static void rule_load(rule *r, smr_trial *t, const char *text,
                      const smr_node *params, const smr_lua_limits *limits) {
  rule_load_path(r, t, script_file("rule.lua", text, strlen(text)), params,
                 limits);
  if (r->rc)
    fprintf(stderr, "load failed: %s\n", r->err.msg);
}

static int rule_invoke(rule *r, int64_t step) {
  smr_ctx_step_begin(r->ctx, step);
  int rc = smr_lua_rule_ops.invoke_at_step(r->impl, r->ctx, step);
  smr_ctx_step_end(r->ctx, step, rc == SMRULES_TRIGGERED);
  return rc;
}

static void rule_free(rule *r) {
  if (r->impl)
    smr_lua_rule_ops.destroy(r->impl);
  smr_ctx_free(r->ctx);
  memset(r, 0, sizeof *r);
}

static bool contains(const char *s, const char *part) {
  return s && strstr(s, part) != NULL;
}

/* Run `body` as invoke_at_step at `step`; expect status `want`. */
static void expect_invoke(smr_trial *t, const char *body, int64_t step,
                          int want) {
  char *src = smr_xasprintf("function invoke_at_step(step)\n%s\nend\n", body);
  rule r;
  rule_load(&r, t, src, NULL, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  if (r.rc == SMR_OK) {
    int rc = rule_invoke(&r, step);
    if (rc != want)
      fprintf(stderr, "script:\n%s\nfailure: %s\n", src,
              smr_ctx_failure(r.ctx) ? smr_ctx_failure(r.ctx) : "-");
    CHECK_EQ_INT(rc, want);
  }
  rule_free(&r);
  free(src);
}

/* Expect the script to load and its invoke_at_step(step) to fail with a
 * message containing `part`. */
static void expect_step_error(smr_trial *t, const char *src,
                              const smr_lua_limits *limits, int64_t step,
                              const char *part) {
  rule r;
  rule_load(&r, t, src, NULL, limits);
  CHECK_EQ_INT(r.rc, SMR_OK);
  if (r.rc == SMR_OK) {
    CHECK_EQ_INT(rule_invoke(&r, step), SMRULES_ERR);
    const char *why = smr_ctx_failure(r.ctx);
    if (!contains(why, part))
      fprintf(stderr, "expected '%s' in failure: %s\n", part,
              why ? why : "(none)");
    CHECK(contains(why, part));
  }
  rule_free(&r);
}

static void expect_invoke_error(smr_trial *t, const char *src,
                                const smr_lua_limits *limits,
                                const char *part) {
  expect_step_error(t, src, limits, 0, part);
}

static void expect_load_error(smr_trial *t, const char *src, size_t len,
                              const char *part) {
  rule r;
  rule_load_path(&r, t, script_file("bad.lua", src, len), NULL, NULL);
  CHECK_EQ_INT(r.rc, SMR_ERR_USAGE);
  CHECK(r.impl == NULL);
  CHECK(contains(r.err.file, "bad.lua"));
  if (!contains(r.err.msg, part))
    fprintf(stderr, "expected '%s' in load error: %s\n", part, r.err.msg);
  CHECK(contains(r.err.msg, part));
  rule_free(&r);
}

static smr_node *node_new(smr_node_type type) {
  smr_node *n = smr_xcalloc(1, sizeof *n);
  n->type = type;
  return n;
}

static void map_put(smr_node *map, const char *key, smr_node *v) {
  map->items = smr_xrealloc(map->items, (map->n + 1) * sizeof *map->items);
  map->keys = smr_xrealloc(map->keys, (map->n + 1) * sizeof *map->keys);
  map->items[map->n] = v;
  map->keys[map->n++] = smr_xstrdup(key);
}

static smr_node *num_node(double f) {
  smr_node *n = node_new(SMR_NODE_FLOAT);
  n->f = f;
  n->s = smr_xasprintf("%.17g", f);
  return n;
}

static smr_node *threshold_params(double threshold) {
  smr_node *p = node_new(SMR_NODE_MAP);
  map_put(p, "threshold", num_node(threshold));
  return p;
}

static void free_node(smr_node *n) {
  if (!n)
    return;
  for (size_t i = 0; i < n->n; i++) {
    free_node(n->items[i]);
    if (n->keys)
      free(n->keys[i]);
  }
  free(n->items);
  free(n->keys);
  free(n->s);
  free(n);
}

/* ------------------------------------------- the example custom rules */

/* What rules/gradient_mean_abs.lua must answer at global step g,
 * computed with the core directly. */
static int expected_gradient_status(smr_trial *t, int64_t g, double thr) {
  smr_strv names = {0};
  smr_error err;
  CHECK_EQ_INT(smr_trial_collection_members(t, "gradients", NULL, &names, &err),
               SMR_OK);
  int evaluated = 0;
  bool fired = false;
  for (size_t i = 0; i < names.n; i++) {
    double v;
    bool saved;
    int rc = smr_trial_reduction(t, names.v[i], g, SMR_MODE_GLOBAL, NULL,
                                 SMR_RED_MEAN, true, &v, &saved, NULL, &err);
    if (rc == SMR_TENSOR_UNAVAILABLE_FOR_STEP)
      continue;
    CHECK_EQ_INT(rc, SMR_OK);
    evaluated++;
    fired = fired || v > thr;
  }
  smr_strv_free(&names);
  return !evaluated ? SMRULES_SKIPPED
         : fired    ? SMRULES_TRIGGERED
                    : SMRULES_NO_TRIGGER;
}

/* Runs the rule over every step; returns how many steps fired. */
static int check_gradient_rule(const char *dir, double thr, int *nskipped) {
  smr_trial *t = open_trial(dir);
  if (!t)
    return -1;
  smr_node *params = threshold_params(thr);
  rule r;
  rule_load_path(&r, t, "rules/gradient_mean_abs.lua", params, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  int fired = 0;
  *nskipped = 0;
  for (size_t i = 0; r.rc == SMR_OK && i < steps.n; i++) {
    int want = expected_gradient_status(t, steps.v[i], thr);
    int got = rule_invoke(&r, steps.v[i]);
    if (got != want)
      fprintf(stderr, "%s step %lld: got %d, expected %d (%s)\n", dir,
              (long long)steps.v[i], got, want,
              smr_ctx_failure(r.ctx) ? smr_ctx_failure(r.ctx) : "");
    CHECK_EQ_INT(got, want);
    fired += got == SMRULES_TRIGGERED;
    *nskipped += got == SMRULES_SKIPPED;
  }
  smr_i64v_free(&steps);
  rule_free(&r);
  free_node(params);
  smr_trial_close(t);
  return fired;
}

static void test_gradient_rule_exploding(void) {
  int skipped;
  /* mean |g| passes 1.0 at steps 6 and 8 only (later steps are NaN) */
  CHECK_EQ_INT(check_gradient_rule(EXPLODING, 1.0, &skipped), 2);
  CHECK_EQ_INT(skipped, 2); /* the two EVAL steps save no gradients */
  CHECK_EQ_INT(check_gradient_rule(EXPLODING, 1e-4, &skipped), 5);
}

static void test_gradient_rule_healthy(void) {
  int skipped;
  CHECK_EQ_INT(check_gradient_rule(HEALTHY, 1.0, &skipped), 0);
  CHECK_EQ_INT(skipped, 4);
  int fired = check_gradient_rule(HEALTHY, 0.03, &skipped);
  CHECK(fired > 0 && fired < 12);
}

static void test_gradient_rule_report(void) {
  smr_trial *t = open_trial(EXPLODING);
  smr_node *params = threshold_params(1.0);
  rule r;
  rule_load_path(&r, t, "rules/gradient_mean_abs.lua", params, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  CHECK_EQ_INT(rule_invoke(&r, 6), SMRULES_TRIGGERED);
  cJSON *j = cJSON_Parse(smr_ctx_last_violations(r.ctx));
  CHECK(j != NULL);
  cJSON *v = cJSON_GetObjectItem(j, "violations");
  CHECK_EQ_INT(cJSON_GetArraySize(v), 6); /* every gradient is above 1 */
  cJSON *first = cJSON_GetArrayItem(v, 0);
  CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(first, "tensor")),
            "gradient/Sequential_0.bias");
  double want,
      got = cJSON_GetNumberValue(cJSON_GetObjectItem(first, "abs_mean"));
  bool saved;
  smr_error err;
  CHECK_EQ_INT(smr_trial_reduction(t, "gradient/Sequential_0.bias", 6,
                                   SMR_MODE_GLOBAL, NULL, SMR_RED_MEAN, true,
                                   &want, &saved, NULL, &err),
               SMR_OK);
  CHECK_NEAR(got, want, 1e-15);
  cJSON_Delete(j);
  CHECK_EQ_INT(smr_ctx_datapoints(r.ctx), 6);
  rule_free(&r);
  free_node(params);
  smr_trial_close(t);
}

/* rules/loss_nan.lua fires where a loss holds NaN or inf. */
static void test_loss_nan_rule(void) {
  smr_trial *t = open_trial(EXPLODING);
  rule r;
  rule_load_path(&r, t, "rules/loss_nan.lua", NULL, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  int fired = 0;
  for (size_t i = 0; r.rc == SMR_OK && i < steps.n; i++) {
    smr_tensor v;
    smr_error err;
    smr_stats s;
    CHECK_EQ_INT(smr_trial_value(t, "MSELoss_output_0", steps.v[i],
                                 SMR_MODE_GLOBAL, NULL, &v, NULL, &err),
                 SMR_OK);
    CHECK_EQ_INT(smr_tensor_stats(&v, &s, &err), SMR_OK);
    smr_tensor_release(&v);
    int want = s.nan + s.pinf + s.ninf ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
    CHECK_EQ_INT(rule_invoke(&r, steps.v[i]), want);
    fired += want == SMRULES_TRIGGERED;
  }
  CHECK(fired > 0 && (size_t)fired < steps.n);
  smr_i64v_free(&steps);
  rule_free(&r);
  smr_trial_close(t);
}

/* rules/loss_plateau.lua keeps state across steps and writes Details
 * (the stalled trial has only TRAIN steps and a constant loss). */
static void test_loss_plateau_rule(void) {
  smr_trial *t = open_trial(STALLED);
  smr_node *params = node_new(SMR_NODE_MAP);
  smr_node *pat = node_new(SMR_NODE_INT);
  pat->i = 1;
  map_put(params, "patience", pat);
  rule r;
  rule_load_path(&r, t, "rules/loss_plateau.lua", params, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  /* independent: TRAIN losses, fire when not below the best so far */
  double best = INFINITY;
  smr_i64v want = {0};
  int nskipped = 0;
  for (size_t i = 0; r.rc == SMR_OK && i < steps.n; i++) {
    int mode;
    int64_t ms;
    smr_trial_step_mode(t, steps.v[i], &mode, &ms);
    int got = rule_invoke(&r, steps.v[i]);
    if (mode != SMR_MODE_TRAIN) {
      CHECK_EQ_INT(got, SMRULES_SKIPPED);
      nskipped++;
      continue;
    }
    double loss = NAN;
    smr_tensor v;
    smr_error err;
    CHECK_EQ_INT(smr_trial_value(t, "CrossEntropyLoss_output_0", steps.v[i],
                                 SMR_MODE_GLOBAL, NULL, &v, NULL, &err),
                 SMR_OK);
    CHECK_EQ_INT(smr_tensor_reduce(&v, SMR_RED_MEAN, false, &loss, &err),
                 SMR_OK);
    smr_tensor_release(&v);
    bool fires = !(loss < best);
    if (!fires)
      best = loss;
    else
      smr_i64v_push(&want, steps.v[i]);
    CHECK_EQ_INT(got, fires ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER);
  }
  CHECK_EQ_INT(nskipped, 0);
  CHECK_EQ_INT(want.n, steps.n - 1); /* learning rate 0: never improves */
  CHECK_EQ_INT(smr_lua_rule_ops.finish(r.impl, r.ctx), 0);
  smr_i64v none = {0};
  char *report = smr_ctx_report_json(r.ctx, &none, 0);
  CHECK(contains(report, "\"best_loss\":"));
  CHECK(contains(report, "\"plateau_steps\":"));
  free(report);
  smr_i64v_free(&want);
  smr_i64v_free(&steps);
  rule_free(&r);
  free_node(params);
  smr_trial_close(t);
}

/* --------------------------------------------------------- the bindings */

static void test_params_to_lua(void) {
  smr_trial *t = open_trial(EXPLODING);
  smr_node *p = node_new(SMR_NODE_MAP);
  smr_node *i = node_new(SMR_NODE_INT), *b = node_new(SMR_NODE_BOOL);
  smr_node *s = node_new(SMR_NODE_STRING), *list = node_new(SMR_NODE_LIST);
  smr_node *inner = node_new(SMR_NODE_MAP);
  i->i = 42;
  b->b = true;
  s->s = smr_xstrdup("TRAIN");
  list->items = smr_xcalloc(2, sizeof *list->items);
  list->items[0] = num_node(0.5);
  list->items[1] = node_new(SMR_NODE_STRING);
  list->items[1]->s = smr_xstrdup("x");
  list->n = 2;
  map_put(inner, "deep", num_node(-1.25));
  map_put(p, "i", i);
  map_put(p, "f", num_node(2.5));
  map_put(p, "b", b);
  map_put(p, "s", s);
  map_put(p, "none", node_new(SMR_NODE_NULL));
  map_put(p, "list", list);
  map_put(p, "map", inner);
  const char *src =
      "local seen\n"
      "function init(p)\n"
      "  assert(p == params)\n"
      "  assert(math.type(p.i) == 'integer' and p.i == 42)\n"
      "  assert(math.type(p.f) == 'float' and p.f == 2.5)\n"
      "  assert(p.b == true and p.s == 'TRAIN' and p.none == nil)\n"
      "  assert(#p.list == 2 and p.list[1] == 0.5 and p.list[2] == 'x')\n"
      "  assert(p.map.deep == -1.25)\n"
      "  seen = true\n"
      "end\n"
      "function invoke_at_step(step) return seen end\n";
  rule r;
  rule_load(&r, t, src, p, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  if (r.rc == SMR_OK)
    CHECK_EQ_INT(rule_invoke(&r, 0), SMRULES_TRIGGERED);
  rule_free(&r);
  /* no params: an empty table, init still called */
  rule_load(&r, t,
            "function init(p) assert(next(p) == nil) end\n"
            "function invoke_at_step() return next(params) == nil end\n",
            NULL, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  if (r.rc == SMR_OK)
    CHECK_EQ_INT(rule_invoke(&r, 0), SMRULES_TRIGGERED);
  rule_free(&r);
  free_node(p);
  smr_trial_close(t);
}

static void test_trial_api(void) {
  smr_trial *t = open_trial(HEALTHY);
  /* steps, modes, names, selection, workers, availability */
  expect_invoke(t,
                "local g = trial:steps()\n"
                "assert(#g == 16 and g[1] == 0 and g[16] == 101)\n"
                "local tr = trial:steps{mode = 'TRAIN'}\n"
                "local ev = trial:steps{mode = 'EVAL'}\n"
                "assert(#tr == 12 and #ev == 4 and tr[1] == 0)\n"
                "local m, ms = trial:mode(23)\n"
                "assert(m == 'EVAL' and ms == ev[1])\n"
                "assert(trial:mode(1) == nil)\n"
                "assert(trial:global_step('EVAL', ms) == 23)\n"
                "local ws = trial:workers()\n"
                "assert(#ws == 1 and type(ws[1]) == 'string')\n"
                "local grads = trial:tensor_names{collection = 'gradients'}\n"
                "assert(#grads == 6)\n"
                "local r = trial:tensor_names{regex = '^gradient/'}\n"
                "assert(#r == 6 and r[1] == grads[1])\n"
                "local u = trial:tensor_names{collection = {'losses'},\n"
                "                             regex = {'layer1.fc.bias$'}}\n"
                "assert(#u == 3, #u)\n"
                "assert(#trial:tensor_names{collection = 'nope'} == 0)\n"
                "assert(#trial:tensor_names() > 6)\n"
                "local cs = trial:collections()\n"
                "assert(#cs > 0)\n"
                "assert(trial:has_tensor(grads[1]))\n"
                "assert(not trial:has_tensor('nope'))\n"
                "assert(trial:has_passed_step(0) == 'AVAILABLE')\n"
                "assert(trial:has_passed_step(1) == 'UNAVAILABLE')\n"
                "assert(trial:has_passed_step(10^6) == 'UNAVAILABLE')\n"
                "assert(trial:has_passed_step(0, 'EVAL') == 'AVAILABLE')\n"
                "return true",
                0, SMRULES_TRIGGERED);
  /* tensors */
  expect_invoke(t,
                "local tn = trial:tensor('gradient/DigitsMLP_out.bias')\n"
                "assert(tn.name == 'gradient/DigitsMLP_out.bias')\n"
                "assert(tostring(tn):find('DigitsMLP_out.bias', 1, true))\n"
                "local s = tn:steps()\n"
                "assert(#s == 12 and s[1] == 0)\n"
                "assert(#tn:steps{mode = 'EVAL'} == 0)\n"
                "assert(#tn:steps{mode = 'TRAIN'} == 12)\n"
                "assert(tn:has_value(0) and not tn:has_value(23))\n"
                "assert(#tn:shape(0) == 1 and tn:shape(0)[1] == 10)\n"
                "assert(#tn:workers(0) == 1 and #tn:workers(23) == 0)\n"
                "local r, saved = tn:reduction_value(0, 'mean', {abs = true})\n"
                "local v = tn:value(0)\n"
                "assert(r == v:reduce('mean', {abs = true}))\n"
                "assert(saved == false)\n"
                "assert(tn:reduction_value(0, 'l2') == v:l2())\n"
                "return true",
                0, SMRULES_TRIGGERED);
  smr_trial_close(t);
}

/* Values of the small exact trial of tests/fixtures/corrupt (step 0 is
 * intact): weights [[-2.5,-1.5,-0.5],[0.5,1.5,2.5]], labels int64. */
static void test_value_api(void) {
  smr_trial *t = open_trial(CRC_CASE);
  expect_invoke(
      t,
      "local v = trial:tensor('weights'):value(0)\n"
      "assert(#v == 6 and v:size() == 6)\n"
      "local sh = v:shape()\n"
      "assert(#sh == 2 and sh[1] == 2 and sh[2] == 3)\n"
      "assert(v.dtype == 'float32' and v.name == 'weights')\n"
      "assert(v.step == 0 and v.mode == 'TRAIN' and v.mode_step == 0)\n"
      "assert(v.worker == 'worker_0')\n"
      "assert(v[1] == -2.5 and v[6] == 2.5 and v[4] == 0.5)\n"
      "assert(not pcall(function() return v[0] end))\n"
      "local ok, e = pcall(function() return v[7] end)\n"
      "assert(not ok and e:find('out of range 1..6', 1, true))\n"
      "assert(not pcall(function() return v[1.5] end))\n"
      "assert(not pcall(function() v.x = 1 end))\n"
      "assert(v:min() == -2.5 and v:max() == 2.5)\n"
      "assert(v:sum() == 0 and v:mean() == 0)\n"
      "assert(v:l1() == 9 and v:linf() == 2.5)\n"
      "assert(math.abs(v:l2() - math.sqrt(17.5)) < 1e-12)\n"
      "assert(math.abs(v:variance() - 17.5 / 6) < 1e-12)\n"
      "assert(math.abs(v:std() - math.sqrt(17.5 / 6)) < 1e-12)\n"
      "assert(v:reduce('mean', {abs = true}) == 1.5)\n"
      "assert(v:reduce('max', {abs = true}) == 2.5)\n"
      "assert(not pcall(v.reduce, v, 'median'))\n"
      "local st = v:stats()\n"
      "assert(st.count == 6 and st.finite == 6 and st.nan == 0)\n"
      "assert(st.inf == 0 and st.min == -2.5 and st.mean == 0)\n"
      "assert(v:count_nan() == 0 and v:count_inf() == 0)\n"
      "local tt = v:totable()\n"
      "assert(#tt == 6 and tt[2] == -1.5)\n"
      "assert(tostring(v) == 'tensor value float32[2x3]')\n"
      "assert(getmetatable(v) == 'locked')\n"
      "local l = trial:tensor('labels'):value(0)\n"
      "assert(l.dtype == 'int64' and l[4] == 3 and #l == 4)\n"
      "local loss = trial:tensor('loss'):value(0)\n"
      "assert(#loss == 1 and #loss:shape() == 0 and loss[1] == 1)\n"
      "v:release()\n"
      "assert(not pcall(function() return #v end))\n"
      "return true",
      0, SMRULES_TRIGGERED);
  smr_trial_close(t);
}

static void test_value_nan_and_big(void) {
  smr_trial *t = open_trial(EXPLODING);
  /* step 10: 64 of the elements are NaN; stats are over the finite ones,
   * reductions propagate NaN */
  expect_invoke(
      t,
      "local v = trial:tensor('gradient/Sequential_0.weight')"
      ":value(10)\n"
      "local st = v:stats()\n"
      "assert(st.nan == 64 and st.finite == #v - 64 and st.inf == 0)\n"
      "assert(st.has_finite and smrules.isfinite(st.max))\n"
      "assert(v:count_nan() == 64 and v:count_inf() == 0)\n"
      "assert(smrules.isnan(v:mean()) and smrules.isnan(v:sum()))\n"
      "return true",
      10, SMRULES_TRIGGERED);
  smr_trial_close(t);
}

static void test_report_and_log(void) {
  smr_trial *t = open_trial(EXPLODING);
  rule r;
  rule_load(&r, t,
            "function invoke_at_step(step)\n"
            "  log('a', 1, nil, true); log.debug('d'); print('p')\n"
            "  report.violation{tensor = 'x', n = 3, f = 0.5, ok = true,\n"
            "                   ints = {1, 2}, nums = {0.5, 1}, strs = {'a'},\n"
            "                   empty = {}}\n"
            "  report.violation{inner = {k = 'v', deeper = {n = 1}}}\n"
            "  assert(not pcall(report.violation, {f = print}))\n"
            "  assert(not pcall(report.violation, {[1] = 1, x = 2}))\n"
            "  assert(not pcall(report.violation, {l = {1, 'a'}}))\n"
            "  return true\n"
            "end\n",
            NULL, NULL);
  CHECK_EQ_INT(r.rc, SMR_OK);
  CHECK_EQ_INT(rule_invoke(&r, 0), SMRULES_TRIGGERED);
  /* keys sorted; bad tables added nothing */
  cJSON *j = cJSON_Parse(smr_ctx_last_violations(r.ctx));
  cJSON *v = cJSON_GetObjectItem(j, "violations");
  CHECK_EQ_INT(cJSON_GetArraySize(v), 2);
  char *flat = cJSON_PrintUnformatted(cJSON_GetArrayItem(v, 0));
  CHECK_STR(flat, "{\"empty\":[],\"f\":0.5,\"ints\":[1,2],\"n\":3,"
                  "\"nums\":[0.5,1],\"ok\":true,\"strs\":[\"a\"],"
                  "\"tensor\":\"x\"}");
  cJSON *inner = cJSON_GetObjectItem(cJSON_GetArrayItem(v, 1), "inner");
  CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(inner, "k")), "v");
  CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(
                   cJSON_GetObjectItem(inner, "deeper"), "n")),
               1);
  free(flat);
  cJSON_Delete(j);
  rule_free(&r);
  smr_trial_close(t);
}

/* ------------------------------------------------- unavailable data */

static void test_unavailable_statuses(void) {
  smr_trial *t = open_trial(EXPLODING);
  const char *grad = "local g = trial:tensor('gradient/Sequential_0.bias')\n";
  char body[512];
  /* EVAL step: the step exists, the gradient was not saved there */
  snprintf(body, sizeof body, "%sreturn g:value(22) ~= nil", grad);
  expect_invoke(t, body, 22, SMRULES_TENSOR_UNAVAILABLE_FOR_STEP);
  snprintf(body, sizeof body, "%sreturn g:reduction_value(22, 'max') > 0",
           grad);
  expect_invoke(t, body, 22, SMRULES_TENSOR_UNAVAILABLE_FOR_STEP);
  /* step 1 was never saved, step 2 was */
  snprintf(body, sizeof body, "%sreturn g:value(1) ~= nil", grad);
  expect_invoke(t, body, 1, SMRULES_STEP_UNAVAILABLE);
  expect_invoke(t, "return trial:tensor('nope') ~= nil", 0,
                SMRULES_TENSOR_UNAVAILABLE);
  /* caught, inspected and re-raised: still the status */
  snprintf(body, sizeof body,
           "%slocal ok, e = pcall(g.value, g, 22)\n"
           "assert(not ok and e.kind == 'TensorUnavailableForStep')\n"
           "assert(e.smrules_unavailable == -12)\n"
           "assert(tostring(e):find('TensorUnavailableForStep: ', 1, true))\n"
           "assert(smrules.is_unavailable(e) == e.kind)\n"
           "assert(smrules.is_unavailable('x') == nil)\n"
           "error(e)",
           grad);
  expect_invoke(t, body, 22, SMRULES_TENSOR_UNAVAILABLE_FOR_STEP);
  /* smrules.try turns per-tensor unavailability into nil, kind */
  snprintf(body, sizeof body,
           "%slocal v, kind = smrules.try(g.value, g, 22)\n"
           "assert(v == nil and kind == 'TensorUnavailableForStep')\n"
           "assert(smrules.try(g.value, g, 2) ~= nil)\n"
           "return smrules.try(g.value, g, 1)",
           grad);
  expect_invoke(t, body, 1, SMRULES_STEP_UNAVAILABLE);
  /* a string error is the rule's error, even if it names a kind */
  expect_invoke(t, "error('TensorUnavailableForStep')", 0, SMRULES_ERR);
  expect_invoke(t, "return smrules.SKIPPED", 0, SMRULES_SKIPPED);
  expect_invoke(t, "return nil", 0, SMRULES_NO_TRIGGER);
  expect_invoke(t, "return 1", 0, SMRULES_ERR);
  smr_trial_close(t);
}

/* Unreadable data (here a record whose checksum is wrong) counts as not
 * saved: the step is skipped as for C plugins
 * (docs/formats.md#differences-from-smdebug, Decision F10,
 * docs/rule-semantics.md#decisions, Decision R17); the error object names file
 * and offset. */
static void test_unreadable_value(void) {
  smr_trial *t = open_trial(CRC_CASE);
  expect_invoke(t, "return trial:tensor('weights'):value(1):max() > 0", 1,
                SMRULES_TENSOR_UNAVAILABLE_FOR_STEP);
  expect_invoke(t,
                "local w = trial:tensor('weights')\n"
                "local ok, e = pcall(w.value, w, 1)\n"
                "assert(not ok and e.kind == 'TensorUnavailableForStep')\n"
                "assert(e.file == 'events/000000000001/"
                "000000000001_worker_0.tfevents')\n"
                "assert(e.offset == 205)\n"
                "assert(e.message:find('offset 205', 1, true))\n"
                "return w:value(0):max() > 0",
                1, SMRULES_TRIGGERED);
  smr_trial_close(t);
}

static void test_sandbox_no_escape(void) {
  smr_trial *t = open_trial(EXPLODING);
  static const char *const cases[][2] = {
      {"io.open('/etc/passwd')", "global 'io'"},
      {"os.execute('true')", "global 'os'"},
      {"require('os')", "global 'require'"},
      {"dofile('/etc/passwd')", "global 'dofile'"},
      {"loadfile('/etc/passwd')", "global 'loadfile'"},
      {"debug.getinfo(1)", "global 'debug'"},
      {"package.loadlib('x', 'y')", "global 'package'"},
      {"string.dump(print)", "field 'dump'"},
      {"('x'):dump()", "method 'dump'"},
      {"assert(load('\\27Lua\\x54\\0\\x19\\x93\\r\\n\\x1a\\n'))", "bytecode"},
      {"assert(load('return 1', 'x', 'b'))", "binary chunks"},
      {"assert(load('return 1', 'x', 'bt'))", "binary chunks"},
      {"collectgarbage('stop')", "not available to rules"},
      {"setmetatable({}, {__gc = function() end})", "__gc"},
      {"local s = trial.steps()", "bad argument #1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *src =
        smr_xasprintf("function invoke_at_step(step)\n%s\nend\n", cases[i][0]);
    expect_invoke_error(t, src, NULL, cases[i][1]);
    free(src);
  }
  /* what is allowed still works */
  expect_invoke(
      t,
      "local f = assert(load('return 1 + ...', 'c', 't'))\n"
      "assert(f(1) == 2)\n"
      "local env = {x = 5}\n"
      "assert(load('return x', 'c', 't', env)() == 5)\n"
      "assert(collectgarbage('count') > 0)\n"
      "assert(collectgarbage() == 0)\n"
      "local co = coroutine.wrap(function(a) coroutine.yield(a) end)\n"
      "assert(co(3) == 3)\n"
      "assert(utf8.len('\\u{e9}') == 1 and math.pi > 3)\n"
      "assert(table.concat({1, 2}, ',') == '1,2')\n"
      "assert(getmetatable(trial) == 'locked')\n"
      "local ok, e = pcall(string.find, nil, 'x')\n"
      "assert(not ok and e:find(\"to 'string.find'\", 1, true))\n"
      "assert(('abc'):find('b') == 2 and ('a,b'):gsub(',', ';') == 'a;b')\n"
      "assert(('x'):rep(3, '-') == 'x-x-x' and ('').rep('', 1e18) == '')\n"
      "assert(table.move({1, 2, 3}, 1, 3, 2)[4] == 3)\n"
      "return true",
      0, SMRULES_TRIGGERED);
  smr_trial_close(t);
}

static void test_sandbox_load_errors(void) {
  smr_trial *t = open_trial(EXPLODING);
  const char bytecode[] = "\x1bLua\x54\x00\x19\x93\r\n\x1a\n\x04\x08\x08";
  expect_load_error(t, bytecode, sizeof bytecode - 1,
                    "precompiled Lua bytecode is not accepted");
  const char *syntax = "function invoke_at_step(step)\n  return (\nend\n";
  /* the error names the script (err.file); the message its line, with no
   * traceback of C frames (as smrules validate says it) */
  expect_load_error(t, syntax, strlen(syntax), "line 3: unexpected symbol");
  rule sr;
  rule_load_path(&sr, t, script_file("bad.lua", syntax, strlen(syntax)), NULL,
                 NULL);
  CHECK(!contains(sr.err.msg, "stack traceback") &&
        !contains(sr.err.msg, "bad.lua"));
  rule_free(&sr);
  const char *none = "x = 1\n";
  expect_load_error(t, none, strlen(none), "no function invoke_at_step");
  const char *init = "function init(p) error('bad threshold') end\n"
                     "function invoke_at_step() end\n";
  expect_load_error(t, init, strlen(init), "bad threshold");
  expect_load_error(t, init, strlen(init), "stack traceback:");
  const char *unavail = "function init(p) trial:tensor('nope') end\n"
                        "function invoke_at_step() end\n";
  expect_load_error(t, unavail, strlen(unavail), "TensorUnavailable: ");
  const char *loop = "while true do end\n";
  expect_load_error(t, loop, strlen(loop), "instruction limit of 10000000");
  rule r;
  rule_load_path(&r, t, "/nonexistent/rule.lua", NULL, NULL);
  CHECK(r.rc != SMR_OK && r.impl == NULL);
  rule_free(&r);
  smr_trial_close(t);
}

static void test_sandbox_memory(void) {
  smr_trial *t = open_trial(EXPLODING);
  smr_lua_limits lim;
  smr_lua_limits_default(&lim);
  lim.memory_bytes = 8u << 20;
  const char *msg = "memory limit of 8 MiB exceeded";
  expect_invoke_error(t,
                      "function invoke_at_step()\n"
                      "  local s = string.rep('x', 1 << 30)\n"
                      "end\n",
                      &lim, msg);
  expect_invoke_error(t,
                      "function invoke_at_step()\n"
                      "  local s = ('x'):rep(100 << 20)\n"
                      "end\n",
                      &lim, msg);
  /* the script catches the memory error: the call fails all the same */
  expect_invoke_error(t,
                      "function invoke_at_step()\n"
                      "  pcall(string.rep, 'x', 1 << 30)\n"
                      "  return false\n"
                      "end\n",
                      &lim, msg);
  expect_invoke_error(t,
                      "function invoke_at_step()\n"
                      "  local keep = {}\n"
                      "  for i = 1, 1e9 do keep[i] = ('y'):rep(1000) .. i end\n"
                      "end\n",
                      &lim, msg);
  expect_invoke_error(t,
                      "function invoke_at_step()\n"
                      "  local keep = {}\n"
                      "  while true do\n"
                      "    pcall(function()\n"
                      "      for i = 1, 1e9 do keep[#keep + 1] = {i} end\n"
                      "    end)\n"
                      "  end\n"
                      "end\n",
                      &lim, msg);
  /* tensor values count too: host memory kept alive by the script */
  lim.memory_bytes = 1u << 20;
  expect_invoke_error(
      t,
      "function invoke_at_step()\n"
      "  local g, keep = trial:tensor('Sequential_0.weight'), {}\n"
      "  for i = 1, 1e6 do keep[i] = g:value(0) end\n"
      "end\n",
      &lim, "memory limit of 1 MiB exceeded");
  /* ... but released values do not accumulate */
  rule r;
  rule_load(&r, t,
            "function invoke_at_step()\n"
            "  local g = trial:tensor('Sequential_0.weight')\n"
            "  for i = 1, 2000 do local v = g:value(0) end\n"
            "  return true\n"
            "end\n",
            NULL, &lim);
  CHECK_EQ_INT(r.rc, SMR_OK);
  if (r.rc == SMR_OK)
    CHECK_EQ_INT(rule_invoke(&r, 0), SMRULES_TRIGGERED);
  rule_free(&r);
  /* too small for a state at all */
  lim.memory_bytes = 1024;
  rule_load_path(&r, t, script_file("tiny.lua", "", 0), NULL, &lim);
  CHECK_EQ_INT(r.rc, SMR_ERR_USAGE);
  CHECK(contains(r.err.msg, "too small for a Lua state"));
  rule_free(&r);
  smr_trial_close(t);
}

static void test_sandbox_budget(void) {
  smr_trial *t = open_trial(EXPLODING);
  smr_lua_limits lim;
  smr_lua_limits_default(&lim);
  lim.instructions = 200000;
  const char *msg = "instruction limit of 200000 exceeded";
  static const char *const loops[] = {
      "while true do end",
      /* pcall around the loop, in a loop */
      "while true do pcall(function() while true do end end) end",
      /* error handlers that keep going */
      "while true do xpcall(function() while true do end end,\n"
      "                     function() while true do end end) end",
      /* recursion through pcall: every level catches */
      "local function f() while true do pcall(f) end end\n"
      "while true do pcall(f) end",
      /* inside a coroutine, resumed again and again */
      "while true do\n"
      "  pcall(coroutine.wrap(function() while true do end end))\n"
      "end",
      /* string.gsub with a Lua callback */
      "while true do pcall(string.gsub, ('x'):rep(1000), 'x',\n"
      "                    function() while true do end end) end",
      /* table.sort comparator */
      "local t = {} for i = 1, 100 do t[i] = i end\n"
      "while true do pcall(table.sort, t, function(a, b)\n"
      "  while true do end end) end",
      /* C work in single calls is charged: catastrophic patterns, empty
       * repetitions, moves of absent elements, repeated big copies */
      "local s = ('a'):rep(5000)\n"
      "while true do pcall(string.find, s, '.-.-.-.-b') end",
      "while true do pcall(string.rep, '', math.maxinteger) end",
      "while true do pcall(table.move, {}, 1, math.maxinteger - 1, 1) end",
      "local s = ('x'):rep(1 << 20)\n"
      "while true do local c = s .. 'y' end",
      "local t = {} for i = 1, 10000 do t[i] = -i end\n"
      "while true do table.sort(t) end",
      /* a __tostring that loops, raised as the error value */
      "error(setmetatable({}, {__tostring = function() while true do end "
      "end}))",
  };
  for (size_t i = 0; i < sizeof loops / sizeof loops[0]; i++) {
    char *src =
        smr_xasprintf("function invoke_at_step(step)\n%s\nend\n", loops[i]);
    expect_invoke_error(t, src, &lim, msg);
    free(src);
  }
  /* the budget is per call: a state that hit it can be called again */
  rule r;
  rule_load(&r, t,
            "local n = 0\n"
            "function invoke_at_step(step)\n"
            "  n = n + 1\n"
            "  if n == 1 then while true do end end\n"
            "  for i = 1, 1e5 do end\n"
            "  return true\n"
            "end\n",
            NULL, &lim);
  CHECK_EQ_INT(r.rc, SMR_OK);
  CHECK_EQ_INT(rule_invoke(&r, 0), SMRULES_ERR);
  CHECK_EQ_INT(rule_invoke(&r, 2), SMRULES_TRIGGERED);
  CHECK_EQ_INT(rule_invoke(&r, 4), SMRULES_TRIGGERED);
  rule_free(&r);
  smr_trial_close(t);
}

/* After every kind of failure, other states in the process still work. */
static void test_other_state_keeps_working(void) {
  smr_trial *t = open_trial(EXPLODING);
  smr_lua_limits lim;
  smr_lua_limits_default(&lim);
  lim.instructions = 100000;
  lim.memory_bytes = 4u << 20;
  smr_node *params = threshold_params(1.0);
  rule good;
  rule_load_path(&good, t, "rules/gradient_mean_abs.lua", params, NULL);
  CHECK_EQ_INT(good.rc, SMR_OK);
  rule bad;
  rule_load(&bad, t,
            "function invoke_at_step(step)\n"
            "  if step == 0 then while true do pcall(error) end end\n"
            "  if step == 2 then local s = ('x'):rep(1 << 30) end\n"
            "  if step == 4 then io.write('x') end\n"
            "end\n",
            NULL, &lim);
  CHECK_EQ_INT(bad.rc, SMR_OK);
  int64_t steps[] = {0, 2, 4};
  for (size_t i = 0; bad.rc == SMR_OK && i < 3; i++) {
    CHECK_EQ_INT(rule_invoke(&bad, steps[i]), SMRULES_ERR);
    CHECK_EQ_INT(rule_invoke(&good, steps[i]), SMRULES_NO_TRIGGER);
  }
  CHECK_EQ_INT(rule_invoke(&good, 6), SMRULES_TRIGGERED);
  rule_free(&bad);
  CHECK_EQ_INT(rule_invoke(&good, 8), SMRULES_TRIGGERED);
  rule_free(&good);
  free_node(params);
  smr_trial_close(t);
}

/* ------------------------------------------------------------ threads */

typedef struct thread_job {
  smr_trial *trial;
  smr_node *params;
  int fired;
} thread_job;

static void *run_gradient_rule(void *arg) {
  thread_job *job = arg;
  for (int round = 0; round < 3; round++) {
    rule r;
    rule_load_path(&r, job->trial, "rules/gradient_mean_abs.lua", job->params,
                   NULL);
    smr_i64v steps = {0};
    smr_trial_steps(job->trial, SMR_MODE_GLOBAL, false, &steps);
    for (size_t i = 0; r.rc == SMR_OK && i < steps.n; i++)
      job->fired += rule_invoke(&r, steps.v[i]) == SMRULES_TRIGGERED;
    smr_i64v_free(&steps);
    rule_free(&r);
  }
  return NULL;
}

static void test_parallel_states(void) {
  smr_trial *t = open_trial(EXPLODING);
  smr_node *params = threshold_params(1.0);
  thread_job jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (thread_job){.trial = t, .params = params};
    CHECK_EQ_INT(pthread_create(&th[i], NULL, run_gradient_rule, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_INT(jobs[i].fired, 3 * 2);
  }
  free_node(params);
  smr_trial_close(t);
}

static void test_limits_default(void) {
  smr_lua_limits l;
  smr_lua_limits_default(&l);
  CHECK_EQ_INT(l.instructions, 10000000);
  CHECK_EQ_INT(l.memory_bytes, 64u << 20);
}

int main(void) {
  smr_log_set_level(4); /* rules' log lines are not test output */
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_lua_rule_XXXXXX");
  if (!mkdtemp(tmp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_limits_default);
  TEST_RUN(test_gradient_rule_exploding);
  TEST_RUN(test_gradient_rule_healthy);
  TEST_RUN(test_gradient_rule_report);
  TEST_RUN(test_loss_nan_rule);
  TEST_RUN(test_loss_plateau_rule);
  TEST_RUN(test_params_to_lua);
  TEST_RUN(test_trial_api);
  TEST_RUN(test_value_api);
  TEST_RUN(test_value_nan_and_big);
  TEST_RUN(test_report_and_log);
  TEST_RUN(test_unavailable_statuses);
  TEST_RUN(test_unreadable_value);
  TEST_RUN(test_sandbox_no_escape);
  TEST_RUN(test_sandbox_load_errors);
  TEST_RUN(test_sandbox_memory);
  TEST_RUN(test_sandbox_budget);
  TEST_RUN(test_other_state_keeps_working);
  TEST_RUN(test_parallel_states);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", tmp_dir);
  return TEST_REPORT("test_lua_rule");
}
