/* sdk_guard.c - the 1.0 guard: a rule that calls every function of the
 * smrules_api table of smrules 1.0 and fills every struct of its
 * smrules.h, writing what it saw into its report.
 *
 * The Makefile builds it twice: against the header as released with 1.0
 * (tests/fixtures/sdk-1.0/smrules/smrules.h: sdk_guard-1.0.so) and against
 * the current one (sdk_guard.so); with -DGUARD_PROFILER it is a profiler
 * rule that reads the profiler functions (sdk_guard_prof*.so).
 * test_sdk_guard.py runs each pair with the current smrules and requires
 * identical reports.  A table reordered, a member removed or retyped in the
 * middle, a struct changed before its end or a constant renumbered makes
 * the 1.0 build call or read the wrong thing: its report differs, or it is
 * refused, or it crashes.  So it uses nothing that is not in the 1.0
 * header, and must keep building against it. */
#include <smrules/smrules.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const smrules_api *host;

typedef struct settings {
  double threshold;
  int64_t every;
  bool flag;
  const char *label;
  smrules_strlist colls;
  smrules_numlist nums;
  int64_t fail_at;
  const char *other; /* another trial to open */
  int64_t scan_interval_us;
} settings;

static const char *const labels[] = {"guard", "other", NULL};

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM("threshold", "1.5", settings, threshold,
                        "a float parameter", SMRULES_RANGE(0, 10)),
    SMRULES_INT_PARAM("every", "2", settings, every,
                      "trigger at global steps divisible by this",
                      SMRULES_ABOVE(0)),
    SMRULES_BOOL_PARAM("flag", "True", settings, flag, "a bool parameter"),
    SMRULES_STRING_PARAM("label", "guard", settings, label,
                         "a string parameter", .allowed = labels,
                         .aliases = "old_label"),
    SMRULES_STRLIST_PARAM("colls", "losses, gradients", settings, colls,
                          "collections to select"),
    SMRULES_NUMLIST_PARAM("nums", "1, 2.5", settings, nums,
                          "a number list parameter"),
    SMRULES_INT_PARAM("fail_at", "-1", settings, fail_at,
                      "fail at this step (-1: never)"),
    SMRULES_STRING_PARAM("other", NULL, settings, other,
                         "another trial to open"),
    SMRULES_INT_PARAM("scan_interval_us", "60000000", settings,
                      scan_interval_us,
                      "profiler windows (the profiler variant)"),
    SMRULES_END_PARAMS};

typedef struct guard {
  settings s;
  int64_t invoked, triggered;
  bool logged;
} guard;

static int init(smrules_ctx *ctx, const void *s, void **state) {
  guard *g = calloc(1, sizeof *g);
  if (!g) {
    host->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  g->s = *(const settings *)s;
  *state = g;
  return SMRULES_OK;
}

static void destroy(void *state) {
  free(state);
}

/* The parameters as the host filled and reports them. */
static void put_settings(smrules_json *j, smrules_ctx *ctx, const guard *g) {
  smrules_json *o = host->json_obj(j, "settings");
  host->json_num(o, "threshold", g->s.threshold);
  host->json_int(o, "every", g->s.every);
  host->json_int(o, "scan_interval_us", g->s.scan_interval_us);
  host->json_bool(o, "flag", g->s.flag);
  host->json_str(o, "label", g->s.label);
  host->json_strs(o, "colls", g->s.colls.v, g->s.colls.n);
  host->json_nums(o, "nums", g->s.nums.v, g->s.nums.n);
  host->json_bool(o, "other_is_set", host->param_is_set(ctx, "other"));
  host->json_str(o, "nums_text", host->param_text(ctx, "nums"));
  char buf[32];
  host->py_str(100.0, false, buf, sizeof buf);
  host->json_str(o, "py_str_100", buf);
  host->py_str(3, true, buf, sizeof buf);
  host->json_str(o, "py_str_3", buf);
}

/* A side file through json_new / json_text / json_free / write_output. */
static int write_side_file(smrules_ctx *ctx, const char *what, int64_t n) {
  if (!host->output_dir(ctx))
    return SMRULES_ERR;
  smrules_json *j = host->json_new();
  host->json_str(j, "what", what);
  host->json_int(j, "n", n);
  char *text = host->json_text(j);
  host->json_free(j);
  int rc = text ? host->write_output(ctx, "guard/side.json", text, strlen(text))
                : SMRULES_ERR;
  free(text);
  return rc;
}

#ifndef GUARD_PROFILER

/* ------------------------------------------------------ the tensor rule */

static void put_names(smrules_json *v, smrules_trial *t, const guard *g) {
  smrules_strlist all, losses, sel;
  const char *re[] = {"bias$"};
  smrules_strlist regexes = {1, re};
  host->json_int(v, "tensor_names_rc", host->tensor_names(t, &all));
  host->json_int(v, "tensor_names", (int64_t)all.n);
  host->json_int(v, "collection_rc", host->collection(t, "losses", &losses));
  host->json_strs(v, "losses", losses.v, losses.n);
  host->json_int(v, "select_rc", host->select(t, &g->s.colls, &regexes, &sel));
  host->json_int(v, "selected", (int64_t)sel.n);
  host->json_bool(v, "has_first",
                  all.n && host->has_tensor(t, all.v[all.n - 1]));
  host->json_bool(v, "has_nonsense", host->has_tensor(t, "no/such/tensor"));
  host->strlist_free(&all);
  host->strlist_free(&losses);
  host->strlist_free(&sel);
}

static void put_steps(smrules_json *v, smrules_trial *t, int64_t step,
                      const char *loss) {
  int64_t *steps = NULL, *tsteps = NULL;
  size_t n = 0, tn = 0;
  host->json_int(v, "steps_rc",
                 host->steps(t, SMRULES_MODE_GLOBAL, &steps, &n));
  host->json_ints(v, "steps", steps, n);
  host->steps_free(steps);
  host->json_int(v, "tensor_steps_rc",
                 host->tensor_steps(t, loss, SMRULES_MODE_TRAIN, &tsteps, &tn));
  host->json_ints(v, "train_steps", tsteps, tn);
  host->steps_free(tsteps);
  int mode = 0;
  int64_t mode_step = -1, back = -1;
  host->json_int(v, "step_mode_rc",
                 host->step_mode(t, step, &mode, &mode_step));
  host->json_int(v, "mode", mode);
  host->json_int(v, "mode_step", mode_step);
  host->json_int(v, "global_step_rc",
                 host->global_step(t, mode, mode_step, &back));
  host->json_int(v, "global_step", back);
}

static void put_stats(smrules_json *o, const smrules_stats *s) {
  int64_t counts[] = {s->count, s->finite, s->nan, s->pinf, s->ninf, s->zeros};
  host->json_ints(o, "counts", counts, 6);
  host->json_bool(o, "has_finite", s->has_finite);
  double nums[] = {s->min, s->max, s->sum, s->mean, s->l1, s->l2, s->linf};
  host->json_nums(o, "stats", nums, 7);
}

static void put_value(smrules_json *v, smrules_trial *t, int64_t step,
                      const char *loss) {
  smrules_tensor x;
  int rc = host->value(t, loss, step, SMRULES_MODE_GLOBAL, &x);
  host->json_int(v, "value_rc", rc);
  if (rc != SMRULES_OK)
    return;
  smrules_json *o = host->json_obj(v, "value");
  host->json_int(o, "dtype", x.dtype);
  host->json_bool(o, "float32", x.dtype == SMRULES_DT_FLOAT);
  host->json_int(o, "ndim", x.ndim);
  host->json_ints(o, "shape", x.shape, (size_t)x.ndim);
  host->json_int(o, "count", x.count);
  host->json_int(o, "nbytes", (int64_t)x.nbytes);
  host->json_num(o, "get0", host->get(&x, 0));
  host->json_num(o, "get_out_of_range", host->get(&x, x.count));
  host->json_int(o, "step", x.step);
  host->json_int(o, "mode", x.mode);
  host->json_int(o, "mode_step", x.mode_step);
  host->json_num(o, "wall_time", x.wall_time);
  host->json_str(o, "worker", x.worker);
  smrules_values q;
  host->json_int(o, "tensor_query_rc",
                 host->tensor_query(&x,
                                    SMRULES_Q_COUNTS | SMRULES_Q_MAX |
                                        SMRULES_Q_ABS_RED(SMRULES_RED_L1),
                                    &q, sizeof q));
  put_stats(o, &q.stats);
  host->json_num(o, "max", q.red[SMRULES_RED_MAX]);
  host->json_num(o, "abs_l1", q.abs_red[SMRULES_RED_L1]);
  host->json_num(o, "not_asked", q.red[SMRULES_RED_MIN]);
  host->release(&x);
  host->json_bool(o, "released", x.host_ == NULL);
}

/* One query of everything, over the selected tensors. */
static int put_query(smrules_ctx *ctx, smrules_json *v, smrules_trial *t,
                     int64_t step, const guard *g) {
  smrules_strlist sel;
  host->select(t, &g->s.colls, NULL, &sel);
  size_t n = sel.n ? sel.n : 1;
  smrules_values *q = calloc(n, sizeof *q);
  int *status = calloc(n, sizeof *status);
  if (!q || !status) {
    free(q);
    free(status);
    host->strlist_free(&sel);
    host->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  unsigned what = SMRULES_Q_STATS | SMRULES_Q_MIN | SMRULES_Q_MAX |
                  SMRULES_Q_MEAN | SMRULES_Q_STD | SMRULES_Q_VARIANCE |
                  SMRULES_Q_SUM | SMRULES_Q_PROD | SMRULES_Q_L1 | SMRULES_Q_L2 |
                  SMRULES_Q_LINF | SMRULES_Q_ABS_RED(SMRULES_RED_MEAN);
  host->json_int(v, "query_rc",
                 host->query(t, sel.v, sel.n, step, SMRULES_MODE_GLOBAL, what,
                             q, sizeof *q, status));
  int64_t evaluated = 0;
  for (size_t i = 0; i < sel.n; i++) {
    smrules_json *o = host->json_obj(v, sel.v[i]);
    host->json_int(o, "status", status[i]);
    if (status[i] != SMRULES_OK)
      continue;
    evaluated++;
    put_stats(o, &q[i].stats);
    host->json_nums(o, "red", q[i].red, SMRULES_RED_COUNT);
    host->json_num(o, "abs_mean", q[i].abs_red[SMRULES_RED_MEAN]);
  }
  host->datapoints(ctx, evaluated);
  free(q);
  free(status);
  host->strlist_free(&sel);
  return SMRULES_OK;
}

static int invoke_at_step(smrules_ctx *ctx, void *state, int64_t step) {
  guard *g = state;
  g->invoked++;
  if (step == g->s.fail_at) {
    host->fail(ctx, "guard failed at step %lld as asked", (long long)step);
    return SMRULES_ERR;
  }
  if (!g->logged) {
    g->logged = true;
    host->log(ctx, SMRULES_LOG_WARNING, "guard first saw step %lld",
              (long long)step);
    host->log(ctx, SMRULES_LOG_DEBUG, "not in the report");
  }
  smrules_trial *t = host->trial(ctx);
  smrules_json *v = host->violation(ctx);
  host->json_int(v, "step", step);
  put_names(v, t, g);
  smrules_strlist losses;
  host->collection(t, "losses", &losses);
  const char *loss = losses.n ? losses.v[0] : "";
  put_steps(v, t, step, loss);
  put_value(v, t, step, loss);
  host->strlist_free(&losses);
  if (put_query(ctx, v, t, step, g) != SMRULES_OK)
    return SMRULES_ERR;
  smrules_live_info li;
  memset(&li, 0xff, sizeof li);
  host->json_int(v, "live_info_rc", host->live_info(ctx, &li));
  host->json_bool(v, "live", li.live);
  host->json_bool(v, "training_ended", li.training_ended);
  host->json_int(v, "newest_step", li.newest_step);
  host->json_null(v, "none");
  host->json_raw(v, "raw", "[1,{\"a\":2}]");
  if (step % g->s.every)
    return SMRULES_NO_TRIGGER;
  g->triggered++;
  return SMRULES_TRIGGERED;
}

static int finish(smrules_ctx *ctx, void *state) {
  guard *g = state;
  smrules_json *d = host->details_reset(ctx);
  put_settings(d, ctx, g);
  host->json_int(host->details(ctx), "invoked", g->invoked);
  host->json_int(d, "triggered", g->triggered);
  if (g->s.other) {
    smrules_trial *o = host->open_trial(ctx, g->s.other);
    smrules_strlist names = {0, NULL};
    if (!o)
      return SMRULES_ERR;
    host->tensor_names(o, &names);
    host->json_int(d, "other_tensor_names", (int64_t)names.n);
    host->strlist_free(&names);
  }
  return write_side_file(ctx, "tensor", g->invoked);
}

#define GUARD_NAME "SdkGuard"
#define GUARD_KIND SMRULES_KIND_TENSOR

#else

/* ---------------------------------------------------- the profiler rule */

/* The first key of an args object's JSON text, or "". */
static void first_key(const char *args, char *out, size_t n) {
  const char *q = args ? strchr(args, '"') : NULL;
  const char *end = q ? strchr(q + 1, '"') : NULL;
  size_t len = end ? (size_t)(end - q - 1) : 0;
  len = len < n - 1 ? len : n - 1;
  memcpy(out, q ? q + 1 : "", len);
  out[len] = '\0';
}

static void put_sys(smrules_ctx *ctx, smrules_json *w, int64_t s, int64_t e) {
  const smrules_sys_event *ev;
  size_t n;
  host->json_int(w, "system_rc", host->system_events(ctx, s, e, &ev, &n));
  host->json_int(w, "system_events", (int64_t)n);
  if (!n)
    return;
  smrules_json *o = host->json_obj(w, "first_system_event");
  host->json_str(o, "type", ev[0].type);
  host->json_str(o, "name", ev[0].name);
  host->json_str(o, "dimension", ev[0].dimension);
  host->json_str(o, "node", ev[0].node);
  host->json_num(o, "value", ev[0].value);
  host->json_num(o, "timestamp", ev[0].timestamp);
  host->json_bool(o, "has_name", ev[0].has_name);
  host->json_bool(o, "timestamp_is_int", ev[0].timestamp_is_int);
}

static void put_fw(smrules_ctx *ctx, smrules_json *w, int64_t s, int64_t e) {
  const smrules_fw_event *ev;
  size_t n;
  host->json_int(w, "framework_rc", host->framework_events(ctx, s, e, &ev, &n));
  host->json_int(w, "framework_events", (int64_t)n);
  for (size_t i = 0; i < n; i++) {
    if (!ev[i].args)
      continue;
    smrules_json *o = host->json_obj(w, "first_event_with_args");
    host->json_str(o, "name", ev[i].name);
    host->json_str(o, "phase", ev[i].phase);
    host->json_str(o, "node", ev[i].node);
    host->json_str(o, "file_type", ev[i].file_type);
    double t[] = {ev[i].start_us, ev[i].end_us, ev[i].duration_us};
    host->json_nums(o, "times", t, 3);
    host->json_bool(o, "times_are_int", ev[i].times_are_int);
    int64_t ids[] = {ev[i].pid, ev[i].tid};
    host->json_ints(o, "ids", ids, 2);
    char key[64];
    first_key(ev[i].args, key, sizeof key);
    smrules_arg a;
    host->json_str(o, "key", key);
    host->json_int(o, "fw_arg_rc", host->fw_arg(ctx, &ev[i], key, &a));
    host->json_int(o, "arg_type", a.type);
    host->json_bool(o, "arg_b", a.type == SMRULES_ARG_BOOL && a.b);
    host->json_num(o, "arg_num", a.type == SMRULES_ARG_NUMBER ? a.num : 0);
    host->json_bool(o, "arg_is_int", a.type == SMRULES_ARG_NUMBER && a.is_int);
    host->json_str(o, "arg_str", a.type == SMRULES_ARG_STRING ? a.str : NULL);
    host->json_raw(o, "arg_json", a.json);
    host->json_int(o, "missing_type",
                   (host->fw_arg(ctx, &ev[i], "no such key", &a), a.type));
    return;
  }
}

static void put_info(smrules_ctx *ctx, smrules_json *d) {
  smrules_profiler_info in;
  host->json_int(d, "profiler_info_rc", host->profiler_info(ctx, &in));
  int64_t us[] = {in.first_us,           in.latest_us,
                  in.system_first_us,    in.system_latest_us,
                  in.framework_first_us, in.framework_latest_us};
  host->json_ints(d, "info_us", us, 6);
  host->json_bool(d, "job_finished", in.job_finished);
  int64_t files[] = {(int64_t)in.system_files, (int64_t)in.framework_files};
  host->json_ints(d, "info_files", files, 2);
  smrules_strlist nodes, cpus, gpus;
  host->profiler_names(ctx, SMRULES_NAMES_NODES, NULL, &nodes);
  host->json_strs(d, "nodes", nodes.v, nodes.n);
  const char *node = nodes.n ? nodes.v[0] : "";
  host->profiler_names(ctx, SMRULES_NAMES_CPUS, node, &cpus);
  host->json_strs(d, "cpus", cpus.v, cpus.n);
  host->profiler_names(ctx, SMRULES_NAMES_GPUS, node, &gpus);
  host->json_strs(d, "gpus", gpus.v, gpus.n);
  host->strlist_free(&nodes);
  host->strlist_free(&cpus);
  host->strlist_free(&gpus);
}

static int invoke_at_step(smrules_ctx *ctx, void *state, int64_t k) {
  guard *g = state;
  int64_t index = -1, start = 0, end = 0;
  if (host->window(ctx, &index, &start, &end) != SMRULES_OK || index != k) {
    host->fail(ctx, "window %lld is not %lld", (long long)index, (long long)k);
    return SMRULES_ERR;
  }
  g->invoked++;
  g->triggered += k % 2 == 0;
  smrules_json *d = host->details_reset(ctx);
  put_settings(d, ctx, g);
  smrules_json *w = host->json_obj(d, "window");
  int64_t bounds[] = {index, start, end};
  host->json_ints(w, "bounds", bounds, 3);
  put_sys(ctx, w, start, end);
  put_fw(ctx, w, start, end);
  put_info(ctx, d);
  host->report_set(ctx, g->triggered, g->invoked * 10, g->invoked * 100);
  host->rule_parameters(ctx, "guard:profiler");
  return k % 2 == 0 ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

static int finish(smrules_ctx *ctx, void *state) {
  guard *g = state;
  host->json_int(host->details(ctx), "invoked", g->invoked);
  return write_side_file(ctx, "profiler", g->invoked);
}

#define GUARD_NAME "SdkGuardProfiler"
#define GUARD_KIND SMRULES_KIND_PROFILER

#endif

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = GUARD_NAME,
    .description = "calls every function of the 1.0 table (test_sdk_guard)",
    .kind = GUARD_KIND,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "any trial",
    .init = init,
    .invoke_at_step = invoke_at_step,
    .finish = finish,
    .destroy = destroy,
    .flags = 0,
    .save_state = NULL,
    .load_state = NULL,
    .invoke_at_time = NULL,
};

SMRULES_PLUGIN_INIT {
  host = api;
  return &rule;
}
