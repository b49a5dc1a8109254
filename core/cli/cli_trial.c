/* cli_trial.c - `smrules inspect` and `smrules tensor`: what a trial holds
 * and what one tensor looks like, as a table or as JSON. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "cli/cli.h"
#include "format/index.h"
#include "format/tensor.h"
#include "source/source.h"
#include "trial/trial.h"

/* Options shared by the trial commands. */
typedef struct trial_args {
  const char *trial;
  smr_trial_opts opts;
  int json;
} trial_args;

enum {
  OPT_STATE = 1000,
  OPT_FRESH,
  OPT_LIVE,
  OPT_JSON,
  OPT_ABS,
  OPT_S3_ENDPOINT
};

static bool common_opt(trial_args *a, int c) {
  switch (c) {
  case 't':
    a->trial = optarg;
    return true;
  case OPT_STATE:
    a->opts.state_path = optarg;
    return true;
  case OPT_FRESH:
    a->opts.fresh = true;
    return true;
  case OPT_LIVE:
    a->opts.live = true;
    return true;
  case OPT_JSON:
    a->json = 1;
    return true;
  case OPT_S3_ENDPOINT:
    smr_source_set_endpoint(optarg);
    return true;
  default:
    return false;
  }
}

#define COMMON_LONGOPTS                                                        \
  {"trial", required_argument, NULL, 't'},                                     \
      {"state", required_argument, NULL, OPT_STATE},                           \
      {"fresh", no_argument, NULL, OPT_FRESH},                                 \
      {"live", no_argument, NULL, OPT_LIVE},                                   \
      {"json", no_argument, NULL, OPT_JSON},                                   \
      {"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT}, {             \
    "help", no_argument, NULL, 'h'                                             \
  }

static const char *COMMON_HELP =
    "  --trial DIR      the trial (smdebug out_dir) to read, a directory or\n"
    "                   s3://BUCKET/PREFIX (docs/s3.md)\n"
    "  --json           print JSON instead of a table\n"
    "  --live           smdebug's view of a run still writing: only\n"
    "                   training_job_end.ts ends training\n"
    "  --state PATH     where the catalog lives (default "
    "DIR/.smrules/state.db;\n"
    "                   for s3:// trials a file under ~/.cache/smrules/s3/)\n"
    "  --fresh          use a private in-memory catalog\n"
    "  --s3-endpoint URL  S3-compatible endpoint for s3:// trials\n"
    "                   (default AWS_ENDPOINT_URL, else AWS)\n";

static void jw_error(const smr_error *e);

static int open_trial(const trial_args *a, smr_trial **t) {
  smr_error err;
  smr_error_clear(&err);
  if (!a->trial) {
    fprintf(stderr, "smrules: --trial DIR is required\n");
    return SMR_EXIT_USAGE;
  }
  int rc = smr_trial_open(a->trial, &a->opts, t, &err);
  if (rc != SMR_OK) {
    smr_cli_print_error(&err);
    if (a->json)
      jw_error(&err);
    return SMR_EXIT_UNREADABLE;
  }
  return SMR_EXIT_OK;
}

static void jw_i64v(smr_jw *w, const smr_i64v *v) {
  smr_jw_arr(w);
  for (size_t i = 0; i < v->n; i++)
    smr_jw_int(w, v->v[i]);
  smr_jw_arr_end(w);
}

static void jw_strv(smr_jw *w, const smr_strv *v) {
  smr_jw_arr(w);
  for (size_t i = 0; i < v->n; i++)
    smr_jw_str(w, v->v[i]);
  smr_jw_arr_end(w);
}

/* ------------------------------------------------------------- inspect */

static void inspect_modes(smr_jw *w, smr_trial *t) {
  int modes[4];
  size_t nm;
  smr_trial_modes(t, modes, &nm);
  smr_jw_key(w, "modes");
  smr_jw_obj(w);
  for (size_t i = 0; i < nm; i++) {
    smr_i64v ms = {0}, gs = {0};
    smr_trial_steps(t, modes[i], false, &ms);
    for (size_t k = 0; k < ms.n; k++) {
      int64_t g;
      if (smr_trial_global_step(t, modes[i], ms.v[k], &g))
        smr_i64v_push(&gs, g);
    }
    if (modes[i] == SMR_MODE_GLOBAL) {
      /* GLOBAL-mode steps are the global steps written in GLOBAL mode */
      smr_i64v_free(&gs);
      smr_i64v_free(&ms);
      smr_i64v all = {0};
      smr_trial_steps(t, SMR_MODE_GLOBAL, false, &all);
      for (size_t k = 0; k < all.n; k++) {
        int m;
        int64_t s;
        if (smr_trial_step_mode(t, all.v[k], &m, &s) && m == SMR_MODE_GLOBAL) {
          smr_i64v_push(&gs, all.v[k]);
          smr_i64v_push(&ms, s);
        }
      }
      smr_i64v_free(&all);
    }
    smr_jw_key(w, smr_mode_name(modes[i]));
    smr_jw_obj(w);
    smr_jw_key(w, "steps");
    jw_i64v(w, &gs);
    smr_jw_key(w, "mode_steps");
    jw_i64v(w, &ms);
    smr_jw_obj_end(w);
    smr_i64v_free(&ms);
    smr_i64v_free(&gs);
  }
  smr_jw_obj_end(w);
}

static void inspect_step_modes(smr_jw *w, smr_trial *t) {
  smr_i64v all = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, true, &all);
  smr_jw_key(w, "step_modes");
  smr_jw_obj(w);
  for (size_t i = 0; i < all.n; i++) {
    int m;
    int64_t ms;
    if (!smr_trial_step_mode(t, all.v[i], &m, &ms))
      continue;
    char key[32];
    snprintf(key, sizeof key, "%" PRId64, all.v[i]);
    smr_jw_key(w, key);
    smr_jw_arr(w);
    smr_jw_str(w, smr_mode_name(m));
    smr_jw_int(w, ms);
    smr_jw_arr_end(w);
  }
  smr_jw_obj_end(w);
  smr_i64v_free(&all);
}

static void inspect_collections(smr_jw *w, smr_trial *t) {
  smr_strv names = {0};
  smr_trial_collection_names(t, &names);
  smr_jw_key(w, "collections");
  smr_jw_obj(w);
  for (size_t i = 0; i < names.n; i++) {
    smr_strv members = {0};
    smr_error err;
    smr_trial_collection_members(t, names.v[i], NULL, &members, &err);
    smr_jw_key(w, names.v[i]);
    jw_strv(w, &members);
    smr_strv_free(&members);
  }
  smr_jw_obj_end(w);
  smr_strv_free(&names);
  smr_jw_key(w, "collections_error");
  smr_jw_str(w, smr_trial_collections_error(t));
}

static void inspect_tensor(smr_jw *w, smr_trial *t, const char *name) {
  smr_tensor_steps ts;
  smr_error err;
  if (smr_trial_tensor_steps(t, name, &ts, &err) != SMR_OK)
    return;
  smr_i64v complete = {0}, all = {0};
  for (size_t i = 0; i < ts.n; i++) {
    int64_t g = ts.v[i].step;
    if (all.n && all.v[all.n - 1] == g)
      continue;
    smr_i64v_push(&all, g);
    if (smr_trial_step_complete(t, g))
      smr_i64v_push(&complete, g);
  }
  smr_jw_obj(w);
  smr_jw_key(w, "name");
  smr_jw_str(w, name);
  smr_jw_key(w, "steps");
  jw_i64v(w, &complete);
  smr_jw_key(w, "steps_all");
  jw_i64v(w, &all);
  smr_jw_key(w, "workers_by_step");
  smr_jw_obj(w);
  for (size_t i = 0; i < ts.n;) {
    char key[32];
    snprintf(key, sizeof key, "%" PRId64, ts.v[i].step);
    smr_jw_key(w, key);
    smr_jw_arr(w);
    int64_t g = ts.v[i].step;
    for (; i < ts.n && ts.v[i].step == g; i++)
      smr_jw_str(w, ts.v[i].worker);
    smr_jw_arr_end(w);
  }
  smr_jw_obj_end(w);
  smr_jw_obj_end(w);
  smr_i64v_free(&complete);
  smr_i64v_free(&all);
  smr_tensor_steps_free(&ts);
}

static void inspect_problems(smr_jw *w, smr_trial *t) {
  const smr_trial_problem *p;
  size_t n = smr_trial_problems(t, &p);
  smr_jw_key(w, "errors");
  smr_jw_arr(w);
  for (size_t i = 0; i < n; i++) {
    smr_jw_obj(w);
    smr_jw_key(w, "file");
    smr_jw_str(w, p[i].file);
    smr_jw_key(w, "offset");
    if (p[i].offset >= 0)
      smr_jw_int(w, p[i].offset);
    else
      smr_jw_null(w);
    smr_jw_key(w, "message");
    smr_jw_str(w, p[i].message);
    smr_jw_obj_end(w);
  }
  smr_jw_arr_end(w);
}

static char *inspect_json(smr_trial *t, const char *dir) {
  smr_jw w = {0};
  smr_i64v steps = {0}, all = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  smr_trial_steps(t, SMR_MODE_GLOBAL, true, &all);
  smr_jw_obj(&w);
  smr_jw_key(&w, "trial");
  smr_jw_str(&w, dir);
  smr_jw_key(&w, "workers");
  jw_strv(&w, smr_trial_workers(t));
  smr_jw_key(&w, "num_workers");
  smr_jw_int(&w, smr_trial_num_workers(t));
  smr_jw_key(&w, "training_ended");
  smr_jw_bool(&w, smr_trial_end_marker(t));
  smr_jw_key(&w, "steps");
  jw_i64v(&w, &steps);
  smr_jw_key(&w, "steps_all");
  jw_i64v(&w, &all);
  smr_jw_key(&w, "last_complete_step");
  smr_jw_int(&w, smr_trial_last_complete_step(t));
  inspect_modes(&w, t);
  inspect_step_modes(&w, t);
  inspect_collections(&w, t);
  smr_strv names = {0};
  smr_error err;
  smr_trial_tensor_names(t, &names, &err);
  smr_jw_key(&w, "tensors");
  smr_jw_arr(&w);
  for (size_t i = 0; i < names.n; i++)
    inspect_tensor(&w, t, names.v[i]);
  smr_jw_arr_end(&w);
  inspect_problems(&w, t);
  smr_jw_key(&w, "state");
  smr_jw_str(&w, smr_trial_state_path(t));
  smr_jw_obj_end(&w);
  smr_strv_free(&names);
  smr_i64v_free(&steps);
  smr_i64v_free(&all);
  return smr_jw_finish(&w);
}

static void print_steps_line(const char *label, const smr_i64v *v) {
  printf("%-14s", label);
  if (v->n == 0)
    printf(" (none)");
  for (size_t i = 0; i < v->n; i++) {
    if (i == 12 && v->n > 16) {
      printf(" ... (%zu more) ... %" PRId64, v->n - 13, v->v[v->n - 1]);
      break;
    }
    printf(" %" PRId64, v->v[i]);
  }
  printf("\n");
}

static void inspect_table(smr_trial *t, const char *dir) {
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  const smr_strv *workers = smr_trial_workers(t);
  printf("trial          %s\n", dir);
  printf("workers        %zu of %d expected:", workers->n,
         smr_trial_num_workers(t));
  for (size_t i = 0; i < workers->n; i++)
    printf(" %s", workers->v[i]);
  printf("\ntraining ended %s\n", smr_trial_end_marker(t)
                                      ? "yes (training_job_end.ts)"
                                      : "no end marker");
  print_steps_line("steps", &steps);
  int modes[4];
  size_t nm;
  smr_trial_modes(t, modes, &nm);
  for (size_t i = 0; i < nm; i++) {
    smr_i64v ms = {0};
    smr_trial_steps(t, modes[i], false, &ms);
    char label[32];
    snprintf(label, sizeof label, "  %s", smr_mode_name(modes[i]));
    if (modes[i] != SMR_MODE_GLOBAL)
      print_steps_line(label, &ms);
    smr_i64v_free(&ms);
  }
  smr_strv names = {0};
  smr_error err;
  smr_trial_tensor_names(t, &names, &err);
  printf("\n%-48s %8s  %s\n", "TENSOR", "STEPS", "FIRST..LAST");
  for (size_t i = 0; i < names.n; i++) {
    smr_i64v ts = {0};
    smr_trial_tensor_step_list(t, names.v[i], SMR_MODE_GLOBAL, false, &ts,
                               &err);
    if (ts.n)
      printf("%-48s %8zu  %" PRId64 "..%" PRId64 "\n", names.v[i], ts.n,
             ts.v[0], ts.v[ts.n - 1]);
    else
      printf("%-48s %8zu\n", names.v[i], ts.n);
    smr_i64v_free(&ts);
  }
  smr_strv cn = {0};
  smr_trial_collection_names(t, &cn);
  printf("\n%-24s %s\n", "COLLECTION", "MEMBERS");
  for (size_t i = 0; i < cn.n; i++) {
    smr_strv m = {0};
    smr_trial_collection_members(t, cn.v[i], NULL, &m, &err);
    printf("%-24s %zu\n", cn.v[i], m.n);
    smr_strv_free(&m);
  }
  if (smr_trial_collections_error(t))
    printf("collections: %s\n", smr_trial_collections_error(t));
  const smr_trial_problem *p;
  size_t np = smr_trial_problems(t, &p);
  for (size_t i = 0; i < np; i++)
    printf("problem: %s: %s\n", p[i].file, p[i].message);
  smr_strv_free(&cn);
  smr_strv_free(&names);
  smr_i64v_free(&steps);
}

int smr_cmd_inspect(int argc, char **argv) {
  static const struct option longopts[] = {COMMON_LONGOPTS, {0, 0, 0, 0}};
  trial_args a = {0};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "t:h", longopts, NULL)) != -1) {
    if (common_opt(&a, c))
      continue;
    if (c == 'h') {
      printf("usage: smrules inspect --trial DIR [--json] [--live]\n%s",
             COMMON_HELP);
      return SMR_EXIT_OK;
    }
    return SMR_EXIT_USAGE;
  }
  smr_trial *t;
  int rc = open_trial(&a, &t);
  if (rc)
    return rc;
  if (a.json) {
    char *s = inspect_json(t, a.trial);
    printf("%s\n", s);
    free(s);
  } else {
    inspect_table(t, a.trial);
  }
  smr_trial_close(t);
  return SMR_EXIT_OK;
}

/* -------------------------------------------------------------- tensor */

static bool fits_double_exactly(int64_t v) {
  return v >= -(INT64_C(1) << 53) && v <= (INT64_C(1) << 53);
}

/* One element, encoded like the fixtures: non-finite floats as strings,
 * integers beyond 2^53 as decimal strings, complex as [re, im]. */
static void jw_float_elem(smr_jw *w, double v) {
  if (isnan(v))
    smr_jw_str(w, "nan");
  else if (isinf(v))
    smr_jw_str(w, v > 0 ? "inf" : "-inf");
  else
    smr_jw_double(w, v);
}

static void jw_element(smr_jw *w, const smr_tensor *t, int64_t i) {
  const uint8_t *p = t->data + (size_t)i * smr_dtype_size(t->dtype);
  char tmp[32];
  switch (t->dtype) {
  case SMR_DT_STRING:
    smr_jw_strn(w, (const char *)t->strings[i], t->string_lens[i]);
    return;
  case SMR_DT_BOOL:
    smr_jw_bool(w, p[0] != 0);
    return;
  case SMR_DT_INT64: {
    int64_t v = (int64_t)smr_le64(p);
    if (fits_double_exactly(v)) {
      smr_jw_int(w, v);
    } else {
      snprintf(tmp, sizeof tmp, "%" PRId64, v);
      smr_jw_str(w, tmp);
    }
    return;
  }
  case SMR_DT_UINT64: {
    uint64_t v = smr_le64(p);
    if (v <= (UINT64_C(1) << 53)) {
      smr_jw_int(w, (int64_t)v);
    } else {
      snprintf(tmp, sizeof tmp, "%" PRIu64, v);
      smr_jw_str(w, tmp);
    }
    return;
  }
  case SMR_DT_COMPLEX64:
  case SMR_DT_COMPLEX128: {
    size_t half = smr_dtype_size(t->dtype) / 2;
    double re, im;
    if (half == 4) {
      float f[2];
      memcpy(f, p, sizeof f);
      re = f[0];
      im = f[1];
    } else {
      memcpy(&re, p, sizeof re);
      memcpy(&im, p + half, sizeof im);
    }
    smr_jw_arr(w);
    jw_float_elem(w, re);
    jw_float_elem(w, im);
    smr_jw_arr_end(w);
    return;
  }
  case SMR_DT_FLOAT:
  case SMR_DT_DOUBLE:
  case SMR_DT_HALF:
  case SMR_DT_BFLOAT16:
    jw_float_elem(w, smr_tensor_get(t, i));
    return;
  default:
    smr_jw_int(w, (int64_t)smr_tensor_get(t, i));
    return;
  }
}

typedef struct tensor_args {
  trial_args ta;
  const char *name, *worker, *reduction;
  int64_t step;
  int mode;
  bool values, abs, have_step;
} tensor_args;

static void jw_stats(smr_jw *w, const smr_stats *s) {
  smr_jw_key(w, "stats");
  smr_jw_obj(w);
  const char *keys[] = {"min", "max", "mean", "sum", "l2"};
  double vals[] = {s->min, s->max, s->mean, s->sum, s->l2};
  for (int i = 0; i < 5; i++) {
    smr_jw_key(w, keys[i]);
    if (s->has_finite)
      smr_jw_double(w, vals[i]);
    else
      smr_jw_null(w);
  }
  smr_jw_key(w, "nan");
  smr_jw_int(w, s->nan);
  smr_jw_key(w, "inf");
  smr_jw_int(w, s->pinf + s->ninf);
  smr_jw_key(w, "zeros");
  smr_jw_int(w, s->zeros);
  smr_jw_obj_end(w);
}

static void jw_error_shape(const smr_error *e, int ndim, const int64_t *shape);

static void jw_error(const smr_error *e) {
  jw_error_shape(e, -1, NULL);
}

/* The error object; with ndim >= 0 also the saved shape (a tensor whose
 * shape alone was saved at the step). */
static void jw_error_shape(const smr_error *e, int ndim, const int64_t *shape) {
  smr_jw w = {0};
  smr_jw_obj(&w);
  if (ndim >= 0) {
    smr_jw_key(&w, "shape");
    smr_jw_arr(&w);
    for (int i = 0; i < ndim; i++)
      smr_jw_int(&w, shape[i]);
    smr_jw_arr_end(&w);
  }
  smr_jw_key(&w, "error");
  smr_jw_obj(&w);
  smr_jw_key(&w, "status");
  smr_jw_str(&w, smr_status_name(e->status));
  smr_jw_key(&w, "file");
  smr_jw_str(&w, e->file[0] ? e->file : NULL);
  smr_jw_key(&w, "offset");
  if (e->offset >= 0)
    smr_jw_int(&w, e->offset);
  else
    smr_jw_null(&w);
  smr_jw_key(&w, "message");
  smr_jw_str(&w, e->msg);
  smr_jw_obj_end(&w);
  smr_jw_obj_end(&w);
  char *s = smr_jw_finish(&w);
  printf("%s\n", s);
  free(s);
}

static int fail(smr_trial *t, const tensor_args *a, int status,
                const smr_error *e) {
  smr_cli_print_error(e);
  int ndim = -1;
  int64_t shape[SMR_MAX_DIMS];
  smr_error serr;
  if (status == SMR_TENSOR_UNAVAILABLE_FOR_STEP &&
      smr_trial_shape(t, a->name, a->step, a->mode, a->worker, &ndim, shape,
                      &serr) != SMR_OK)
    ndim = -1;
  if (ndim >= 0 && !a->ta.json) {
    fprintf(stderr, "smrules: only the shape was saved: (");
    for (int i = 0; i < ndim; i++)
      fprintf(stderr, "%s%lld", i ? ", " : "", (long long)shape[i]);
    fprintf(stderr, ")\n");
  }
  if (a->ta.json)
    jw_error_shape(e, ndim, shape);
  return smr_cli_exit_for(status);
}

static void tensor_json(const tensor_args *a, const smr_tensor *v,
                        const smr_value_loc *loc, const smr_stats *st,
                        const double *red, bool red_saved) {
  smr_jw w = {0};
  char hex[65];
  smr_tensor_sha256(v, hex);
  smr_jw_obj(&w);
  smr_jw_key(&w, "name");
  smr_jw_str(&w, a->name);
  smr_jw_key(&w, "step");
  smr_jw_int(&w, loc->step);
  smr_jw_key(&w, "mode");
  smr_jw_str(&w, smr_mode_name(loc->mode));
  smr_jw_key(&w, "mode_step");
  smr_jw_int(&w, loc->mode_step);
  smr_jw_key(&w, "worker");
  smr_jw_str(&w, loc->worker);
  smr_jw_key(&w, "dtype");
  smr_jw_str(&w, smr_dtype_numpy_name(v->dtype));
  smr_jw_key(&w, "stored_dtype");
  smr_jw_str(&w, smr_dtype_tf_name(v->stored_dtype));
  smr_jw_key(&w, "shape");
  smr_jw_arr(&w);
  for (int i = 0; i < v->ndim; i++)
    smr_jw_int(&w, v->shape[i]);
  smr_jw_arr_end(&w);
  smr_jw_key(&w, "count");
  smr_jw_int(&w, v->count);
  if (st)
    jw_stats(&w, st);
  smr_jw_key(&w, "sha256");
  smr_jw_str(&w, hex);
  if (a->values) {
    smr_jw_key(&w, "values");
    smr_jw_arr(&w);
    for (int64_t i = 0; i < v->count; i++)
      jw_element(&w, v, i);
    smr_jw_arr_end(&w);
  }
  if (red) {
    smr_jw_key(&w, "reduction");
    smr_jw_obj(&w);
    smr_jw_key(&w, "name");
    smr_jw_str(&w, a->reduction);
    smr_jw_key(&w, "abs");
    smr_jw_bool(&w, a->abs);
    smr_jw_key(&w, "value");
    smr_jw_double(&w, *red);
    smr_jw_key(&w, "saved");
    smr_jw_bool(&w, red_saved);
    smr_jw_obj_end(&w);
  }
  smr_jw_obj_end(&w);
  char *s = smr_jw_finish(&w);
  printf("%s\n", s);
  free(s);
}

static void print_num(const char *label, double v, bool ok) {
  char tmp[40];
  if (ok)
    smr_fmt_double(v, tmp, sizeof tmp);
  printf("%-10s %s\n", label, ok ? tmp : "-");
}

static void tensor_table(const tensor_args *a, const smr_tensor *v,
                         const smr_value_loc *loc, const smr_stats *st,
                         const double *red, bool red_saved) {
  char hex[65];
  smr_tensor_sha256(v, hex);
  printf("%-10s %s\n", "tensor", a->name);
  printf("%-10s %" PRId64 " (%s step %" PRId64 "), worker %s\n", "step",
         loc->step, smr_mode_name(loc->mode), loc->mode_step, loc->worker);
  printf("%-10s %s (stored as %s)\n", "dtype", smr_dtype_numpy_name(v->dtype),
         smr_dtype_tf_name(v->stored_dtype));
  printf("%-10s (", "shape");
  for (int i = 0; i < v->ndim; i++)
    printf("%s%" PRId64, i ? ", " : "", v->shape[i]);
  printf("%s)  %" PRId64 " elements\n", v->ndim == 1 ? "," : "", v->count);
  if (st) {
    print_num("min", st->min, st->has_finite);
    print_num("max", st->max, st->has_finite);
    print_num("mean", st->mean, st->has_finite);
    print_num("sum", st->sum, st->has_finite);
    print_num("l2", st->l2, st->has_finite);
    printf("%-10s %" PRId64 " nan, %" PRId64 " inf, %" PRId64 " zero\n",
           "counts", st->nan, st->pinf + st->ninf, st->zeros);
  }
  printf("%-10s %s\n", "sha256", hex);
  if (red)
    printf("%-10s %s%s = %.17g (%s)\n", "reduction", a->abs ? "abs_" : "",
           a->reduction, *red, red_saved ? "saved" : "computed");
  if (a->values) {
    smr_jw w = {0};
    smr_jw_arr(&w);
    for (int64_t i = 0; i < v->count; i++)
      jw_element(&w, v, i);
    smr_jw_arr_end(&w);
    char *s = smr_jw_finish(&w);
    printf("%-10s %s\n", "values", s);
    free(s);
  }
}

static int parse_tensor_args(int argc, char **argv, tensor_args *a) {
  static const struct option longopts[] = {
      COMMON_LONGOPTS,
      {"name", required_argument, NULL, 'n'},
      {"step", required_argument, NULL, 's'},
      {"mode", required_argument, NULL, 'm'},
      {"worker", required_argument, NULL, 'w'},
      {"values", no_argument, NULL, 'v'},
      {"reduction", required_argument, NULL, 'r'},
      {"abs", no_argument, NULL, OPT_ABS},
      {0, 0, 0, 0}};
  a->mode = SMR_MODE_GLOBAL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "t:n:s:m:w:vr:h", longopts, NULL)) !=
         -1) {
    if (common_opt(&a->ta, c))
      continue;
    char *end;
    switch (c) {
    case 'n':
      a->name = optarg;
      break;
    case 's':
      a->step = strtoll(optarg, &end, 10);
      if (*end || end == optarg || a->step < 0) {
        fprintf(stderr, "smrules: --step needs a step number, got '%s'\n",
                optarg);
        return SMR_EXIT_USAGE;
      }
      a->have_step = true;
      break;
    case 'm':
      a->mode = smr_mode_from_name(optarg);
      if (!a->mode) {
        fprintf(stderr,
                "smrules: --mode is one of TRAIN, EVAL, PREDICT, "
                "GLOBAL; got '%s'\n",
                optarg);
        return SMR_EXIT_USAGE;
      }
      break;
    case 'w':
      a->worker = optarg;
      break;
    case 'v':
      a->values = true;
      break;
    case 'r':
      a->reduction = optarg;
      break;
    case OPT_ABS:
      a->abs = true;
      break;
    case 'h':
      printf("usage: smrules tensor --trial DIR --name NAME --step N "
             "[--mode MODE] [--worker W]\n"
             "                      [--values] [--reduction R [--abs]] "
             "[--json]\n%s"
             "  --name NAME      tensor name\n"
             "  --step N         global step; with --mode, the step of that "
             "mode\n"
             "  --mode MODE      TRAIN, EVAL, PREDICT or GLOBAL\n"
             "  --worker W       read this worker's value (default: the "
             "first worker name)\n"
             "  --values         print every element\n"
             "  --reduction R    min max mean std variance sum prod l1 l2 "
             "(saved one if present)\n"
             "  --abs            the reduction of the absolute values\n",
             COMMON_HELP);
      return -1;
    default:
      return SMR_EXIT_USAGE;
    }
  }
  if (!a->name || !a->have_step) {
    fprintf(stderr, "smrules: tensor needs --name and --step\n");
    return SMR_EXIT_USAGE;
  }
  if (a->reduction && smr_reduction_from_name(a->reduction) < 0) {
    fprintf(stderr, "smrules: unknown reduction '%s'\n", a->reduction);
    return SMR_EXIT_USAGE;
  }
  return SMR_EXIT_OK;
}

int smr_cmd_tensor(int argc, char **argv) {
  tensor_args a = {0};
  int rc = parse_tensor_args(argc, argv, &a);
  if (rc)
    return rc < 0 ? SMR_EXIT_OK : rc;
  smr_trial *t;
  if ((rc = open_trial(&a.ta, &t)))
    return rc;
  smr_error err;
  smr_error_clear(&err);
  smr_tensor v;
  smr_value_loc loc;
  double red = 0;
  bool red_saved = false;
  int st = SMR_OK;
  if (a.reduction)
    st = smr_trial_reduction(t, a.name, a.step, a.mode, a.worker,
                             smr_reduction_from_name(a.reduction), a.abs, &red,
                             &red_saved, &loc, &err);
  if (st == SMR_OK) {
    smr_value_loc vloc;
    smr_error verr;
    smr_error_clear(&verr);
    st = smr_trial_value(t, a.name, a.step, a.mode, a.worker, &v, &vloc, &verr);
    if (st == SMR_OK || !a.reduction) {
      loc = vloc;
      err = verr;
    } else if (st == SMR_TENSOR_UNAVAILABLE_FOR_STEP) {
      /* only the reduction was saved: report it without a value */
      memset(&v, 0, sizeof v);
      st = SMR_OK;
    } else {
      err = verr;
    }
  }
  if (st != SMR_OK) {
    rc = fail(t, &a, st, &err);
    smr_trial_close(t);
    return rc;
  }
  smr_stats stats;
  bool have_value = v.data || v.strings; /* not a reduction-only answer */
  bool have_stats = have_value && v.dtype != SMR_DT_STRING &&
                    smr_tensor_stats(&v, &stats, &err) == SMR_OK;
  if (a.ta.json)
    tensor_json(&a, &v, &loc, have_stats ? &stats : NULL,
                a.reduction ? &red : NULL, red_saved);
  else
    tensor_table(&a, &v, &loc, have_stats ? &stats : NULL,
                 a.reduction ? &red : NULL, red_saved);
  smr_tensor_release(&v);
  smr_trial_close(t);
  return SMR_EXIT_OK;
}
