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
  const smr_json *d = h_details(v, "OverallFrameworkMetrics");
  double others = smr_json_num_or(smr_json_get(d, "phase"), "others", NAN);
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

static void step_stats(rk_text *o, const char *node, const smr_json *x) {
  const smr_json *ss = smr_json_get(x, "step_stats");
  h_table(o, "node|phase|mean|max|p99|p95|p50|min|stddev|outliers");
  h_tr(o);
  h_td(o, node);
  const smr_json *ph = smr_json_get(x, "phase");
  h_td(o, smr_json_type_of(ph) == SMR_JSON_STR ? smr_json_text_of(ph) : "");
  static const char *const K[] = {"mean", "max", "p99", "p95", "p50", "min"};
  for (size_t k = 0; k < 6; k++)
    h_td_num(o, smr_json_num_or(ss, K[k], NAN), 4);
  h_td_num(o, smr_json_num_or(x, "stddev", NAN), 2);
  h_td_num(o, smr_json_num_or(x, "number_of_outliers", NAN), 0);
  h_tr_end(o);
  h_table_end(o);
}

/* The histogram stored as probs (counts) and binedges in x. */
static void stored_histogram(rk_text *o, const char *title, const smr_json *x,
                             const char *xlabel) {
  const smr_json *probs = smr_json_get(x, "probs"),
                 *edges = smr_json_get(x, "binedges");
  size_t nb = h_numbers(probs);
  if (!nb || h_numbers(edges) != nb + 1)
    return;
  double *c = malloc(nb * sizeof *c), *e = malloc((nb + 1) * sizeof *e);
  if (c && e) {
    for (size_t i = 0; i < nb; i++)
      c[i] = smr_json_num_at(probs, i);
    for (size_t i = 0; i <= nb; i++)
      e[i] = smr_json_num_at(edges, i);
    svg_histogram(o, title, c, e, nb, xlabel);
  }
  free(c);
  free(e);
}

/* Whether every item of the array is a string. */
static bool all_strings(const smr_json *a) {
  for (size_t i = 0; i < smr_json_len(a); i++)
    if (smr_json_type_of(smr_json_at(a, i)) != SMR_JSON_STR)
      return false;
  return smr_json_len(a) > 0;
}

/* Appends one item of a plain list; false after the 200th (", …"). */
static bool list_item(rk_text *o, size_t *items, const char *shown) {
  if (!*shown)
    return true;
  if ((*items)++ == 200) {
    rk_text_printf(o, ", …");
    return false;
  }
  char item[64];
  snprintf(item, sizeof item, "%s", shown);
  rk_text_printf(o, "%s", *items > 1 ? ", " : "");
  h_text(o, item);
  return true;
}

/* An array of strings and numbers ([\"83\", 85]), written as a plain
 * list, each item as its JSON text writes it: 83, 85 ("none" when
 * empty). */
static void mixed_list(rk_text *o, const smr_json *a) {
  size_t items = 0;
  bool packed = smr_json_len(a) && !smr_json_at(a, 0);
  char *all = packed ? smr_json_text(a, SMR_JSON_COMPACT) : NULL;
  char *save = NULL;
  for (char *tok = all ? strtok_r(all, "[,]", &save) : NULL; tok;
       tok = strtok_r(NULL, "[,]", &save)) /* numbers have no ',' */
    if (!list_item(o, &items, tok))
      break;
  free(all);
  for (size_t i = 0; !packed && i < smr_json_len(a); i++) {
    const smr_json *x = smr_json_at(a, i);
    char *text = smr_json_type_of(x) == SMR_JSON_STR
                     ? NULL
                     : smr_json_text(x, SMR_JSON_SPACED);
    bool more = list_item(o, &items, text ? text : smr_json_text_of(x));
    free(text);
    if (!more)
      break;
  }
  if (!items)
    rk_text_printf(o, "none");
}

/* An array written by the rule as JSON text (StepOutlier's list of step
 * numbers and strings): the same plain list, each item as it was written. */
static void raw_list(rk_text *o, const char *text) {
  smr_json *a = smr_json_parse(text, strlen(text), NULL, NULL);
  if (smr_json_type_of(a) == SMR_JSON_ARR)
    mixed_list(o, a);
  else
    rk_text_printf(o, "none");
  smr_json_free(a);
}

static void outlier_steps(rk_text *o, const smr_json *x) {
  const smr_json *sn = smr_json_get(x, "step_numbers");
  if (!sn)
    return;
  rk_text_printf(o, "<p>Outlier steps: ");
  if (all_strings(sn))
    for (size_t i = 0; i < smr_json_len(sn) && i < 200; i++) {
      rk_text_printf(o, "%s", i ? ", " : "");
      h_text(o, smr_json_text_of(smr_json_at(sn, i)));
    }
  else if (h_numbers(sn))
    for (size_t i = 0; i < smr_json_len(sn) && i < 200; i++)
      rk_text_printf(o, "%s%.0f", i ? ", " : "", smr_json_num_at(sn, i));
  else if (smr_json_type_of(sn) == SMR_JSON_ARR && !h_is_numbers(sn))
    mixed_list(o, sn);
  else if (smr_json_type_of(sn) == SMR_JSON_RAW)
    raw_list(o, smr_json_text_of(sn));
  else
    rk_text_printf(o, "none");
  rk_text_printf(o, "</p>\n");
}

void h_step_durations(rk_text *o, const rpt_view *v) {
  h_section(o, "steps", "Step duration analysis");
  const rpt_sub *s = rpt_find(v, "StepOutlier");
  const smr_json *d = h_details(v, "StepOutlier");
  const smr_json *sd = smr_json_get(d, "step_details");
  if (!sd || !h_members(sd)) {
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
    for (size_t i = 0; i < h_members(sd); i++) {
      double x = smr_json_num_or(smr_json_at(sd, i), "number_of_outliers", 0);
      outliers += isfinite(x) && x > 0 ? x : 0;
    }
    rk_text_printf(o,
                   "<p>StepOutlier found %.0f outlier step%s among %lld step "
                   "events and triggered %lld %s.</p>\n",
                   outliers, outliers == 1 ? "" : "s", (long long)s->datapoints,
                   (long long)s->triggered, h_times(s->triggered));
  }
  for (size_t i = 0; i < h_members(sd); i++) {
    step_stats(o, smr_json_key(smr_json_at(sd, i)), smr_json_at(sd, i));
    char title[160];
    snprintf(title, sizeof title, "Step durations on %s (outliers left out)",
             smr_json_key(smr_json_at(sd, i)));
    stored_histogram(o, title, smr_json_at(sd, i), "step duration (s)");
    outlier_steps(o, smr_json_at(sd, i));
  }
  if (h_has_details(v, "StepOutlier") && smr_json_get(d, "phase"))
    h_h3(o, "Framework metrics during outlier steps");
  h_breakdown(o, d, "(outlier steps)");
  h_section_end(o);
}

/* ------------------------------------------------------- data loading */

static void loader_settings(rk_text *o, const smr_json *d) {
  h_table(o, "setting|value");
  static const char *const K[] = {"cores", "dataloaders", "num_workers",
                                  "pin_memory", "prefetch"};
  static const char *const L[] = {"CPU cores",
                                  "parallel data loaders "
                                  "(median per second)",
                                  "num_workers", "pin_memory", "prefetch"};
  for (size_t k = 0; k < 5; k++) {
    const smr_json *x = smr_json_get(d, K[k]);
    if (!x)
      continue;
    h_tr(o);
    h_td(o, L[k]);
    double n;
    smr_json_type t = smr_json_type_of(x);
    const char *text = smr_json_text_of(x);
    if (t == SMR_JSON_BOOL || (t == SMR_JSON_RAW && (!strcmp(text, "true") ||
                                                     !strcmp(text, "false"))))
      h_td(o, smr_json_number(x, &n) && n ? "true" : "false");
    else if (smr_json_number(x, &n))
      h_td_num(o, n, 0);
    else
      h_td(o, text ? text : "");
    h_tr_end(o);
  }
  h_table_end(o);
}

void h_dataloading(rk_text *o, const rpt_view *v) {
  h_section(o, "dataloading", "Data loading analysis");
  const rpt_sub *s = rpt_find(v, "Dataloader");
  const smr_json *d = h_details(v, "Dataloader");
  if (!h_members(d)) {
    h_note(o, "No data-loader events (PyTorch DataLoader) were found.");
    h_section_end(o);
    return;
  }
  double cores = smr_json_num_or(d, "cores", NAN),
         dl = smr_json_num_or(d, "dataloaders", NAN);
  rk_text_printf(o,
                 "<p>The job ran a median of %.0f parallel data "
                 "loader(s) on %.0f CPU core(s); Dataloader triggered "
                 "%lld %s.</p>\n",
                 dl, cores, s ? (long long)s->triggered : 0LL,
                 h_times(s ? s->triggered : 0));
  loader_settings(o, d);
  const smr_json *t = smr_json_get(d, "dataloading_time");
  if (t) {
    rk_text_printf(o,
                   "<p>Data-loading time per event: p25 %.4f s, p50 "
                   "%.4f s, p95 %.4f s.</p>\n",
                   smr_json_num_or(t, "p25", NAN),
                   smr_json_num_or(t, "p50", NAN),
                   smr_json_num_or(t, "p95", NAN));
    stored_histogram(o, "Data-loading times", t, "time (s)");
  }
  h_section_end(o);
}
