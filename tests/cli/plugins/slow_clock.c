/* slow_clock.c - a test rule on the clock whose first invoke_at_time
 * takes as long as the test says: it prints "slow_clock: holding" on
 * stderr and returns only once the file `release` exists (checked every
 * millisecond), the stand-in for a wall-clock rule that takes seconds.
 * Its steps are never due.  Built by the Makefile into
 * <build>/tests/plugins/slow_clock.so against the public header only (and
 * hold.h, the wait it shares with gate.c). */
#include <smrules/smrules.h>

#include <stdbool.h>
#include <stdlib.h>

#include "hold.h"

typedef struct settings {
  const char *release; /* the file whose appearance ends the hold */
} settings;

typedef struct slow_clock {
  settings s;
  bool held;
} slow_clock;

static const smrules_param params[] = {
    SMRULES_STRING_PARAM("release", NULL, settings, release,
                         "the file whose appearance ends the hold (unset: "
                         "hold until killed)"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  (void)ctx;
  slow_clock *c = calloc(1, sizeof *c);
  if (!c)
    return SMRULES_ERR;
  c->s = *(const settings *)s;
  *state = c;
  return 0;
}

static int invoke_at_step(smrules_ctx *ctx, void *state, int64_t step) {
  (void)ctx;
  (void)state;
  (void)step;
  return SMRULES_NOT_DUE;
}

static int invoke_at_time(smrules_ctx *ctx, void *state, double now) {
  (void)ctx;
  (void)now;
  slow_clock *c = state;
  if (c->held)
    return SMRULES_NO_TRIGGER;
  c->held = true;
  hold_until("slow_clock: holding", c->s.release);
  return SMRULES_NO_TRIGGER;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "SlowClock",
    .description = "holds its first wall-clock call until a file appears "
                   "(tests)",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "nothing",
    .init = init,
    .invoke_at_step = invoke_at_step,
    .invoke_at_time = invoke_at_time,
    .destroy = free,
};

SMRULES_PLUGIN_INIT {
  (void)api;
  return &rule;
}
