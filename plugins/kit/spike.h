/* spike.h - a scalar far above its recent values: the check LossSpike
 * and GradNormSpike share (docs/rules/LossSpike.md#how-it-is-evaluated).
 *
 * At a global step g of mode m and mode step c, for a tensor with a
 * finite scalar x at g: P = the finite values among the `window` saved
 * steps of mode m before c.  Checked when |P| >= warmup.  It fires when
 * factor > 0 and x - median(P) > (factor - 1) * |median(P)|, or when
 * z_score > 0, std(P) > 0 (population) and (x - mean(P)) / std(P) >
 * z_score. */
#ifndef RK_SPIKE_H
#define RK_SPIKE_H

#include "smrules/rulekit.h"

typedef struct rk_spike_settings {
  int64_t window, warmup;
  double factor, z_score;
} rk_spike_settings;

/* Per-tensor values read so far, by position in its step list. */
typedef struct rk_spike {
  rk_table series; /* key "<mode> <name>" */
  rk_step_cache steps;
} rk_spike;

void rk_spike_init(rk_spike *s);
void rk_spike_free(rk_spike *s);
/* Call at the start of each invocation. */
void rk_spike_sync(rk_spike *s, smrules_trial *t);

/* One tensor at global step g: -1 not checked, 0 fine, 1 fired (a
 * violation reported in ctx with tensor, step, mode, mode_step, value,
 * median, mean, std, z, window). */
int rk_spike_check(smrules_ctx *ctx, rk_spike *s, const rk_spike_settings *p,
                   smrules_trial *t, const char *name, int64_t g);

/* The whole of a spike rule but its parameter table: the settings the
 * table fills, the state, and one step over the selected tensors.  Without
 * collection_names and tensor_regex, `default_collection` (or nothing when
 * NULL) is selected. */
typedef struct rk_spike_rule_settings {
  smrules_strlist collection_names;
  smrules_strlist tensor_regex;
  rk_spike_settings spike;
} rk_spike_rule_settings;

int rk_spike_rule_init(smrules_ctx *ctx, const void *settings, void **state);
void rk_spike_rule_destroy(void *state);
int rk_spike_rule_step(smrules_ctx *ctx, void *state, int64_t g,
                       const char *default_collection);

#endif
