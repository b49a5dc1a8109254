/* profkit.h - shared mechanics of the profiler rule plugins
 * (docs/rule-semantics.md#profiler-rules-windows): Python-like ordered dicts
 * (the reference keeps its state and reports in dicts, whose insertion order
 * shows in the reports), histories that keep only their recent tail in
 * memory, NumPy's quantile, mean, histogram and round, Python's
 * str() of floats, the framework-metric breakdown aggregate_framework_metrics,
 * and helpers for parameters and the window loop.  Compiled into every plugin;
 * reads data only through the smrules_api table (rk_api from rulekit.h); the
 * one file it opens is the histories' anonymous temporary file. */
#ifndef PROFKIT_H
#define PROFKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npmath.h"
#include "smrules/json.h"
#include "smrules/rulekit.h"

/* ------------------------------------------------------------- vectors */
typedef struct pk_vec {
  double *v;
  size_t n, cap;
} pk_vec;

void pk_vec_push(pk_vec *v, double x);
void pk_vec_free(pk_vec *v);

/* ------------------------------------------------------------ histories
 * A series of readings that grows with the job (a GPU's readings, up to the
 * reference's 1 000 000), read two ways: its recent tail at every window or
 * reading, and rarely a whole prefix (a report entry's statistics).  Only
 * the tail stays in memory: at least the last `keep` readings, at most
 * 2 keep + 2 PK_HIST_CHUNK; older readings move in chunks of PK_HIST_CHUNK
 * to an anonymous temporary file in $TMPDIR (else /tmp) and are read back
 * on demand (docs/profiler.md#memory-over-a-long-job).  Small histories never
 * touch the file.  When the file cannot be created or written the readings stay
 * in memory, after one warning on stderr.  Zero-initialised = empty, keep 0. */
#define PK_HIST_CHUNK 4096

typedef struct pk_hist {
  size_t n;    /* readings pushed */
  size_t keep; /* readings the tail keeps in memory (pk_hist_keep) */
  double *mem; /* readings [nchunks * PK_HIST_CHUNK, n) */
  size_t mem_cap;
  uint32_t *chunk; /* file slots of the older readings, in order */
  size_t nchunks, chunk_cap;
} pk_hist;

/* keep: how many of the last readings the rule reads at every window or
 * reading (its window parameter; negative counts as 0). */
void pk_hist_keep(pk_hist *h, int64_t keep);
void pk_hist_push(pk_hist *h, double x);
/* Readings [from, to) (from <= to <= n): a pointer into the tail when they
 * are all there (*copy = NULL), else a malloc'ed copy (*copy, free it). */
const double *pk_hist_view(const pk_hist *h, size_t from, size_t to,
                           double **copy);
/* Readings [from, to) in a malloc'ed array (free it). */
double *pk_hist_copy(const pk_hist *h, size_t from, size_t to);
/* Rewrites reading i (< n). */
void pk_hist_set(pk_hist *h, size_t i, double x);
/* Reading i (< n). */
double pk_hist_at(const pk_hist *h, size_t i);
/* 1 + the index of the last reading == x, 0 when none (searched from the
 * end, the older chunks read back one at a time). */
size_t pk_hist_rfind(const pk_hist *h, double x);
/* Back to no readings (keep stays); its chunks are reused. */
void pk_hist_clear(pk_hist *h);
void pk_hist_free(pk_hist *h);
/* Chunks the temporary file holds now (for tests). */
size_t pk_hist_file_chunks(void);

/* ------------------------------------------------------ ordered dicts
 * Keys are strings, or numbers compared by value as Python compares float
 * keys (1 and 1.0 are one key).  Insertion order is kept; setting an
 * existing key keeps its position; the key's first spelling is kept. */
typedef struct pk_entry {
  char *key;       /* string key (number keys: use pk_entry_key) */
  double nkey;     /* number key */
  bool key_is_int; /* the number key was an int (its str() has no ".0") */
  double num;      /* a number value */
  void *ptr;       /* or a pointer value, freed with the dict's free_ptr */
} pk_entry;

typedef struct pk_dict pk_dict;

/* numeric: number keys; free_ptr frees entry pointers (may be NULL). */
pk_dict *pk_dict_new(bool numeric, void (*free_ptr)(void *));
void pk_dict_free(pk_dict *d);
void pk_dict_clear(pk_dict *d);
size_t pk_dict_len(const pk_dict *d);
pk_entry *pk_dict_at(pk_dict *d, size_t i);
pk_entry *pk_dict_get(pk_dict *d, const char *key);
pk_entry *pk_dict_nget(pk_dict *d, double key);
/* Get or insert (num = 0, ptr = NULL); *created tells which (may be NULL). */
pk_entry *pk_dict_put(pk_dict *d, const char *key, bool *created);
pk_entry *pk_dict_nput(pk_dict *d, double key, bool key_is_int, bool *created);

/* The key as text: the string key, or Python's str() of a number key. */
const char *pk_entry_key(pk_entry *e);

/* Convenience for dict-of-dicts and dict-of-vectors values. */
pk_dict *pk_dict_sub(pk_dict *d, const char *key, bool numeric);
pk_vec *pk_dict_vec(pk_dict *d, const char *key);

/* ------------------------------------------------------------- series
 * A per-GPU (or per-node) history, and what a report entry computed from
 * it needs: the reference recomputes an entry from the whole history at
 * every violation and only the last one shows, so engines note the
 * history length at the last violation and compute the entry when the
 * report is read (pending) from that prefix of the history.  Dicts of
 * series: pk_series_dict(); two levels (node -> name -> series):
 * pk_series_dict2().  `keep`: readings of the tail the engine reads at
 * every window (pk_hist_keep), set when the series is created. */
typedef struct pk_series {
  pk_hist v;
  bool pending;
  size_t n_at, n_at2; /* history lengths at the last violation */
  double a, b;        /* numbers known at the violation */
  size_t count;       /* readings counted, not kept (engine's use) */
  int64_t *hist;      /* optional running histogram (engine's use) */
} pk_series;

pk_dict *pk_series_dict(void);
pk_dict *pk_series_dict2(void);
pk_series *pk_series_of(pk_dict *d, const char *key, int64_t keep);
pk_series *pk_series_of2(pk_dict *d2, const char *node, const char *key,
                         int64_t keep);

/* --------------------------------------------------------- closed keys
 * The keys of a dict with number keys (timestamp -> sum, snapshot ->
 * counts) that grows with the job.  The engine keeps the entries of the
 * window in hand in a pk_dict; when the window ends it moves them, in the
 * dict's order, to pk_hist columns, their keys here (pk_closed_begin, then
 * pk_closed_push for each).  pk_closed_find tells whether and where a key
 * already is, as the dict would: the keys of the last close stay indexed
 * in memory (a reading exactly on a window boundary is seen by both
 * windows); an older key can only equal one that is not above the largest
 * of them (readings going back in time), and is then searched on file.
 * Lookups are O(1) for the host's windows and exact whatever the data. */
typedef struct pk_closed {
  pk_hist keys;    /* in the dict's order */
  pk_dict *recent; /* the keys of the last close -> position */
  double old_max;  /* the largest older key (-inf: none) */
} pk_closed;

void pk_closed_init(pk_closed *c);
void pk_closed_free(pk_closed *c);
void pk_closed_clear(pk_closed *c);
/* A close begins: the keys of the last one become older. */
void pk_closed_begin(pk_closed *c);
/* Appends a key that is not there yet; returns its position. */
size_t pk_closed_push(pk_closed *c, double key);
/* 1 + the position of key, 0 when it is not there. */
size_t pk_closed_find(const pk_closed *c, double key);

/* ----------------------------------------------- report objects (Details)
 * A JSON object of the one JSON model (smrules/json.h), built like the
 * reference builds its report dict (a key set again keeps its place),
 * rendered into the rule's report at the end.  Numbers are written as Python's
 * json writes them (ints plain, floats shortest round trip), non-finite numbers
 * as null (Decision F15). */
typedef smr_json pk_obj; /* smrules/json.h */

pk_obj *pk_obj_new(void);
void pk_obj_free(pk_obj *o);
/* o[key] if it is an object, else o[key] = {} (position kept). */
pk_obj *pk_obj_obj(pk_obj *o, const char *key);
/* o[key] if it is an object, else NULL. */
pk_obj *pk_obj_get(pk_obj *o, const char *key);
/* o[key] = {} always. */
pk_obj *pk_obj_new_obj(pk_obj *o, const char *key);
void pk_obj_num(pk_obj *o, const char *key, double v);
void pk_obj_int(pk_obj *o, const char *key, int64_t v);
void pk_obj_bool(pk_obj *o, const char *key, bool v);
void pk_obj_null(pk_obj *o, const char *key);
void pk_obj_str(pk_obj *o, const char *key, const char *v);
/* A list of numbers, written as integers when `ints`. */
void pk_obj_list(pk_obj *o, const char *key, const double *v, size_t n,
                 bool ints);
/* Pre-encoded JSON (NULL: a placeholder keeping the key's position, to be
 * set later; rendered as null until then). */
void pk_obj_raw(pk_obj *o, const char *key, const char *json);
void pk_obj_raw_take(pk_obj *o, const char *key, char *json);
void pk_obj_del(pk_obj *o, const char *key);
bool pk_obj_has(pk_obj *o, const char *key);
/* JSON text (malloc'ed). */
char *pk_obj_render(pk_obj *o);
/* Every member of o into j (the rule's Details, or any report object). */
void pk_obj_write(pk_obj *o, smrules_json *j);

/* Append a number the way Python's json writes it (into a text buffer). */
void pk_text_num(rk_text *t, double v, bool is_int);
/* Append a JSON string literal. */
void pk_text_str(rk_text *t, const char *s);
/* Python's str() of a float (or an int when is_int). */
void pk_py_str(double v, bool is_int, char *buf, size_t n);

/* -------------------------------------------------------- NumPy numbers */
/* np.quantile(x, q), method "linear" of NumPy >= 1.22 (sorts a copy);
 * NaN for empty input or when x holds a NaN. */
double pk_quantile(const double *x, size_t n, double q);
/* On an ascending array without NaN: np_quantile_sorted (npmath.h). */
double *pk_sorted_copy(const double *x, size_t n); /* free() it */
void pk_sort(double *x, size_t n); /* the same order, in place */
/* The first n readings of a history sorted the same way, read back one
 * history at a time (free() it); *max (unless NULL): pk_np_max of them. */
double *pk_hist_sorted(const pk_hist *h, size_t n, double *max);
/* np.sum (pairwise summation, as NumPy's float64 add.reduce) and np.mean
 * (NaN for n == 0); np.max/np.min (NaN when any is NaN). */
double pk_np_sum(const double *x, size_t n);
double pk_np_mean(const double *x, size_t n);
double pk_np_max(const double *x, size_t n);
double pk_np_min(const double *x, size_t n);
/* np.std: population standard deviation as NumPy computes it. */
double pk_np_std(const double *x, size_t n);
/* round(np.float64, d) = rint(v * 10**d) / 10**d. */
double pk_np_round(double v, int decimals);
/* np.histogram(x, bins=edges): counts[nedges - 1]; values outside
 * [edges[0], edges[last]] are not counted, the last bin is closed. */
void pk_histogram_edges(const double *x, size_t n, const double *edges,
                        size_t nedges, int64_t *counts);
/* np.histogram(x, bins=B): counts[B] and edges[B + 1]. */
void pk_histogram_bins(const double *x, size_t n, size_t bins, int64_t *counts,
                       double *edges);
/* Python's x[-w:] start index for a list of n (w == 0 gives 0). */
size_t pk_tail_start(size_t n, int64_t w);

/* ------------------------------------------------------ the rule's side */
/* The window being evaluated; false when the host has none. */
bool pk_window(smrules_ctx *ctx, int64_t *index, int64_t *start_us,
               int64_t *end_us);
/* A parameter value as Python's str() shows it in RuleParameters: ints
 * plain, integral floats like ints (the reference's defaults are ints),
 * other floats shortest round trip, unset as None. */
void pk_param_str(double v, bool set, char *buf, size_t n);

/* Framework events of a window, fetched once on first use. */
typedef struct pk_fw_source {
  smrules_ctx *ctx;
  int64_t start_us, end_us;
  bool fetched;
  const smrules_fw_event *ev;
  size_t n;
  /* an alternative supplier (ProfilerReport hands its own events) */
  const smrules_fw_event *given;
  size_t ngiven;
  bool has_given;
} pk_fw_source;

/* The events (fetching them from the host on first call). */
int pk_fw_events(pk_fw_source *src, const smrules_fw_event **ev, size_t *n);

/* ------------------------------ aggregate_framework_metrics
 * (docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown) */
typedef struct pk_fwbuf {
  pk_dict *cpu_events, *gpu_events;       /* phase -> (name -> µs) */
  pk_dict *step_phases, *phase_durations; /* phase -> µs */
  pk_dict *forward_events, *backward_events, *horovod; /* name -> µs */
} pk_fwbuf;

void pk_fwbuf_init(pk_fwbuf *b);
void pk_fwbuf_free(pk_fwbuf *b);

/* Classify the used events into the buffer and rewrite the breakdown keys
 * of `details` (ratio, CPU, CPU_total, GPU, GPU_total, phase, phase_time,
 * general, forward_backward, horovod) from the whole buffer.  With
 * has_end false an event is used when start < begin < end (strict); with
 * it, when end_time >= begin and start_time <= end. */
void pk_aggregate_framework_metrics(const smrules_fw_event *ev, size_t n,
                                    pk_obj *details, pk_fwbuf *buf,
                                    double begin_us, bool has_end,
                                    double end_us);

/* filter_events(events, threshold): operator totals over all phases
 * (first-seen order), shares > threshold re-normalised to 100.  Returns
 * the number kept; names (borrowed from `events`), shares and times are
 * malloc'ed arrays (free them).  Returns 0 on a zero total. */
size_t pk_filter_events(pk_dict *events, double threshold, const char ***names,
                        double **shares, double **times);

/* Python's min(a, b) and max(a, b): the first argument unless the second
 * compares smaller (larger). */
static inline double pk_py_min(double a, double b) {
  return b < a ? b : a;
}
static inline double pk_py_max(double a, double b) {
  return b > a ? b : a;
}

/* Python's sum() of doubles, in order. */
double pk_py_sum(const double *x, size_t n);

#endif
