/* cli_tensor.c - `smrules tensor`: one tensor at one step (or a scalar
 * over every step), with statistics, as a table, CSV or JSON. */
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "base/suggest.h"
#include "cli/cli.h"
#include "cli/cli_trial.h"
#include "cli/cli_values.h"
#include "format/index.h"
#include "format/mode.h"
#include "format/tensor.h"

enum { OPT_ABS = OPT_TRIAL_LAST, OPT_STEPS, OPT_CSV, OPT_ALL_VALUES };

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
  smr_trial_args ta;
  const char *name, *worker, *reduction;
  int64_t step;
  int mode;
  bool values, abs, have_step;
  bool all_values; /* --all-values: no summary */
  bool all_steps;  /* --steps all: a scalar over every step */
  bool csv;
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

/* Add to e's message, as far as it fits. */
static void append(smr_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void append(smr_error *e, const char *fmt, ...) {
  size_t used = strlen(e->msg);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg + used, sizeof e->msg - used, fmt, ap);
  va_end(ap);
}

/* A name never saved: the nearest saved name. */
static void suggest_name(smr_trial *t, const char *name, smr_error *e) {
  smr_strv names = {0};
  smr_error err;
  if (smr_trial_tensor_names(t, &names, &err) == SMR_OK) {
    const char *near = smr_suggest(name, (const char *const *)names.v, names.n);
    if (near)
      append(e, "; did you mean '%s'?", near);
    else if (names.n)
      append(e, " ('smrules inspect' lists its %zu tensors)", names.n);
  }
  smr_strv_free(&names);
}

/* A step without the tensor: the saved steps nearest to it (in the mode
 * asked for). */
static void nearest_steps(smr_trial *t, const tensor_args *a, smr_error *e) {
  smr_i64v steps = {0};
  smr_error err;
  if (smr_trial_tensor_step_list(t, a->name, a->mode, false, &steps, &err) !=
          SMR_OK ||
      steps.n == 0) {
    smr_i64v_free(&steps);
    return;
  }
  int64_t before = -1, after = -1;
  for (size_t i = 0; i < steps.n; i++) {
    if (steps.v[i] < a->step)
      before = steps.v[i];
    else if (steps.v[i] > a->step && after < 0)
      after = steps.v[i];
  }
  const char *mode = a->mode == SMR_MODE_GLOBAL ? "" : smr_mode_name(a->mode);
  append(e, "; nearest saved %s%ssteps: ", mode, *mode ? " " : "");
  if (before >= 0)
    append(e, "%" PRId64 "%s", before, after >= 0 ? " and " : "");
  if (after >= 0)
    append(e, "%" PRId64, after);
  append(e, " (%zu saved, %" PRId64 "..%" PRId64 ")", steps.n, steps.v[0],
         steps.v[steps.n - 1]);
  smr_i64v_free(&steps);
}

static int fail(smr_trial *t, const tensor_args *a, int status,
                const smr_error *given) {
  smr_error explained = *given, *e = &explained;
  if (status == SMR_TENSOR_UNAVAILABLE)
    suggest_name(t, a->name, e);
  else if (status == SMR_TENSOR_UNAVAILABLE_FOR_STEP ||
           status == SMR_STEP_UNAVAILABLE || status == SMR_NO_MORE_DATA ||
           status == SMR_STEP_NOT_YET)
    nearest_steps(t, a, e);
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
    smr_cli_jw_error_shape(e, ndim, shape);
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
    printf("values\n");
    smr_cli_print_values(v, a->all_values);
    printf("\n");
  }
}

/* ---- --steps all: one scalar (a value of one element, or a reduction)
 * per saved step ---- */
typedef struct series_row {
  int64_t step, mode_step;
  int mode;
  double value;
} series_row;

/* The scalar at one step; an error (printed by the caller) otherwise. */
static int scalar_at(smr_trial *t, const tensor_args *a, int64_t step,
                     series_row *row, smr_error *err) {
  smr_value_loc loc = {.step = step, .mode = a->mode, .mode_step = -1};
  int st;
  if (a->reduction) {
    bool saved;
    st = smr_trial_reduction(t, a->name, step, a->mode, a->worker,
                             smr_reduction_from_name(a->reduction), a->abs,
                             &row->value, &saved, &loc, err);
  } else {
    smr_tensor v;
    st = smr_trial_value(t, a->name, step, a->mode, a->worker, &v, &loc, err);
    bool got = st == SMR_OK;
    if (st == SMR_OK && (v.count != 1 || v.dtype == SMR_DT_STRING))
      st = smr_error_set(err, SMR_ERR_USAGE, "", -1,
                         "'%s' is not a number at step %" PRId64 " (%" PRId64
                         " elements): add --reduction R",
                         a->name, loc.step, v.count);
    else if (st == SMR_OK)
      row->value = smr_tensor_get(&v, 0);
    if (got)
      smr_tensor_release(&v);
  }
  row->step = loc.step;
  row->mode = loc.mode;
  row->mode_step = loc.mode_step;
  return st;
}

static void series_print(const tensor_args *a, const series_row *rows,
                         size_t n) {
  char num[40];
  if (a->ta.json) {
    smr_jw w = {0};
    smr_jw_obj(&w);
    smr_jw_key(&w, "name");
    smr_jw_str(&w, a->name);
    smr_jw_key(&w, "reduction");
    smr_jw_str(&w, a->reduction);
    smr_jw_key(&w, "abs");
    smr_jw_bool(&w, a->abs);
    smr_jw_key(&w, "steps");
    smr_jw_arr(&w);
    for (size_t i = 0; i < n; i++) {
      smr_jw_obj(&w);
      smr_jw_key(&w, "step");
      smr_jw_int(&w, rows[i].step);
      smr_jw_key(&w, "mode");
      smr_jw_str(&w, smr_mode_name(rows[i].mode));
      smr_jw_key(&w, "mode_step");
      smr_jw_int(&w, rows[i].mode_step);
      smr_jw_key(&w, "value");
      jw_float_elem(&w, rows[i].value);
      smr_jw_obj_end(&w);
    }
    smr_jw_arr_end(&w);
    smr_jw_obj_end(&w);
    char *text = smr_jw_finish(&w);
    printf("%s\n", text);
    free(text);
    return;
  }
  if (a->csv)
    printf("step,mode,mode_step,value\n");
  else
    printf("%8s  %-7s  %9s  %s%s%s\n", "STEP", "MODE", "MODE_STEP",
           a->reduction && a->abs ? "abs_" : "",
           a->reduction ? a->reduction : "VALUE", "");
  for (size_t i = 0; i < n; i++) {
    if (a->csv) { /* every digit: for a spreadsheet or pandas */
      smr_fmt_double(rows[i].value, num, sizeof num);
      printf("%" PRId64 ",%s,%" PRId64 ",%s\n", rows[i].step,
             smr_mode_name(rows[i].mode), rows[i].mode_step, num);
    } else {
      double d = fabs(rows[i].value);
      smr_cli_float_text(rows[i].value, d >= 1e8 || (d > 0 && d < 1e-4), num,
                         sizeof num);
      printf("%8" PRId64 "  %-7s  %9" PRId64 "  %s\n", rows[i].step,
             smr_mode_name(rows[i].mode), rows[i].mode_step, num);
    }
  }
}

static int print_series(smr_trial *t, const tensor_args *a) {
  smr_error err;
  smr_error_clear(&err);
  smr_i64v steps = {0};
  int st = smr_trial_tensor_step_list(t, a->name, a->mode, false, &steps, &err);
  if (st != SMR_OK) {
    int rc = fail(t, a, st, &err);
    smr_i64v_free(&steps);
    return rc;
  }
  series_row *rows = smr_xcalloc(steps.n ? steps.n : 1, sizeof *rows);
  size_t n = 0;
  int rc = SMR_EXIT_OK;
  for (size_t i = 0; i < steps.n; i++) {
    smr_error_clear(&err);
    st = scalar_at(t, a, steps.v[i], &rows[n], &err);
    if (st == SMR_OK) {
      n++;
      continue;
    }
    smr_cli_print_error(&err); /* the other steps are still printed */
    if (st == SMR_ERR_USAGE) {
      rc = SMR_EXIT_USAGE;
      n = 0;
      break;
    }
    rc = rc ? rc : smr_cli_exit_for(st);
  }
  if (n || rc == SMR_EXIT_OK)
    series_print(a, rows, n);
  free(rows);
  smr_i64v_free(&steps);
  return rc;
}

static int parse_tensor_args(int argc, char **argv, tensor_args *a) {
  static const struct option longopts[] = {
      SMR_TRIAL_LONGOPTS,
      {"name", required_argument, NULL, 'n'},
      {"step", required_argument, NULL, 's'},
      {"mode", required_argument, NULL, 'm'},
      {"worker", required_argument, NULL, 'w'},
      {"values", no_argument, NULL, 'v'},
      {"all-values", no_argument, NULL, OPT_ALL_VALUES},
      {"steps", required_argument, NULL, OPT_STEPS},
      {"csv", no_argument, NULL, OPT_CSV},
      {"reduction", required_argument, NULL, 'r'},
      {"abs", no_argument, NULL, OPT_ABS},
      {0, 0, 0, 0}};
  a->mode = SMR_MODE_GLOBAL;
  int c;
  optind = 1;
  opterr = 0; /* smr_cli_bad_option says it, with a suggestion */
  while ((c = getopt_long(argc, argv, ":t:n:s:m:w:vr:h", longopts, NULL)) !=
         -1) {
    if (smr_cli_trial_opt(&a->ta, c))
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
    case 'm': {
      char upper[16]; /* TRAIN, train and Train alike */
      size_t i = 0;
      for (; optarg[i] && i + 1 < sizeof upper; i++)
        upper[i] = (char)toupper((unsigned char)optarg[i]);
      upper[i] = '\0';
      a->mode = optarg[i] ? 0 : smr_mode_from_name(upper);
      if (!a->mode) {
        fprintf(stderr,
                "smrules: --mode is one of TRAIN, EVAL, PREDICT, "
                "GLOBAL; got '%s'\n",
                optarg);
        return SMR_EXIT_USAGE;
      }
      break;
    }
    case 'w':
      a->worker = optarg;
      break;
    case 'v':
      a->values = true;
      break;
    case OPT_ALL_VALUES:
      a->values = a->all_values = true;
      break;
    case OPT_STEPS:
      if (strcmp(optarg, "all") != 0) {
        fprintf(stderr,
                "smrules: --steps takes 'all' (for one step: --step "
                "N), got '%s'\n",
                optarg);
        return SMR_EXIT_USAGE;
      }
      a->all_steps = true;
      break;
    case OPT_CSV:
      a->csv = true;
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
             "                      [--values | --all-values] [--reduction R "
             "[--abs]] [--json]\n"
             "       smrules tensor --trial DIR --name NAME --steps all "
             "[--mode MODE]\n"
             "                      [--reduction R [--abs]] [--csv | "
             "--json]\n%s"
             "  --name NAME      tensor name (a name never saved gets the "
             "nearest one)\n"
             "  --step N         global step; with --mode, the step of that "
             "mode\n"
             "  --steps all      every saved step of a scalar (or of its "
             "--reduction),\n"
             "                   as a table, or CSV with --csv\n"
             "  --mode MODE      TRAIN, EVAL, PREDICT or GLOBAL (any case)\n"
             "  --worker W       read this worker's value (default: the "
             "first worker name)\n"
             "  --values         print the elements as NumPy does (over "
             "1,000: the first\n"
             "                   and last 3 of each axis; --json has every "
             "one)\n"
             "  --all-values     print every element\n"
             "  --reduction R    min max mean std variance sum prod l1 l2 "
             "(saved one if present)\n"
             "  --abs            the reduction of the absolute values\n"
             "  --csv            with --steps all: step,mode,mode_step,value\n",
             SMR_TRIAL_HELP);
      return -1;
    default:
      return smr_cli_bad_option("tensor", argv, "tnsmwvrh", longopts);
    }
  }
  if (!a->name || a->have_step == a->all_steps) {
    fprintf(stderr, "smrules: tensor needs --name and either --step N or "
                    "--steps all\n");
    return SMR_EXIT_USAGE;
  }
  if (a->csv && (!a->all_steps || a->ta.json)) {
    fprintf(stderr, "smrules: --csv goes with --steps all, not --json\n");
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
  if ((rc = smr_cli_open_trial(&a.ta, &t)))
    return rc;
  if (a.all_steps) {
    rc = print_series(t, &a);
    smr_cli_close_trial(&a.ta, t);
    return rc;
  }
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
    smr_cli_close_trial(&a.ta, t);
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
  smr_cli_close_trial(&a.ta, t);
  return SMR_EXIT_OK;
}
