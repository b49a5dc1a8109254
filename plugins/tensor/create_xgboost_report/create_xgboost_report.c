/* CreateXgboostReport (docs/rules/CreateXgboostReport.md): writes an HTML
 * training report of an XGBoost trial, xgboost_report.html, into the rule
 * instance's output directory.  Never triggers.  Each step only records that it
 * was seen; the report is built in finish() from everything saved between the
 * first and the last evaluated step, so the state is just those two
 * steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgb_report.h"

#define REPORT_FILE "xgboost_report.html"

typedef struct state {
  int64_t first, last; /* evaluated global steps; -1 before any */
} state;

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = malloc(sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->first = st->last = -1;
  *out = st;
  return 0;
}

/* A step counts when any tensor the report reads was saved there. */
static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  if (xgb_report_tensors(t, &names) != 0)
    return SMRULES_SKIPPED;
  int64_t seen = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_tensor v;
    if (rk_value(t, names.v[i], g, &v) == 0) {
      seen++;
      rk_api->release(&v);
    }
  }
  rk_api->strlist_free(&names);
  if (!seen)
    return SMRULES_SKIPPED;
  rk_api->datapoints(ctx, seen);
  if (st->first < 0)
    st->first = g;
  st->last = g;
  return SMRULES_NO_TRIGGER;
}

/* Writes `text` to REPORT_FILE in the rule's folder: the host replaces it
 * through a temporary file and a rename (a reader never sees half a
 * report) without following a link the trial's writer planted there.
 * Returns the file's path or NULL, with the rule failed. */
static char *write_report(smrules_ctx *ctx, const char *text) {
  if (!text) {
    rk_api->fail(ctx, "out of memory");
    return NULL;
  }
  if (!SMRULES_API_HAS(rk_api, write_output)) {
    rk_api->fail(ctx, "this smrules cannot write the report safely (its "
                      "plugin API has no write_output): update smrules");
    return NULL;
  }
  const char *dir = rk_api->output_dir(ctx);
  if (!dir || rk_api->write_output(ctx, REPORT_FILE, text, strlen(text)) != 0)
    return NULL; /* the host said why */
  size_t n = strlen(dir) + sizeof REPORT_FILE + 1;
  char *path = malloc(n);
  if (!path) {
    rk_api->fail(ctx, "out of memory");
    return NULL;
  }
  snprintf(path, n, "%s/%s", dir, REPORT_FILE);
  return path;
}

static int finish(smrules_ctx *ctx, void *p) {
  const state *st = p;
  if (st->first < 0)
    return SMRULES_NO_TRIGGER; /* no step had any of the data */
  xgb_data d;
  xgb_collect(rk_api->trial(ctx), st->first, st->last, &d);
  const char *sections[4];
  size_t nsections;
  char *html = xgb_html(&d, sections, &nsections);
  xgb_data_free(&d);
  char *path = write_report(ctx, html);
  free(html);
  if (!path)
    return SMRULES_ERR;
  smrules_json *j = rk_api->details(ctx);
  rk_api->json_str(j, "report", path);
  rk_api->json_strs(j, "sections", sections, nsections);
  free(path);
  return SMRULES_NO_TRIGGER;
}

static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text t = {0};
  rk_text_printf(&t, "v1");
  rk_text_int(&t, st->first);
  rk_text_int(&t, st->last);
  return rk_text_take(&t);
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  int64_t first, last;
  if (rk_scan_word(&sc, "v1") && rk_scan_int(&sc, &first) &&
      rk_scan_int(&sc, &last) && rk_scan_end(&sc) && first <= last) {
    st->first = first;
    st->last = last;
    return 0;
  }
  rk_api->log(ctx, SMRULES_LOG_WARNING,
              "stored state unreadable; evaluating from the start");
  return -1;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "CreateXgboostReport",
    .description = "HTML training report of an XGBoost job (never triggers)",
    .kind = SMRULES_KIND_TENSOR,
    .params = NULL,
    .settings_size = 0,
    .data_needed = "collections hyperparameters, metrics, feature_importance, "
                   "labels, predictions",
    .init = init,
    .invoke_at_step = invoke,
    .finish = finish,
    .destroy = free,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
