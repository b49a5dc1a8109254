/* gate.c - a test rule that holds a step until the test says so.
 *
 * Tests that interrupt a run must know that a step is in progress when
 * their signal arrives, whatever the machine's speed.  This rule counts
 * the steps it evaluates (kept across runs with save_state), and at step
 * `hold_at` it prints "gate: holding step N" on stderr, then waits until
 * the file `release` exists (checked every millisecond: the test creates
 * it when it is ready, so the wait ends on an event, not on a duration).
 * Without `release` it holds the step until the process is killed.  Its
 * report's Details carry `seen`, the steps evaluated over every run.
 *
 * Built by the Makefile into <build>/tests/plugins/gate.so against the
 * public header only (and hold.h, the wait it shares with slow_clock.c). */
#include <smrules/smrules.h>

#include <stdio.h>
#include <stdlib.h>

#include "hold.h"

typedef struct settings {
  int64_t hold_at;     /* -1: never hold */
  const char *release; /* the file whose appearance ends the hold */
} settings;

typedef struct gate {
  settings s;
  int64_t seen;
} gate;

static const smrules_api *host;

static const smrules_param params[] = {
    SMRULES_INT_PARAM("hold_at", "-1", settings, hold_at,
                      "the global step to hold (-1: none)"),
    SMRULES_STRING_PARAM("release", NULL, settings, release,
                         "the file whose appearance ends the hold (unset: "
                         "hold until killed)"),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  (void)ctx;
  gate *g = calloc(1, sizeof *g);
  if (!g)
    return SMRULES_ERR;
  g->s = *(const settings *)s;
  *state = g;
  return 0;
}

static void hold(const gate *g, int64_t step) {
  char said[64];
  snprintf(said, sizeof said, "gate: holding step %lld", (long long)step);
  hold_until(said, g->s.release);
}

static int invoke_at_step(smrules_ctx *ctx, void *state, int64_t step) {
  (void)ctx;
  gate *g = state;
  if (step == g->s.hold_at)
    hold(g, step);
  g->seen++;
  return SMRULES_NO_TRIGGER;
}

static int finish(smrules_ctx *ctx, void *state) {
  const gate *g = state;
  host->json_int(host->details(ctx), "seen", g->seen);
  return 0;
}

static char *save_state(smrules_ctx *ctx, void *state) {
  (void)ctx;
  const gate *g = state;
  char *text = malloc(32);
  if (text)
    snprintf(text, 32, "%lld", (long long)g->seen);
  return text;
}

static int load_state(smrules_ctx *ctx, void *state, const char *text) {
  (void)ctx;
  gate *g = state;
  g->seen = strtoll(text, NULL, 10);
  return 0;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "Gate",
    .description = "holds a step until a file appears (tests)",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "nothing",
    .init = init,
    .invoke_at_step = invoke_at_step,
    .finish = finish,
    .destroy = free,
    .save_state = save_state,
    .load_state = load_state,
};

SMRULES_PLUGIN_INIT {
  host = api;
  return &rule;
}
