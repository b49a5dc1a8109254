/* profkit.c - see profkit.h. */
#include "profkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fputs("smrules plugin: out of memory\n", stderr);
    abort();
  }
  return p;
}

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) {
    fputs("smrules plugin: out of memory\n", stderr);
    abort();
  }
  return p;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xmalloc(n), s, n);
}

/* ------------------------------------------------------------- vectors */

void pk_vec_push(pk_vec *v, double x) {
  if (v->n == v->cap) {
    v->cap = v->cap ? v->cap * 2 : 16;
    v->v = xrealloc(v->v, v->cap * sizeof *v->v);
  }
  v->v[v->n++] = x;
}

void pk_vec_free(pk_vec *v) {
  free(v->v);
  memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------- ordered dicts */

struct pk_dict {
  bool numeric;
  void (*free_ptr)(void *);
  pk_entry *e;
  size_t n, cap;
  size_t *slots; /* entry index + 1; 0 = empty */
  size_t nslots;
};

pk_dict *pk_dict_new(bool numeric, void (*free_ptr)(void *)) {
  pk_dict *d = calloc(1, sizeof *d);
  if (!d)
    abort();
  d->numeric = numeric;
  d->free_ptr = free_ptr;
  return d;
}

void pk_dict_clear(pk_dict *d) {
  for (size_t i = 0; i < d->n; i++) {
    free(d->e[i].key);
    if (d->free_ptr && d->e[i].ptr)
      d->free_ptr(d->e[i].ptr);
  }
  d->n = 0;
  if (d->slots)
    memset(d->slots, 0, d->nslots * sizeof *d->slots);
}

void pk_dict_free(pk_dict *d) {
  if (!d)
    return;
  pk_dict_clear(d);
  free(d->e);
  free(d->slots);
  free(d);
}

size_t pk_dict_len(const pk_dict *d) {
  return d ? d->n : 0;
}
pk_entry *pk_dict_at(pk_dict *d, size_t i) {
  return &d->e[i];
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static uint64_t hash_num(double v) {
  if (v == 0)
    v = 0; /* -0.0 and 0.0 are one key */
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  b ^= b >> 33;
  b *= 0xff51afd7ed558ccdull;
  b ^= b >> 33;
  return b;
}

static uint64_t hash_entry(const pk_dict *d, const pk_entry *e) {
  return d->numeric ? hash_num(e->nkey) : hash_str(e->key);
}

static void rehash(pk_dict *d) {
  size_t ns = d->nslots ? d->nslots * 2 : 16;
  free(d->slots);
  d->slots = calloc(ns, sizeof *d->slots);
  if (!d->slots)
    abort();
  d->nslots = ns;
  for (size_t i = 0; i < d->n; i++) {
    size_t k = hash_entry(d, &d->e[i]) & (ns - 1);
    while (d->slots[k])
      k = (k + 1) & (ns - 1);
    d->slots[k] = i + 1;
  }
}

/* The slot holding the key, or the empty slot where it would go. */
static size_t find_slot(const pk_dict *d, const char *key, double nkey) {
  uint64_t h = d->numeric ? hash_num(nkey) : hash_str(key);
  size_t k = h & (d->nslots - 1);
  while (d->slots[k]) {
    const pk_entry *e = &d->e[d->slots[k] - 1];
    if (d->numeric ? e->nkey == nkey : strcmp(e->key, key) == 0)
      return k;
    k = (k + 1) & (d->nslots - 1);
  }
  return k;
}

static pk_entry *lookup(pk_dict *d, const char *key, double nkey) {
  if (!d || !d->nslots)
    return NULL;
  size_t k = find_slot(d, key, nkey);
  return d->slots[k] ? &d->e[d->slots[k] - 1] : NULL;
}

pk_entry *pk_dict_get(pk_dict *d, const char *key) {
  return lookup(d, key, 0);
}

pk_entry *pk_dict_nget(pk_dict *d, double key) {
  return lookup(d, NULL, key);
}

static pk_entry *insert(pk_dict *d, const char *key, double nkey,
                        bool key_is_int, bool *created) {
  pk_entry *e = lookup(d, key, nkey);
  if (created)
    *created = e == NULL;
  if (e)
    return e;
  if ((d->n + 1) * 2 > d->nslots)
    rehash(d);
  if (d->n == d->cap) {
    d->cap = d->cap ? d->cap * 2 : 8;
    d->e = xrealloc(d->e, d->cap * sizeof *d->e);
  }
  e = &d->e[d->n];
  memset(e, 0, sizeof *e);
  if (d->numeric) {
    e->nkey = nkey; /* its text is made when first asked for */
    e->key_is_int = key_is_int;
  } else {
    e->key = xstrdup(key);
  }
  d->slots[find_slot(d, key, nkey)] = ++d->n;
  return e;
}

pk_entry *pk_dict_put(pk_dict *d, const char *key, bool *created) {
  return insert(d, key, 0, false, created);
}

pk_entry *pk_dict_nput(pk_dict *d, double key, bool key_is_int, bool *created) {
  return insert(d, NULL, key, key_is_int, created);
}

static void free_dict(void *p) {
  pk_dict_free(p);
}
static void free_vec(void *p) {
  pk_vec_free(p);
  free(p);
}

const char *pk_entry_key(pk_entry *e) {
  if (!e->key) {
    char buf[40];
    pk_py_str(e->nkey, e->key_is_int, buf, sizeof buf);
    e->key = xstrdup(buf);
  }
  return e->key;
}

pk_dict *pk_dict_sub(pk_dict *d, const char *key, bool numeric) {
  bool created;
  pk_entry *e = pk_dict_put(d, key, &created);
  if (created) {
    e->ptr = pk_dict_new(numeric, NULL);
    if (!d->free_ptr)
      d->free_ptr = free_dict;
  }
  return e->ptr;
}

pk_vec *pk_dict_vec(pk_dict *d, const char *key) {
  bool created;
  pk_entry *e = pk_dict_put(d, key, &created);
  if (created) {
    e->ptr = calloc(1, sizeof(pk_vec));
    if (!d->free_ptr)
      d->free_ptr = free_vec;
  }
  return e->ptr;
}

/* -------------------------------------------------------------- series */

static void series_free(void *p) {
  pk_series *s = p;
  pk_hist_free(&s->v);
  free(s->hist);
  free(s);
}

pk_dict *pk_series_dict(void) {
  return pk_dict_new(false, series_free);
}
pk_dict *pk_series_dict2(void) {
  return pk_dict_new(false, free_dict);
}

pk_series *pk_series_of(pk_dict *d, const char *key, int64_t keep) {
  bool created;
  pk_entry *e = pk_dict_put(d, key, &created);
  if (created) {
    pk_series *s = calloc(1, sizeof *s);
    if (!s)
      abort();
    pk_hist_keep(&s->v, keep);
    e->ptr = s;
  }
  return e->ptr;
}

pk_series *pk_series_of2(pk_dict *d2, const char *node, const char *key,
                         int64_t keep) {
  bool created;
  pk_entry *e = pk_dict_put(d2, node, &created);
  if (created)
    e->ptr = pk_series_dict();
  return pk_series_of(e->ptr, key, keep);
}

/* ------------------------------------------------------ report objects */

/* Report objects are objects of the JSON model (smrules/json.h), set as a
 * Python dict is: a key set again keeps its place. */
pk_obj *pk_obj_new(void) {
  return smr_json_obj_new();
}
void pk_obj_free(pk_obj *o) {
  smr_json_free(o);
}

pk_obj *pk_obj_obj(pk_obj *o, const char *key) {
  return smr_json_obj_at(o, key);
}

pk_obj *pk_obj_get(pk_obj *o, const char *key) {
  const smr_json *v = smr_json_get(o, key);
  /* o is ours to change, so is what it holds */
  return smr_json_is_obj(v) ? (pk_obj *)(uintptr_t)v : NULL;
}

pk_obj *pk_obj_new_obj(pk_obj *o, const char *key) {
  smr_json *v = smr_json_obj_new();
  smr_json_set(o, key, v);
  return v;
}

void pk_obj_num(pk_obj *o, const char *key, double v) {
  smr_json_set(o, key, smr_json_num(v));
}

void pk_obj_int(pk_obj *o, const char *key, int64_t v) {
  smr_json_set(o, key, smr_json_int(v));
}

void pk_obj_bool(pk_obj *o, const char *key, bool v) {
  smr_json_set(o, key, smr_json_bool(v));
}

void pk_obj_null(pk_obj *o, const char *key) {
  smr_json_set(o, key, smr_json_null());
}

void pk_obj_str(pk_obj *o, const char *key, const char *v) {
  smr_json_set(o, key, smr_json_str(v ? v : ""));
}

/* Whether v is written as an integer in an integer list (pk_text_num). */
static bool list_int(double v) {
  return isfinite(v) && fabs(v) < 9e18 && v == floor(v);
}

void pk_obj_list(pk_obj *o, const char *key, const double *v, size_t n,
                 bool ints) {
  bool all_int = true;
  for (size_t i = 0; ints && i < n; i++)
    all_int &= list_int(v[i]);
  smr_json *a = smr_json_arr_new();
  if (!ints || !all_int) {
    for (size_t i = 0; i < n; i++)
      smr_json_push(a, ints && list_int(v[i]) ? smr_json_int((int64_t)v[i])
                                              : smr_json_num(v[i]));
    smr_json_set(o, key, a);
    return;
  }
  smr_json_free(a);
  int64_t *iv = xmalloc((n ? n : 1) * sizeof *iv);
  for (size_t i = 0; i < n; i++)
    iv[i] = (int64_t)v[i];
  smr_json_set(o, key, smr_json_ints(iv, n));
  free(iv);
}

void pk_obj_raw(pk_obj *o, const char *key, const char *json) {
  const smr_json *v = smr_json_get(o, key);
  if (!json && smr_json_type_of(v) == SMR_JSON_RAW)
    return; /* a placeholder keeps what it holds */
  smr_json_set(o, key, smr_json_raw(json)); /* NULL: null, its place */
}

void pk_obj_raw_take(pk_obj *o, const char *key, char *json) {
  pk_obj_raw(o, key, json);
  free(json);
}

void pk_obj_del(pk_obj *o, const char *key) {
  smr_json_del(o, key);
}

bool pk_obj_has(pk_obj *o, const char *key) {
  return smr_json_get(o, key) != NULL;
}

void pk_py_str(double v, bool is_int, char *buf, size_t n) {
  rk_api->py_str(v, is_int, buf, n);
}

void pk_text_num(rk_text *t, double v, bool is_int) {
  if (!isfinite(v)) {
    rk_text_printf(t, "null");
    return;
  }
  char b[48];
  pk_py_str(v, is_int && fabs(v) < 9e18 && v == floor(v), b, sizeof b);
  rk_text_printf(t, "%s", b);
}

void pk_text_str(rk_text *t, const char *s) {
  rk_text_printf(t, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      rk_text_printf(t, "\\%c", *p);
    else if (*p < 0x20)
      rk_text_printf(t, "\\u%04x", *p);
    else
      rk_text_printf(t, "%c", *p);
  }
  rk_text_printf(t, "\"");
}

char *pk_obj_render(pk_obj *o) {
  return smr_json_text(o, SMR_JSON_COMPACT);
}

void pk_obj_write(pk_obj *o, smrules_json *j) {
  for (size_t i = 0; i < smr_json_len(o); i++) {
    const smr_json *m = smr_json_at(o, i);
    char *s = smr_json_text(m, SMR_JSON_COMPACT);
    rk_api->json_raw(j, smr_json_key(m), s);
    free(s);
  }
}

/* -------------------------------------------------------- NumPy numbers */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double *pk_sorted_copy(const double *x, size_t n) {
  double *s = xmalloc(n * sizeof *s);
  if (n)
    memcpy(s, x, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_double);
  return s;
}

void pk_sort(double *x, size_t n) {
  qsort(x, n, sizeof *x, cmp_double);
}

double *pk_hist_sorted(const pk_hist *h, size_t n, double *max) {
  double *s = pk_hist_copy(h, 0, n); /* sorted in place: one copy at most */
  if (max)
    *max = pk_np_max(s, n);
  pk_sort(s, n);
  return s;
}

/* NumPy >= 1.22 "linear": virtual index (n-1)*q, and _lerp computes
 * b - (b-a)*(1-t) when t >= 0.5 (a + (b-a)*t otherwise). */
double pk_quantile(const double *x, size_t n, double q) {
  for (size_t i = 0; i < n; i++)
    if (isnan(x[i]))
      return NAN;
  if (n == 0)
    return NAN;
  double *s = pk_sorted_copy(x, n);
  double r = np_quantile_sorted(s, n, q);
  free(s);
  return r;
}

double pk_np_sum(const double *x, size_t n) {
  return 0.0 + np_pairwise_sum(x, n);
}

double pk_np_mean(const double *x, size_t n) {
  return n ? pk_np_sum(x, n) / (double)n : NAN;
}

double pk_np_max(const double *x, size_t n) {
  if (!n)
    return NAN;
  double m = x[0];
  for (size_t i = 0; i < n; i++) {
    if (isnan(x[i]))
      return NAN;
    if (x[i] > m)
      m = x[i];
  }
  return m;
}

double pk_np_min(const double *x, size_t n) {
  if (!n)
    return NAN;
  double m = x[0];
  for (size_t i = 0; i < n; i++) {
    if (isnan(x[i]))
      return NAN;
    if (x[i] < m)
      m = x[i];
  }
  return m;
}

double pk_np_std(const double *x, size_t n) {
  if (!n)
    return NAN;
  double mean = pk_np_sum(x, n) / (double)n;
  double *d = xmalloc(n * sizeof *d);
  for (size_t i = 0; i < n; i++) {
    double v = x[i] - mean;
    d[i] = v * v;
  }
  double var = pk_np_sum(d, n) / (double)n;
  free(d);
  return sqrt(var);
}

double pk_np_round(double v, int decimals) {
  double f = pow(10.0, decimals);
  return rint(v * f) / f;
}

/* Bin of x among edges (edges[i] <= x < edges[i+1], the last one closed),
 * or -1 outside. */
static long bin_of(double x, const double *edges, size_t nedges) {
  if (!(x >= edges[0] && x <= edges[nedges - 1]))
    return -1;
  size_t lo = 0, hi = nedges - 1; /* x in [edges[lo], edges[hi]] */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (x >= edges[mid])
      lo = mid;
    else
      hi = mid;
  }
  return (long)lo;
}

void pk_histogram_edges(const double *x, size_t n, const double *edges,
                        size_t nedges, int64_t *counts) {
  if (nedges < 2)
    return;
  memset(counts, 0, (nedges - 1) * sizeof *counts);
  for (size_t i = 0; i < n; i++) {
    long b = bin_of(x[i], edges, nedges);
    if (b >= 0)
      counts[b]++;
  }
}

void pk_histogram_bins(const double *x, size_t n, size_t bins, int64_t *counts,
                       double *edges) {
  double lo = 0, hi = 1;
  if (n) {
    lo = pk_np_min(x, n);
    hi = pk_np_max(x, n);
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
  }
  double step = (hi - lo) / (double)bins; /* np.linspace */
  for (size_t i = 0; i <= bins; i++)
    edges[i] = (double)i * step + lo;
  edges[bins] = hi;
  pk_histogram_edges(x, n, edges, bins + 1, counts);
}

size_t pk_tail_start(size_t n, int64_t w) {
  if (w <= 0)
    return 0; /* x[-0:] is the whole list */
  return (uint64_t)w >= n ? 0 : n - (size_t)w;
}

double pk_py_sum(const double *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += x[i];
  return s;
}

/* ---------------------------------------------------------- rule side */

bool pk_window(smrules_ctx *ctx, int64_t *index, int64_t *start_us,
               int64_t *end_us) {
  return rk_api->window(ctx, index, start_us, end_us) == SMRULES_NO_TRIGGER;
}

void pk_param_str(double v, bool set, char *buf, size_t n) {
  if (!set)
    snprintf(buf, n, "None");
  else if (v == floor(v) && fabs(v) < 1e16)
    snprintf(buf, n, "%lld", (long long)v);
  else
    pk_py_str(v, false, buf, n);
}

int pk_fw_events(pk_fw_source *src, const smrules_fw_event **ev, size_t *n) {
  if (src->has_given) {
    *ev = src->given;
    *n = src->ngiven;
    return SMRULES_NO_TRIGGER;
  }
  if (!src->fetched) {
    int rc = rk_api->framework_events(src->ctx, src->start_us, src->end_us,
                                      &src->ev, &src->n);
    if (rc != SMRULES_NO_TRIGGER)
      return rc;
    src->fetched = true;
  }
  *ev = src->ev;
  *n = src->n;
  return SMRULES_NO_TRIGGER;
}
