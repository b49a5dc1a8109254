/* subrule.c - rules run by another rule (api->sub_rule): ProfilerReport
 * runs the profiler rules itself, each with its own registration,
 * settings and report, over the window the host hands it
 * (docs/profiler-report.md#evaluation).  A sub-rule's context is a real
 * context of the host: the sub-rule calls the host's own function table,
 * and the rule running it reads its report back (api->rule_report) with
 * the JSON model.  What differs from a rule the runner runs:
 *
 * - parameters: the parent's "<name>_<param>" ones, seen as "<param>"
 *   (docs/profiler-report.md#parameters), in a parameter set of its own;
 * - the window: the parent's, set when the parent's begins; the window's
 *   events the parent read are handed out again rather than read twice;
 * - logging goes to the parent's log as "<name>: ...", and it writes no
 *   files (the rule running it writes their reports). */
#include <stdlib.h>
#include <string.h>

#include "host/host_int.h"

/* The parent's parameters named "<prefix><param>", as "<param>". */
static smr_params *params_below(const smr_params *from, const char *prefix) {
  smr_params *p = smr_xcalloc(1, sizeof *p);
  size_t n = strlen(prefix);
  if (!from)
    return p;
  for (size_t i = 0; i < from->set.n; i++)
    if (strncmp(from->set.v[i], prefix, n) == 0)
      smr_strv_push(&p->set, from->set.v[i] + n);
  for (const char *l = from->lines.data; l && *l;) {
    const char *eol = strchr(l, '\n');
    size_t len = eol ? (size_t)(eol - l) : strlen(l);
    if (len > n && strncmp(l, prefix, n) == 0) {
      if (p->lines.len)
        smr_buf_puts(&p->lines, "\n");
      smr_buf_append(&p->lines, l + n, len - n);
    }
    l = eol ? eol + 1 : l + len;
  }
  return p;
}

/* A rule may run this many (ProfilerReport runs 4): a rule that asks
 * for one at every step cannot grow the host's memory without bound. */
#define MAX_SUB_RULES 256

smrules_ctx *smr_ctx_sub_rule(smrules_ctx *parent, const char *name) {
  if (!parent || parent->parent || !name || !*name ||
      parent->nsubs >= MAX_SUB_RULES)
    return NULL;
  char *prefix = smr_xasprintf("%s_", name);
  smr_params *params = params_below(parent->params, prefix);
  free(prefix);
  smrules_ctx *c = smr_ctx_new(parent->trial, name, name, params);
  c->own_params = params;
  c->parent = parent;
  c->live = parent->live;
  c->profiler_rule = parent->profiler_rule; /* and set with the parent's */
  c->prof = parent->prof;
  parent->subs =
      smr_xrealloc(parent->subs, (parent->nsubs + 1) * sizeof *parent->subs);
  parent->subs[parent->nsubs++] = c;
  return c;
}

void smr_ctx_subs_free(smrules_ctx *parent) {
  for (size_t i = 0; i < parent->nsubs; i++)
    smr_ctx_free(parent->subs[i]);
  free(parent->subs);
  parent->subs = NULL;
  parent->nsubs = 0;
}

/* The events the parent holds for exactly [start_us, end_us], if any:
 * the sub-rules of a window ask for the window the parent has read. */
bool smr_ctx_sub_sys(smrules_ctx *c, int64_t start_us, int64_t end_us,
                     const smrules_sys_event **out, size_t *n) {
  const smrules_ctx *p = c->parent;
  if (!p || !p->sys_held || p->sys_from != start_us || p->sys_to != end_us)
    return false;
  *out = p->sys.v;
  *n = p->sys.n;
  return true;
}

bool smr_ctx_sub_fw(smrules_ctx *c, int64_t start_us, int64_t end_us,
                    const smrules_fw_event **out, size_t *n) {
  const smrules_ctx *p = c->parent;
  if (!p || !p->fw_held || p->fw_from != start_us || p->fw_to != end_us)
    return false;
  *out = p->fw.v;
  *n = p->fw.n;
  return true;
}

/* ------------------------------------------ the host functions */

smrules_ctx *smr_api_sub_rule(smrules_ctx *ctx, const char *name) {
  return smr_ctx_sub_rule(ctx, name);
}

char *smr_api_rule_report(smrules_ctx *ctx) {
  return ctx && ctx->parent ? smr_ctx_profiler_report_json(ctx) : NULL;
}

const char *smr_api_rule_failure(smrules_ctx *ctx) {
  return ctx && ctx->parent ? ctx->failure : NULL;
}
