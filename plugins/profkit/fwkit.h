/* fwkit.h - helpers of the framework-metric profiler rules (Dataloader,
 * MaxInitializationTime, OverallFrameworkMetrics, StepOutlier) and of
 * ProfilerReport: NumPy-exact statistics
 * (docs/rule-semantics.md#numeric-conventions), an ordered string map, and the
 * framework-metric breakdown of
 * docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown
 * (aggregate_framework_metrics) with its Details writer.
 *
 * Header-only (every function static inline): each file that uses it
 * compiles its own copy.  Uses only the smrules_api table handed in by the
 * caller, never rk_api: the engines of plugins/engines/fw_*.c run bound to
 * ProfilerReport's own table as well as to the host's. */
#ifndef FWKIT_H
#define FWKIT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npmath.h"
#include "smrules/smrules.h"

static inline void *fk_xrealloc(void *p, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size)
    abort();
  size_t bytes = n * size;
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q)
    abort(); /* out of memory: nothing sensible to continue with */
  return q;
}

static inline char *fk_strdup(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d)
    abort();
  return d;
}

/* ---------------------------------------------------------- double list */
typedef struct fk_dv {
  double *v;
  size_t n, cap;
} fk_dv;

static inline void fk_dv_push(fk_dv *d, double x) {
  if (d->n == d->cap) {
    d->cap = d->cap ? 2 * d->cap : 16;
    d->v = fk_xrealloc(d->v, d->cap, sizeof *d->v);
  }
  d->v[d->n++] = x;
}

static inline void fk_dv_free(fk_dv *d) {
  free(d->v);
  memset(d, 0, sizeof *d);
}

/* ------------------------------------------------- ordered string map
 * Keys in insertion order (Python dict order); lookup through an
 * open-addressing hash of indices.  Callers keep values in arrays indexed
 * like the keys. */
typedef struct fk_map {
  char **keys;
  size_t n, cap;
  size_t *slots; /* index + 1, 0 = empty */
  size_t nslots;
} fk_map;

static inline uint64_t fk_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static inline void fk_map_rehash(fk_map *m) {
  free(m->slots);
  m->nslots = m->nslots ? 2 * m->nslots : 16;
  m->slots = calloc(m->nslots, sizeof *m->slots);
  if (!m->slots)
    abort();
  for (size_t i = 0; i < m->n; i++) {
    size_t s = fk_hash(m->keys[i]) & (m->nslots - 1);
    while (m->slots[s])
      s = (s + 1) & (m->nslots - 1);
    m->slots[s] = i + 1;
  }
}

/* Index of key, or -1. */
static inline long fk_map_find(const fk_map *m, const char *key) {
  if (!m->nslots)
    return -1;
  for (size_t s = fk_hash(key) & (m->nslots - 1); m->slots[s];
       s = (s + 1) & (m->nslots - 1))
    if (strcmp(m->keys[m->slots[s] - 1], key) == 0)
      return (long)(m->slots[s] - 1);
  return -1;
}

/* Index of key, added at the end when new (*added set accordingly). */
static inline size_t fk_map_add(fk_map *m, const char *key, bool *added) {
  long i = fk_map_find(m, key);
  if (added)
    *added = i < 0;
  if (i >= 0)
    return (size_t)i;
  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 8;
    m->keys = fk_xrealloc(m->keys, m->cap, sizeof *m->keys);
  }
  m->keys[m->n++] = fk_strdup(key);
  if (2 * m->n > m->nslots)
    fk_map_rehash(m);
  else {
    size_t s = fk_hash(key) & (m->nslots - 1);
    while (m->slots[s])
      s = (s + 1) & (m->nslots - 1);
    m->slots[s] = m->n;
  }
  return m->n - 1;
}

static inline void fk_map_free(fk_map *m) {
  for (size_t i = 0; i < m->n; i++)
    free(m->keys[i]);
  free(m->keys);
  free(m->slots);
  memset(m, 0, sizeof *m);
}

/* Remove every key (keeps nothing). */
static inline void fk_map_clear(fk_map *m) {
  fk_map_free(m);
}

/* ------------------------------------------------ NumPy-exact statistics */

/* np.mean (n > 0). */
static inline double fk_mean(const double *a, size_t n) {
  return np_pairwise_sum(a, n) / (double)n;
}

/* np.std, population (n > 0). */
static inline double fk_std(const double *a, size_t n) {
  double m = fk_mean(a, n);
  double *d = fk_xrealloc(NULL, n, sizeof *d);
  for (size_t i = 0; i < n; i++)
    d[i] = (a[i] - m) * (a[i] - m);
  double v = np_pairwise_sum(d, n) / (double)n;
  free(d);
  return sqrt(v);
}

static inline int fk_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A sorted copy (free() it); NaN-free input assumed by the callers' data. */
static inline double *fk_sorted(const double *a, size_t n) {
  double *s = fk_xrealloc(NULL, n, sizeof *s);
  if (n)
    memcpy(s, a, n * sizeof *a);
  qsort(s, n, sizeof *s, fk_cmp_double);
  return s;
}

/* np.percentile(x, p) of sorted x: q = p / 100. */
static inline double fk_percentile_sorted(const double *s, size_t n, double p) {
  return np_quantile_sorted(s, n, p / 100.0);
}

/* np.round(v, 2). */
static inline double fk_round2(double v) {
  return rint(v * 100.0) / 100.0;
}

/* np.histogram(x, bins=B): counts[B], edges[B + 1]
 * (docs/rule-semantics.md#numeric-conventions). */
static inline void fk_histogram(const double *x, size_t n, size_t B,
                                int64_t *counts, double *edges) {
  double lo = 0, hi = 1;
  if (n) {
    lo = hi = x[0];
    for (size_t i = 1; i < n; i++) {
      if (x[i] < lo)
        lo = x[i];
      if (x[i] > hi)
        hi = x[i];
    }
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
  }
  double step = (hi - lo) / (double)B;
  for (size_t i = 0; i <= B; i++)
    edges[i] = (double)i * step + lo;
  edges[B] = hi;
  memset(counts, 0, B * sizeof *counts);
  double norm = (double)B / (hi - lo);
  for (size_t k = 0; k < n; k++) {
    double v = x[k];
    if (!(v >= lo && v <= hi))
      continue;
    long i = (long)((v - lo) * norm);
    if (i >= (long)B)
      i = (long)B - 1;
    if (i < 0)
      i = 0;
    if (v < edges[i] && i > 0)
      i--;
    else if (v >= edges[i + 1] && i != (long)B - 1)
      i++;
    counts[i]++;
  }
}

/* A percentage as the reference computes it. */
#define FK_PCT(part, total) ((part) / (total)*100)

/* ---------------------------------------
 * docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown: the
 * breakdown Seven accumulators of framework-event time, each an ordered map to
 * µs; cpu/gpu map a phase to an ordered map of operator names. */
typedef struct fk_named {
  fk_map keys;
  double *us; /* per key */
} fk_named;

static inline void fk_named_add(fk_named *m, const char *key, double us) {
  bool added;
  size_t i = fk_map_add(&m->keys, key, &added);
  if (added) {
    m->us = fk_xrealloc(m->us, m->keys.cap, sizeof *m->us);
    m->us[i] = 0;
  }
  m->us[i] += us;
}

static inline double fk_named_sum(const fk_named *m) {
  double s = 0;
  for (size_t i = 0; i < m->keys.n; i++)
    s += m->us[i];
  return s;
}

static inline void fk_named_free(fk_named *m) {
  fk_map_free(&m->keys);
  free(m->us);
  m->us = NULL;
}

typedef struct fk_phased {
  fk_map phases;
  fk_named *ops; /* per phase */
} fk_phased;

static inline void fk_phased_add(fk_phased *p, const char *phase,
                                 const char *name, double us) {
  bool added;
  size_t i = fk_map_add(&p->phases, phase, &added);
  if (added) {
    p->ops = fk_xrealloc(p->ops, p->phases.cap, sizeof *p->ops);
    memset(&p->ops[i], 0, sizeof p->ops[i]);
  }
  fk_named_add(&p->ops[i], name, us);
}

static inline void fk_phased_free(fk_phased *p) {
  for (size_t i = 0; i < p->phases.n; i++)
    fk_named_free(&p->ops[i]);
  free(p->ops);
  fk_map_free(&p->phases);
}

typedef struct fk_breakdown {
  fk_phased cpu, gpu;
  fk_named step_phases, phase_durations, forward, backward, horovod;
} fk_breakdown;

static inline void fk_breakdown_free(fk_breakdown *b) {
  fk_phased_free(&b->cpu);
  fk_phased_free(&b->gpu);
  fk_named_free(&b->step_phases);
  fk_named_free(&b->phase_durations);
  fk_named_free(&b->forward);
  fk_named_free(&b->backward);
  fk_named_free(&b->horovod);
}

static inline bool fk_contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0)
      return true;
  return false;
}

/* Branches 1-7 of the
 * docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown
 * classification; returns the branch taken. */
static inline int fk_classify(fk_breakdown *b, const smrules_fw_event *e) {
  double us = e->end_us - e->start_us;
  if (fk_contains_ci(e->phase, "cpu")) {
    fk_phased_add(&b->cpu, e->phase, e->name, us);
    return 1;
  }
  if (fk_contains_ci(e->phase, "gpu")) {
    fk_phased_add(&b->gpu, e->phase, e->name, us);
    return 2;
  }
  if (strstr(e->phase, "Step")) {
    fk_named_add(&b->step_phases, e->phase, us);
    return 3;
  }
  if (strcmp(e->phase, "Forward-SubModuleInternal") == 0) {
    fk_named_add(&b->forward, e->name, us);
    return 4;
  }
  if (strcmp(e->phase, "Backward-SubModuleInternal") == 0) {
    fk_named_add(&b->backward, e->name, us);
    return 5;
  }
  if (!strstr(e->phase, ":CPU") && !strstr(e->phase, ":GPU") &&
      e->file_type[0]) {
    fk_named_add(&b->phase_durations, e->phase, e->duration_us);
    return 6;
  }
  if (!e->file_type[0]) {
    fk_named_add(&b->horovod, e->name, us);
    return 7;
  }
  return 0;
}

/* aggregate_framework_metrics' event filter: with has_end, events with
 * end >= begin and start <= end; without, start < begin < end. */
static inline bool fk_event_used(const smrules_fw_event *e, double begin,
                                 bool has_end, double end) {
  if (has_end)
    return e->end_us >= begin && e->start_us <= end;
  return e->start_us < begin && begin < e->end_us;
}

/* A µs total as Python would have it: an int when integral (event times
 * are integers in smdebug's traces). */
static inline void fk_json_us(const smrules_api *api, smrules_json *j,
                              const char *key, double us) {
  if (us == floor(us) && fabs(us) < 9007199254740992.0)
    api->json_int(j, key, (int64_t)us);
  else
    api->json_num(j, key, us);
}

/* filter(events, 2) of
 * docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown written
 * as Details[pct_key] (percent) and Details[total_key] (µs): operator time
 * summed over phases (first-seen order), kept when its share > 2 %, kept shares
 * re-normalised. */
static inline void fk_write_ops(const smrules_api *api, smrules_json *d,
                                const fk_phased *p, const char *pct_key,
                                const char *total_key) {
  fk_named all = {0};
  for (size_t i = 0; i < p->phases.n; i++)
    for (size_t k = 0; k < p->ops[i].keys.n; k++)
      fk_named_add(&all, p->ops[i].keys.keys[k], p->ops[i].us[k]);
  double total = fk_named_sum(&all), kept = 0;
  if (total == 0) { /* the reference divides by zero: skip (Decision) */
    fk_named_free(&all);
    return;
  }
  for (size_t k = 0; k < all.keys.n; k++)
    if (FK_PCT(all.us[k], total) > 2)
      kept += FK_PCT(all.us[k], total);
  smrules_json *pct = api->json_obj(d, pct_key);
  for (size_t k = 0; k < all.keys.n; k++)
    if (FK_PCT(all.us[k], total) > 2)
      api->json_num(pct, all.keys.keys[k],
                    FK_PCT(FK_PCT(all.us[k], total), kept));
  smrules_json *tot = api->json_obj(d, total_key);
  for (size_t k = 0; k < all.keys.n; k++)
    if (FK_PCT(all.us[k], total) > 2)
      fk_json_us(api, tot, all.keys.keys[k], all.us[k]);
  fk_named_free(&all);
}

/* Details[key][name] = 100 * us / Σ us (skipped when Σ is 0). */
static inline void fk_write_shares(const smrules_api *api, smrules_json *d,
                                   const char *key, const fk_named *m) {
  double total = fk_named_sum(m);
  smrules_json *o = api->json_obj(d, key);
  if (total == 0)
    return;
  for (size_t i = 0; i < m->keys.n; i++)
    api->json_num(o, m->keys.keys[i], FK_PCT(m->us[i], total));
}

/* ratio: 100 * total / Σ over the CPU and GPU phases.  `quirk`
 * (docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown):
 * labels are CPU phases then GPU phases while the totals are GPU then
 * CPU; OverallFrameworkMetrics
 * (docs/profiler-framework-rules.md#overallframeworkmetrics) labels and totals
 * both GPU then CPU. */
static inline void fk_write_ratio(const smrules_api *api, smrules_json *d,
                                  const fk_breakdown *b, bool quirk) {
  size_t nc = b->cpu.phases.n, ng = b->gpu.phases.n, n = nc + ng;
  const char **labels = fk_xrealloc(NULL, n, sizeof *labels);
  double *totals = fk_xrealloc(NULL, n, sizeof *totals), sum = 0;
  for (size_t i = 0; i < ng; i++)
    totals[i] = fk_named_sum(&b->gpu.ops[i]);
  for (size_t i = 0; i < nc; i++)
    totals[ng + i] = fk_named_sum(&b->cpu.ops[i]);
  for (size_t i = 0; i < n; i++)
    sum += totals[i];
  for (size_t i = 0; i < n; i++) {
    bool cpu_first = quirk;
    if (cpu_first)
      labels[i] = i < nc ? b->cpu.phases.keys[i] : b->gpu.phases.keys[i - nc];
    else
      labels[i] = i < ng ? b->gpu.phases.keys[i] : b->cpu.phases.keys[i - ng];
  }
  smrules_json *r = api->json_obj(d, "ratio");
  if (sum != 0)
    for (size_t i = 0; i < n; i++)
      api->json_num(r, labels[i], FK_PCT(totals[i], sum));
  free(labels);
  free(totals);
}

static inline void fk_write_horovod(const smrules_api *api, smrules_json *d,
                                    const fk_named *hv) {
  double total = fk_named_sum(hv), kept = 0;
  smrules_json *h = api->json_obj(d, "horovod");
  if (total == 0)
    return;
  for (size_t i = 0; i < hv->keys.n; i++)
    if (FK_PCT(hv->us[i], total) > 2)
      kept += hv->us[i];
  for (size_t i = 0; i < hv->keys.n; i++)
    if (FK_PCT(hv->us[i], total) > 2)
      api->json_num(h, hv->keys.keys[i], FK_PCT(hv->us[i], kept));
}

static inline void fk_write_fwd_bwd(const smrules_api *api, smrules_json *d,
                                    const fk_breakdown *b) {
  double f = fk_named_sum(&b->forward), k = fk_named_sum(&b->backward);
  smrules_json *fb = api->json_obj(d, "forward_backward");
  if (f + k == 0)
    return;
  api->json_num(fb, "Forward pass", FK_PCT(f, f + k));
  api->json_num(fb, "Backward pass", FK_PCT(k, f + k));
}

/* The Details keys one breakdown write produces, in the reference's order
 * (ratio, CPU, CPU_total, GPU, GPU_total, phase, phase_time, general,
 * forward_backward, horovod), added to `order`.  The reference updates a
 * dict that lives across windows, so a key keeps the position of its first
 * write: rules keep `order` and re-emit Details in that order. */
static inline void fk_breakdown_keys(const fk_breakdown *b, fk_map *order) {
  fk_map_add(order, "ratio", NULL);
  if (b->cpu.phases.n) {
    fk_map_add(order, "CPU", NULL);
    fk_map_add(order, "CPU_total", NULL);
  }
  if (b->gpu.phases.n) {
    fk_map_add(order, "GPU", NULL);
    fk_map_add(order, "GPU_total", NULL);
  }
  fk_map_add(order, "phase", NULL);
  fk_map_add(order, "phase_time", NULL);
  if (b->phase_durations.keys.n)
    fk_map_add(order, "general", NULL);
  if (b->forward.keys.n && b->backward.keys.n)
    fk_map_add(order, "forward_backward", NULL);
  if (b->horovod.keys.n)
    fk_map_add(order, "horovod", NULL);
}

/* Write Details[key] from the breakdown; false when `key` is not one of
 * its keys.  `quirk`: the ratio label/total mismatch of
 * docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown. */
static inline bool fk_breakdown_emit(const smrules_api *api, smrules_json *d,
                                     const fk_breakdown *b, const char *key,
                                     bool quirk) {
  if (strcmp(key, "ratio") == 0)
    fk_write_ratio(api, d, b, quirk);
  else if (strcmp(key, "CPU") == 0)
    fk_write_ops(api, d, &b->cpu, "CPU", "CPU_total");
  else if (strcmp(key, "GPU") == 0)
    fk_write_ops(api, d, &b->gpu, "GPU", "GPU_total");
  else if (strcmp(key, "CPU_total") == 0 || strcmp(key, "GPU_total") == 0)
    ; /* written with CPU / GPU */
  else if (strcmp(key, "phase") == 0)
    fk_write_shares(api, d, "phase", &b->step_phases);
  else if (strcmp(key, "phase_time") == 0)
    api->json_obj(d, "phase_time");
  else if (strcmp(key, "general") == 0)
    fk_write_shares(api, d, "general", &b->phase_durations);
  else if (strcmp(key, "forward_backward") == 0)
    fk_write_fwd_bwd(api, d, b);
  else if (strcmp(key, "horovod") == 0)
    fk_write_horovod(api, d, &b->horovod);
  else
    return false;
  return true;
}

#endif
