/* rulekit.h - helpers shared by the built-in rule plugins, so that the
 * mechanics every rule needs (selecting tensors, reading a value at a
 * global step, step history, reporting) are written once.  Compiled into
 * each plugin; uses nothing of the host but the smrules_api table. */
#ifndef RULEKIT_H
#define RULEKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smrules/smrules.h"

/* The host API, set by RK_PLUGIN before anything else runs. */
extern const smrules_api *rk_api;

/* Define the plugin's entry point for registration `reg`. */
#define RK_PLUGIN(reg)                                                         \
  SMRULES_PLUGIN_INIT {                                                        \
    rk_api = api;                                                              \
    return &(reg);                                                             \
  }

/* rules.md §0.2: members of the collections ∪ names the regexes search.
 * With both lists empty: every tensor when `all_if_empty`, else none. */
int rk_select(smrules_trial *t, const smrules_strlist *collections,
              const smrules_strlist *regexes, bool all_if_empty,
              smrules_strlist *out);

/* Names matched by one regex string (or a collection when `collection`). */
int rk_regex(smrules_trial *t, const char *regex, smrules_strlist *out);

/* The raw value of `name` at global step g (any mode). */
int rk_value(smrules_trial *t, const char *name, int64_t g,
             smrules_tensor *out);

/* Exactly one element (shape (), (1,), (1,1), ...). */
bool rk_is_scalar(const smrules_tensor *v);
bool rk_is_numeric(const smrules_tensor *v);

/* Whether a status from a value/reduction means "not saved here": the
 * tensor is skipped at this step (rules.md §0.3, R17). */
bool rk_unavailable(int status);

/* Complete steps of a tensor in `mode` (global steps for GLOBAL) that are
 * <= upto; the last `max` of them in ascending order.  Returns count. */
size_t rk_steps_upto(smrules_trial *t, const char *name, int mode,
                     int64_t upto, int64_t *out, size_t max);

/* Report a violation with a tensor name; returns the JSON object for more
 * fields. */
smrules_json *rk_violation(smrules_ctx *ctx, const char *tensor);

/* Result of a step from counts of evaluated tensors and violations. */
static inline int rk_result(int64_t evaluated, int64_t violations) {
  if (evaluated == 0)
    return SMRULES_SKIPPED;
  return violations ? SMRULES_TRIGGERED : SMRULES_NO_TRIGGER;
}

#endif
