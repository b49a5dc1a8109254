/* composite.c - a test rule that runs another rule itself, through the
 * host (api->sub_rule), as ProfilerReport runs the profiler rules, and
 * reads its report back with the JSON model (smrules/json.h).
 *
 * The inner rule, "Inner", is a registration of this file: its parameter
 * `limit` arrives as the composite's `Inner_limit`.  At each step it sets
 * its report (RuleTriggered 1, Violations = step, Datapoints = step + 1),
 * puts `limit` and param_text("limit") into its Details, logs a warning,
 * and fails when `limit` is negative.  The composite copies what it reads
 * back into its own Details: `inner` (the report's members, read with
 * smr_json_get), `inner_failure` (api->rule_failure), `bad_name` (whether
 * sub_rule refused a sub-rule of the sub-rule and a nameless one) and
 * `sub_rules_given` (how many sub_rule gave before refusing).
 *
 * Built by the Makefile into <build>/tests/plugins/composite.so against
 * the public headers and the rule kit (libsmrules-rulekit.a) only. */
#include <smrules/json.h>
#include <smrules/smrules.h>

#include <stdlib.h>
#include <string.h>

static const smrules_api *host;

/* ---------------------------------------------------------- the inner */

typedef struct inner_settings {
  double limit;
} inner_settings;

static const smrules_param inner_params[] = {
    SMRULES_FLOAT_PARAM("limit", "1.0", inner_settings, limit,
                        "a number the rule reports back"),
    SMRULES_END_PARAMS};

static int inner_init(smrules_ctx *ctx, const void *settings, void **state) {
  *state = (void *)settings;
  return 0;
}

static int inner_invoke(smrules_ctx *ctx, void *state, int64_t step) {
  const inner_settings *s = state;
  host->log(ctx, 2, "evaluated step %lld", (long long)step);
  if (s->limit < 0) {
    host->fail(ctx, "a negative limit (%g)", s->limit);
    return SMRULES_ERR;
  }
  host->report_set(ctx, 1, step, step + 1);
  smrules_json *d = host->details_reset(ctx);
  host->json_num(d, "limit", s->limit);
  const char *text = host->param_text(ctx, "limit");
  host->json_str(d, "param_text", text ? text : "(unset)");
  host->rule_parameters(ctx, "from the inner rule");
  return SMRULES_TRIGGERED;
}

static const smrules_rule inner = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "Inner",
    .kind = SMRULES_KIND_TENSOR,
    .params = inner_params,
    .settings_size = sizeof(inner_settings),
    .init = inner_init,
    .invoke_at_step = inner_invoke,
};

/* ------------------------------------------------------ the composite */

typedef struct settings {
  inner_settings inner; /* "Inner_limit" lands here */
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM("Inner_limit", "1.0", settings, inner.limit,
                        "the inner rule's limit"),
    SMRULES_END_PARAMS};

typedef struct composite {
  smrules_ctx *sub;
  void *inner_state;
  bool bad_name_refused;
  int64_t subs; /* how many sub_rule gave before it refused */
} composite;

static int init(smrules_ctx *ctx, const void *settings_, void **state) {
  const settings *s = settings_;
  if (!SMRULES_API_HAS(host, rule_failure)) {
    host->fail(ctx, "this smrules has no api->sub_rule");
    return SMRULES_ERR;
  }
  composite *c = calloc(1, sizeof *c);
  if (!c)
    return SMRULES_ERR;
  *state = c;
  c->sub = host->sub_rule(ctx, "Inner");
  c->bad_name_refused =
      c->sub && !host->sub_rule(c->sub, "Deeper") && !host->sub_rule(ctx, "");
  for (c->subs = c->sub ? 1 : 0; c->subs < 100000; c->subs++)
    if (!host->sub_rule(ctx, "Extra"))
      break;
  if (!c->sub || inner.init(c->sub, &s->inner, &c->inner_state) != 0) {
    host->fail(ctx, "the inner rule did not start");
    return SMRULES_ERR;
  }
  return 0;
}

/* The inner report's members, read back with the JSON model. */
static void copy_report(smrules_json *to, const char *text) {
  smr_json_error err;
  smr_json *r = text ? smr_json_parse(text, strlen(text), NULL, &err) : NULL;
  if (!r) {
    host->json_str(to, "parse_error", text ? err.what : "no report");
    return;
  }
  host->json_num(to, "RuleTriggered", smr_json_num_or(r, "RuleTriggered", -1));
  host->json_num(to, "Violations", smr_json_num_or(r, "Violations", -1));
  host->json_num(to, "Datapoints", smr_json_num_or(r, "Datapoints", -1));
  const smr_json *d = smr_json_get(r, "Details");
  host->json_num(to, "limit", smr_json_num_or(d, "limit", -1));
  const char *pt = smr_json_text_of(smr_json_get(d, "param_text"));
  host->json_str(to, "param_text", pt ? pt : "(missing)");
  const char *rp = smr_json_text_of(smr_json_get(r, "RuleParameters"));
  host->json_str(to, "RuleParameters", rp ? rp : "(missing)");
  smr_json_free(r);
}

static int invoke(smrules_ctx *ctx, void *state, int64_t step) {
  composite *c = state;
  int rc = inner.invoke_at_step(c->sub, c->inner_state, step);
  smrules_json *d = host->details_reset(ctx); /* this step's only */
  if (rc < 0) {
    const char *why = host->rule_failure(c->sub);
    host->json_str(d, "inner_failure", why ? why : "(none)");
    return SMRULES_NO_TRIGGER;
  }
  char *text = host->rule_report(c->sub);
  copy_report(host->json_obj(d, "inner"), text);
  free(text);
  host->json_bool(d, "bad_name", c->bad_name_refused);
  host->json_int(d, "sub_rules_given", c->subs);
  return SMRULES_NO_TRIGGER;
}

static void destroy(void *state) {
  free(state);
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "Composite",
    .description = "runs the rule Inner through the host and reads its "
                   "report back",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
};

SMRULES_PLUGIN_INIT {
  host = api;
  return &rule;
}
