/* rulekind.c - the list of rule kinds and the factory over it
 * (rulekind.h). */
#include "host/rulekind.h"

#include <stdlib.h>

#include "host/rulehost.h"

/* Every kind of rule this host runs, asked in order: the first that
 * claims an entry makes it.  A new kind is one line here. */
static const smr_rule_kind *const KINDS[] = {
    &smr_kind_lua,
    &smr_kind_plugin,
    &smr_kind_python,
};

const smr_rule_kind *smr_rule_kind_of(const smr_rule_config *rc) {
  for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
    if (KINDS[i]->claims(rc))
      return KINDS[i];
  return NULL;
}

static void set_output_dir(smr_rule *r, const smr_rule_env *env,
                           const char *name) {
  if (!env->output_dir)
    return;
  char *d = smr_xasprintf("%s/%s", env->output_dir, name);
  smr_ctx_set_output_dir(r->ctx, d);
  free(d);
}

int smr_rule_new(const smr_rule_config *rc, const smr_rule_env *env,
                 const char *name, smr_rule **out, smr_error *err) {
  smr_rule *r = smr_xcalloc(1, sizeof *r);
  *out = r;
  r->kind = smr_rule_kind_of(rc);
  if (!r->kind) /* the schema requires one of rule, lua, plugin */
    return smr_error_set(err, SMR_ERR_USAGE, env->config_path, -1,
                         "line %d, column %d: no kind of rule takes this entry",
                         rc->line, rc->col);
  int st = r->kind->prepare(r, rc, env, err);
  if (st != SMR_OK)
    return st;
  r->ctx = smr_ctx_new(env->trial, name, r->type, &r->params);
  set_output_dir(r, env, name);
  return r->kind->start(r, rc, env, err);
}

void smr_rule_free(smr_rule *r) {
  if (!r)
    return;
  if (r->ops && r->impl)
    r->ops->destroy(r->impl);
  smr_ctx_free(r->ctx);
  smr_params_free(&r->params);
  if (r->kind && r->kind->release)
    r->kind->release(r);
  free(r->type);
  free(r);
}

bool smr_rule_wants_time(const smr_rule *r) {
  return r && r->ops && r->impl && r->ops->wants_time &&
         r->ops->invoke_at_time && r->ops->wants_time(r->impl);
}
