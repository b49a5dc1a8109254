/* pk_framework.c - aggregate_framework_metrics and filter_events
 * (docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown): where
 * framework time went around bottlenecks and outlier steps, accumulated over
 * the rule's whole run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "profkit.h"

void pk_fwbuf_init(pk_fwbuf *b) {
  b->cpu_events = pk_dict_new(false, NULL);
  b->gpu_events = pk_dict_new(false, NULL);
  b->step_phases = pk_dict_new(false, NULL);
  b->phase_durations = pk_dict_new(false, NULL);
  b->forward_events = pk_dict_new(false, NULL);
  b->backward_events = pk_dict_new(false, NULL);
  b->horovod = pk_dict_new(false, NULL);
}

void pk_fwbuf_free(pk_fwbuf *b) {
  pk_dict_free(b->cpu_events);
  pk_dict_free(b->gpu_events);
  pk_dict_free(b->step_phases);
  pk_dict_free(b->phase_durations);
  pk_dict_free(b->forward_events);
  pk_dict_free(b->backward_events);
  pk_dict_free(b->horovod);
  memset(b, 0, sizeof *b);
}

static bool contains_ci(const char *s, const char *lower_word) {
  size_t n = strlen(lower_word);
  for (; *s; s++) {
    size_t i = 0;
    while (i < n && s[i] &&
           (s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]) ==
               lower_word[i])
      i++;
    if (i == n)
      return true;
  }
  return false;
}

static void add(pk_dict *d, const char *key, double v) {
  pk_dict_put(d, key, NULL)->num += v;
}

/* The branches of
 * docs/rule-semantics.md#profiler-rules-the-framework-metric-breakdown, first
 * match wins. */
static void classify(const smrules_fw_event *e, pk_fwbuf *b) {
  const char *ph = e->phase;
  double t = e->end_us - e->start_us;
  if (contains_ci(ph, "cpu"))
    add(pk_dict_sub(b->cpu_events, ph, false), e->name, t);
  else if (contains_ci(ph, "gpu"))
    add(pk_dict_sub(b->gpu_events, ph, false), e->name, t);
  else if (strstr(ph, "Step"))
    add(b->step_phases, ph, t);
  else if (!strcmp(ph, "Forward-SubModuleInternal"))
    add(b->forward_events, e->name, t);
  else if (!strcmp(ph, "Backward-SubModuleInternal"))
    add(b->backward_events, e->name, t);
  else if (!strstr(ph, ":CPU") && !strstr(ph, ":GPU") && e->file_type[0])
    add(b->phase_durations, ph, e->duration_us);
  else if (!e->file_type[0])
    add(b->horovod, e->name, t);
}

static double dict_sum(pk_dict *d) {
  double s = 0;
  for (size_t i = 0; i < pk_dict_len(d); i++)
    s += pk_dict_at(d, i)->num;
  return s;
}

size_t pk_filter_events(pk_dict *events, double threshold, const char ***names,
                        double **shares, double **times) {
  pk_dict *ops = pk_dict_new(false, NULL);
  for (size_t i = 0; i < pk_dict_len(events); i++) {
    pk_dict *phase = pk_dict_at(events, i)->ptr;
    for (size_t k = 0; k < pk_dict_len(phase); k++) {
      pk_entry *e = pk_dict_at(phase, k);
      add(ops, e->key, e->num);
    }
  }
  size_t n = pk_dict_len(ops), kept = 0;
  double total = dict_sum(ops);
  *names = malloc((n + 1) * sizeof **names);
  *shares = malloc((n + 1) * sizeof **shares);
  *times = malloc((n + 1) * sizeof **times);
  if (!*names || !*shares || !*times)
    abort();
  if (total == 0) { /* the reference divides by zero: nothing is kept */
    pk_dict_free(ops);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    pk_entry *e = pk_dict_at(ops, i);
    double s = e->num / total * 100;
    if (s > threshold) {
      /* names point into `events`, which outlives the result */
      pk_entry *src = NULL;
      for (size_t p = 0; !src && p < pk_dict_len(events); p++)
        src = pk_dict_get(pk_dict_at(events, p)->ptr, e->key);
      (*names)[kept] = src->key;
      (*shares)[kept] = s;
      (*times)[kept++] = e->num;
    }
  }
  double sum = pk_py_sum(*shares, kept);
  for (size_t i = 0; i < kept; i++)
    (*shares)[i] = (*shares)[i] / sum * 100;
  pk_dict_free(ops);
  return kept;
}

static void write_ops(pk_obj *details, pk_dict *events, const char *key,
                      const char *key_total) {
  const char **names;
  double *shares, *times;
  size_t n = pk_filter_events(events, 2, &names, &shares, &times);
  pk_obj *pct = pk_obj_new_obj(details, key);
  pk_obj *tot = pk_obj_new_obj(details, key_total);
  for (size_t i = 0; i < n; i++) {
    pk_obj_num(pct, names[i], shares[i]);
    pk_obj_num(tot, names[i], times[i]);
  }
  free(names);
  free(shares);
  free(times);
}

/* labels: cpu phases then gpu phases; totals: gpu phases then cpu phases
 * (the reference's mismatch, reproduced). */
static void write_ratio(pk_obj *details, pk_fwbuf *b) {
  size_t nc = pk_dict_len(b->cpu_events), ng = pk_dict_len(b->gpu_events);
  double *totals = malloc((nc + ng + 1) * sizeof *totals);
  if (!totals)
    abort();
  for (size_t i = 0; i < ng; i++)
    totals[i] = dict_sum(pk_dict_at(b->gpu_events, i)->ptr);
  for (size_t i = 0; i < nc; i++)
    totals[ng + i] = dict_sum(pk_dict_at(b->cpu_events, i)->ptr);
  double sum = pk_py_sum(totals, nc + ng);
  if (nc + ng == 0 || sum != 0) { /* a zero total: the key is skipped */
    pk_obj *r = pk_obj_new_obj(details, "ratio");
    for (size_t i = 0; i < nc + ng; i++) {
      const char *label = i < nc ? pk_dict_at(b->cpu_events, i)->key
                                 : pk_dict_at(b->gpu_events, i - nc)->key;
      pk_obj_num(r, label, totals[i] / sum * 100.0);
    }
  }
  free(totals);
}

/* out[key] = 100 * value / total for every entry, unless the total is 0. */
static void write_shares(pk_obj *details, const char *key, pk_dict *d) {
  double sum = dict_sum(d);
  if (pk_dict_len(d) && sum == 0)
    return;
  pk_obj *o = pk_obj_new_obj(details, key);
  for (size_t i = 0; i < pk_dict_len(d); i++)
    pk_obj_num(o, pk_dict_at(d, i)->key, pk_dict_at(d, i)->num / sum * 100);
}

static void write_forward_backward(pk_obj *details, pk_fwbuf *b) {
  double f = dict_sum(b->forward_events), bw = dict_sum(b->backward_events);
  double sum = f + bw;
  if (sum == 0)
    return;
  pk_obj *o = pk_obj_new_obj(details, "forward_backward");
  pk_obj_num(o, "Forward pass", f / sum * 100);
  pk_obj_num(o, "Backward pass", bw / sum * 100);
}

static void write_horovod(pk_obj *details, pk_fwbuf *b) {
  double total = dict_sum(b->horovod);
  pk_dict *kept = pk_dict_new(false, NULL);
  for (size_t i = 0; i < pk_dict_len(b->horovod); i++) {
    pk_entry *e = pk_dict_at(b->horovod, i);
    if (e->num > 0 && e->num / total > 0.02)
      pk_dict_put(kept, e->key, NULL)->num = e->num;
  }
  write_shares(details, "horovod", kept);
  pk_dict_free(kept);
}

void pk_aggregate_framework_metrics(const smrules_fw_event *ev, size_t n,
                                    pk_obj *details, pk_fwbuf *buf,
                                    double begin_us, bool has_end,
                                    double end_us) {
  for (size_t i = 0; i < n; i++) {
    const smrules_fw_event *e = &ev[i];
    bool used = has_end ? e->end_us >= begin_us && e->start_us <= end_us
                        : e->start_us < begin_us && e->end_us > begin_us;
    if (used)
      classify(e, buf);
  }
  write_ratio(details, buf);
  if (pk_dict_len(buf->cpu_events))
    write_ops(details, buf->cpu_events, "CPU", "CPU_total");
  if (pk_dict_len(buf->gpu_events))
    write_ops(details, buf->gpu_events, "GPU", "GPU_total");
  write_shares(details, "phase", buf->step_phases);
  pk_obj_new_obj(details, "phase_time");
  if (pk_dict_len(buf->phase_durations))
    write_shares(details, "general", buf->phase_durations);
  if (pk_dict_len(buf->forward_events) && pk_dict_len(buf->backward_events))
    write_forward_backward(details, buf);
  if (pk_dict_len(buf->horovod))
    write_horovod(details, buf);
}
