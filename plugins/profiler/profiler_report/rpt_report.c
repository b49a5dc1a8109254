/* rpt_report.c - a sub-rule's report: read back after it ran (from the
 * host for a rule run through api->sub_rule, from its engine for an
 * engine), and written as its JSON file
 * (profiler-output/profiler-reports/<Rule>.json,
 * docs/profiler-report.md#outputs).  Both are read with the one JSON
 * model (smrules/json.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpt_int.h"

static void set_report(rpt_sub *s, int64_t triggered, int64_t violations,
                       int64_t datapoints, smr_json *details) {
  s->triggered = triggered;
  s->violations = violations;
  s->datapoints = datapoints;
  smr_json_free(s->details);
  s->details = details;
}

/* A rule's report, as the host holds it (api->rule_report). */
static int read_rule(rpt_sub *s) {
  char *text = rpt_host->rule_report(s->ctx);
  smr_json *r = text ? smr_json_parse(text, strlen(text), NULL, NULL) : NULL;
  free(text);
  smr_json *details = smr_json_take(r, "Details");
  if (!smr_json_is_obj(details)) { /* cannot happen with the host's text */
    smr_json_free(details);
    smr_json_free(r);
    return SMRULES_ERR;
  }
  set_report(s, (int64_t)smr_json_num_or(r, "RuleTriggered", 0),
             (int64_t)smr_json_num_or(r, "Violations", 0),
             (int64_t)smr_json_num_or(r, "Datapoints", 0), details);
  const char *params = smr_json_text_of(smr_json_get(r, "RuleParameters"));
  free(s->rule_params);
  s->rule_params = strdup(params ? params : "");
  smr_json_free(r);
  return 0;
}

/* An engine's report as it stands.  The bottleneck snapshots of
 * CPUBottleneck and IOBottleneck (one member per snapshot of the job; the
 * HTML only counts them) stay text: as trees they were ProfilerReport's
 * largest allocation on a long job. */
static int read_engine(rpt_sub *s) {
  pr_report r;
  s->eng->report(s->state, &r);
  char *text = pk_obj_render(r.details);
  smr_json_limits keep = {.keep_member = "bottlenecks",
                          .keep_style = SMR_JSON_SPACED};
  smr_json_free(s->details); /* the old tree goes before the new is built */
  s->details = NULL;
  smr_json *details =
      text ? smr_json_parse(text, strlen(text), &keep, NULL) : NULL;
  free(text);
  bool ok = smr_json_is_obj(details); /* always, with our own rendering */
  set_report(s, r.triggered, r.violations, r.datapoints,
             ok ? details : smr_json_obj_new());
  if (!ok)
    smr_json_free(details);
  return ok ? 0 : SMRULES_ERR;
}

int rpt_sub_read_report(rpt_sub *s) {
  if (!s->ready)
    return 0;
  return s->eng ? read_engine(s) : read_rule(s);
}

char *rpt_sub_report_json(const rpt_sub *s) {
  char head[128], mid[64];
  snprintf(head, sizeof head,
           "{\"RuleTriggered\": %lld, \"Violations\": %lld, \"Details\": ",
           (long long)s->triggered, (long long)s->violations);
  snprintf(mid, sizeof mid, ", \"Datapoints\": %lld, \"RuleParameters\": ",
           (long long)s->datapoints);
  const char *params = s->rule_params ? s->rule_params : "";
  smr_json_buf t = {0};
  smr_json_buf_put(&t, head, strlen(head));
  smr_json_write(s->details, SMR_JSON_SPACED, &t);
  smr_json_buf_put(&t, mid, strlen(mid));
  smr_json_write_string(&t, params, strlen(params), SMR_JSON_SPACED);
  smr_json_buf_put(&t, "}\n", 2);
  return t.s;
}
