/* rulectx.h - the host side of a rule instance: what the Lua bridge and
 * the plugin adapter share.  A rule implementation (C plugin or Lua
 * script) is driven through smr_rule_ops by the runner. */
#ifndef SMR_RULECTX_H
#define SMR_RULECTX_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "smrules/smrules.h"
#include "trial/trial.h"

/* The host's function table handed to plugins (also usable internally). */
const smrules_api *smr_host_api(void);

/* The trial a rule instance evaluates, as the core type. */
smr_trial *smr_ctx_trial(smrules_ctx *ctx);
const char *smr_ctx_rule_name(const smrules_ctx *ctx);
/* smrules_trial handle of the base trial (for the api functions). */
smrules_trial *smr_ctx_api_trial(smrules_ctx *ctx);

/* Operations of one kind of rule implementation. */
typedef struct smr_rule_ops {
  const char *kind; /* "plugin", "lua" */
  /* SMRULES_NO_TRIGGER / SMRULES_TRIGGERED / SMRULES_SKIPPED or a negative
   * SMRULES_* status; on SMRULES_ERR the message was set with api->fail. */
  int (*invoke_at_step)(void *impl, smrules_ctx *ctx, int64_t step);
  int (*finish)(void *impl, smrules_ctx *ctx); /* may be NULL */
  void (*destroy)(void *impl);
  /* The rule's own state as text (malloc'ed), NULL when it keeps none or
   * cannot say; and back: 0 when restored.  Both may be NULL. */
  char *(*save_state)(void *impl, smrules_ctx *ctx);
  int (*load_state)(void *impl, smrules_ctx *ctx, const char *text);
  /* Time-driven rules (StalledTrainingRule, a Lua script's
   * invoke_at_time): whether this instance wants the clock, and the call
   * made with the wall-clock time while a run is followed.  Results as for
   * invoke_at_step.  Both may be NULL (no rule of this kind is). */
  bool (*wants_time)(const void *impl);
  int (*invoke_at_time)(void *impl, smrules_ctx *ctx, double now);
} smr_rule_ops;

#endif
