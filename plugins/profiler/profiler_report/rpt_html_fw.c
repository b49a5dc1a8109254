/* rpt_html_fw.c - the report sections drawn from the framework-metric
 * rules (docs/profiler-report.md#reading-the-report: 4 framework metrics
 * summary, 7 step duration analysis, 10 data loading). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpt_html.h"
#include "rpt_sections.h"

/* -------------------------------------------- framework metrics summary */

void h_framework_summary(rk_text *o, const rpt_view *v) {
  h_section(o, "framework", "Framework metrics summary");
  const pj *d = h_details(v, "OverallFrameworkMetrics");
  double others = pj_num_or(pj_get(d, "phase"), "others", NAN);
  if (others < 0) {
    /* the reference's "others" is 100 minus the phases' shares, which
     * overlap (evaluation inside training): show no negative share */
    rk_text_printf(o, "<p>Training and evaluation steps cover all of the "
                      "time between the first and the last step (they "
                      "overlap a little, so the phase shares are scaled "
                      "to add up to 100 %%); nothing ran outside "
                      "them (\"others\" is 0 %%).</p>\n");
    others = NAN;
  } else if (others > 25)
    rk_text_printf(o,
                   "<p>%.1f %% of the time between the first and the "
                   "last step was spent outside training and evaluation "
                   "steps (\"others\"): look for work between steps, "
                   "such as checkpointing or slow data loading.</p>\n",
                   others);
  else if (isfinite(others))
    rk_text_printf(o,
                   "<p>Training and evaluation steps account for the "
                   "time between the first and the last step; "
                   "\"others\" is %.1f %%.</p>\n",
                   others);
  if (!h_breakdown(o, d, "(whole job)"))
    h_note(o, "No framework metrics were found (no trace files, or no "
              "events the framework summary uses).");
  h_section_end(o);
}

/* --------------------------------------------------- step durations */

static void step_stats(rk_text *o, const char *node, const pj *x) {
  const pj *ss = pj_get(x, "step_stats");
  h_table(o, "node|phase|mean|max|p99|p95|p50|min|stddev|outliers");
  h_tr(o);
  h_td(o, node);
  const pj *ph = pj_get(x, "phase");
  h_td(o, ph && ph->t == PJ_STR ? ph->s : "");
  static const char *const K[] = {"mean", "max", "p99", "p95", "p50", "min"};
  for (size_t k = 0; k < 6; k++)
    h_td_num(o, pj_num_or(ss, K[k], NAN), 4);
  h_td_num(o, pj_num_or(x, "stddev", NAN), 2);
  h_td_num(o, pj_num_or(x, "number_of_outliers", NAN), 0);
  h_tr_end(o);
  h_table_end(o);
}

/* The histogram stored as probs (counts) and binedges in x. */
static void stored_histogram(rk_text *o, const char *title, const pj *x,
                             const char *xlabel) {
  const pj *probs = pj_get(x, "probs"), *edges = pj_get(x, "binedges");
  size_t nb = pj_array_len(probs);
  if (!nb || pj_array_len(edges) != nb + 1)
    return;
  double *c = malloc(nb * sizeof *c), *e = malloc((nb + 1) * sizeof *e);
  if (c && e) {
    for (size_t i = 0; i < nb; i++)
      c[i] = pj_array_at(probs, i);
    for (size_t i = 0; i <= nb; i++)
      e[i] = pj_array_at(edges, i);
    svg_histogram(o, title, c, e, nb, xlabel);
  }
  free(c);
  free(e);
}

/* A JSON array of strings or numbers kept as raw text ("[\"83\", 85]"),
 * written as a plain list: 83, 85 ("none" when empty). */
static void raw_list(rk_text *o, const char *raw) {
  size_t items = 0;
  const char *p = raw;
  while (*p) {
    while (*p == '[' || *p == ']' || *p == ',' || *p == ' ' || *p == '"')
      p++;
    const char *start = p;
    while (*p && *p != ',' && *p != ']' && *p != '"')
      p++;
    if (p == start)
      continue;
    if (items++ == 200) {
      rk_text_printf(o, ", …");
      break;
    }
    char item[64];
    snprintf(item, sizeof item, "%.*s", (int)(p - start), start);
    rk_text_printf(o, "%s", items > 1 ? ", " : "");
    h_text(o, item);
  }
  if (!items)
    rk_text_printf(o, "none");
}

static void outlier_steps(rk_text *o, const pj *x) {
  const pj *sn = pj_get(x, "step_numbers");
  if (!sn)
    return;
  rk_text_printf(o, "<p>Outlier steps: ");
  if (sn->t == PJ_STRS)
    for (size_t i = 0; i < sn->len && i < 200; i++) {
      rk_text_printf(o, "%s", i ? ", " : "");
      h_text(o, sn->strs[i]);
    }
  else if (sn->t == PJ_RAW)
    raw_list(o, sn->s);
  else if (pj_array_len(sn))
    for (size_t i = 0; i < sn->len && i < 200; i++)
      rk_text_printf(o, "%s%.0f", i ? ", " : "", pj_array_at(sn, i));
  else
    rk_text_printf(o, "none");
  rk_text_printf(o, "</p>\n");
}

void h_step_durations(rk_text *o, const rpt_view *v) {
  h_section(o, "steps", "Step duration analysis");
  const rpt_sub *s = rpt_find(v, "StepOutlier");
  const pj *d = h_details(v, "StepOutlier");
  const pj *sd = pj_get(d, "step_details");
  if (!sd || !sd->n) {
    h_note(o, v->finished ? "No step phase has more than 100 steps "
                            "(StepOutlier needs them to compute statistics)."
                          : "No step phase has more than 100 steps yet "
                            "(StepOutlier needs them to compute statistics).");
    h_section_end(o);
    return;
  }
  if (s) {
    /* the outliers the tables below list (the rule's Violations counts
     * only those of the windows it triggered in) */
    double outliers = 0;
    for (size_t i = 0; i < sd->n; i++) {
      double x = pj_num_or(sd->kids[i], "number_of_outliers", 0);
      outliers += isfinite(x) && x > 0 ? x : 0;
    }
    rk_text_printf(o,
                   "<p>StepOutlier found %.0f outlier step%s among %lld step "
                   "events and triggered %lld %s.</p>\n",
                   outliers, outliers == 1 ? "" : "s", (long long)s->datapoints,
                   (long long)s->triggered, h_times(s->triggered));
  }
  for (size_t i = 0; i < sd->n; i++) {
    step_stats(o, sd->kids[i]->key, sd->kids[i]);
    char title[160];
    snprintf(title, sizeof title, "Step durations on %s (outliers left out)",
             sd->kids[i]->key);
    stored_histogram(o, title, sd->kids[i], "step duration (s)");
    outlier_steps(o, sd->kids[i]);
  }
  if (h_has_details(v, "StepOutlier") && pj_get(d, "phase"))
    h_h3(o, "Framework metrics during outlier steps");
  h_breakdown(o, d, "(outlier steps)");
  h_section_end(o);
}

/* ------------------------------------------------------- data loading */

static void loader_settings(rk_text *o, const pj *d) {
  h_table(o, "setting|value");
  static const char *const K[] = {"cores", "dataloaders", "num_workers",
                                  "pin_memory", "prefetch"};
  static const char *const L[] = {"CPU cores",
                                  "parallel data loaders "
                                  "(median per second)",
                                  "num_workers", "pin_memory", "prefetch"};
  for (size_t k = 0; k < 5; k++) {
    const pj *x = pj_get(d, K[k]);
    if (!x)
      continue;
    h_tr(o);
    h_td(o, L[k]);
    double n;
    if (x->t == PJ_BOOL ||
        (x->t == PJ_RAW && (!strcmp(x->s, "true") || !strcmp(x->s, "false"))))
      h_td(o, pj_number(x, &n) && n ? "true" : "false");
    else if (pj_number(x, &n))
      h_td_num(o, n, 0);
    else
      h_td(o, x->t == PJ_RAW || x->t == PJ_STR ? x->s : "");
    h_tr_end(o);
  }
  h_table_end(o);
}

void h_dataloading(rk_text *o, const rpt_view *v) {
  h_section(o, "dataloading", "Data loading analysis");
  const rpt_sub *s = rpt_find(v, "Dataloader");
  const pj *d = h_details(v, "Dataloader");
  if (!d->n) {
    h_note(o, "No data-loader events (PyTorch DataLoader) were found.");
    h_section_end(o);
    return;
  }
  double cores = pj_num_or(d, "cores", NAN),
         dl = pj_num_or(d, "dataloaders", NAN);
  rk_text_printf(o,
                 "<p>The job ran a median of %.0f parallel data "
                 "loader(s) on %.0f CPU core(s); Dataloader triggered "
                 "%lld %s.</p>\n",
                 dl, cores, s ? (long long)s->triggered : 0LL,
                 h_times(s ? s->triggered : 0));
  loader_settings(o, d);
  const pj *t = pj_get(d, "dataloading_time");
  if (t) {
    rk_text_printf(o,
                   "<p>Data-loading time per event: p25 %.4f s, p50 "
                   "%.4f s, p95 %.4f s.</p>\n",
                   pj_num_or(t, "p25", NAN), pj_num_or(t, "p50", NAN),
                   pj_num_or(t, "p95", NAN));
    stored_histogram(o, "Data-loading times", t, "time (s)");
  }
  h_section_end(o);
}
