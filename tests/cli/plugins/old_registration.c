/* old_registration.c - a plugin as built against an older smrules.h,
 * whose smrules_rule ended at `flags` (save_state, load_state and
 * invoke_at_time were appended later).  test_plugin_sdk.py builds it from
 * the installed SDK three times:
 *
 *   -DREG_SIZE=0   struct_size = sizeof(old_rule): must load and run, the
 *                  missing members read as absent;
 *   -DREG_SIZE=8   too small to be a registration: refused;
 *   -DREG_SIZE=-1  larger than this smrules' smrules_rule (a newer
 *                  smrules.h): refused;
 *   -DREG_API=1    built for plugin API version 1, the pre-release table
 *                  that 1.0 laid out anew: refused, not misread.
 *
 * The rule (OldEveryNth) fires at every global step divisible by `every`.
 * Past the old registration lie bytes that crash the host if it ever
 * treats them as the appended callbacks. */
#include <smrules/smrules.h>

typedef struct old_rule {
  uint32_t api_version;
  uint32_t struct_size;
  const char *name;
  const char *description;
  int kind;
  const smrules_param *params;
  size_t settings_size;
  const char *data_needed;
  int (*init)(smrules_ctx *ctx, const void *settings, void **state);
  int (*invoke_at_step)(smrules_ctx *ctx, void *state, int64_t step);
  int (*finish)(smrules_ctx *ctx, void *state);
  void (*destroy)(void *state);
  unsigned flags;
} old_rule;

/* The old registration is a prefix of today's. */
_Static_assert(offsetof(old_rule, flags) == offsetof(smrules_rule, flags),
               "old_rule is a prefix of smrules_rule");

static const smrules_api *host;

typedef struct settings {
  int64_t every;
} settings;

static const smrules_param params[] = {
    SMRULES_INT_PARAM("every", "2", settings, every,
                      "fire at global steps divisible by this",
                      SMRULES_ABOVE(0)),
    SMRULES_END_PARAMS};

static int init(smrules_ctx *ctx, const void *s, void **state) {
  (void)ctx;
  *state = (void *)s;
  return 0;
}

static int invoke_at_step(smrules_ctx *ctx, void *state, int64_t step) {
  const settings *s = state;
  if (step % s->every)
    return SMRULES_NO_TRIGGER;
  host->json_int(host->violation(ctx), "step", step);
  return SMRULES_TRIGGERED;
}

static int finish(smrules_ctx *ctx, void *state) {
  (void)state;
  host->json_bool(host->details(ctx), "host_has_live_info",
                  SMRULES_API_HAS(host, live_info));
  return SMRULES_NO_TRIGGER;
}

#ifndef REG_SIZE
#define REG_SIZE 0
#endif
#ifndef REG_API
#define REG_API SMRULES_API_VERSION
#endif

/* The registration followed by poison where newer members would be. */
static const struct {
  old_rule reg;
  uintptr_t poison[8];
} plugin = {
    .reg =
        {
            .api_version = REG_API,
            .struct_size = REG_SIZE == 0    ? sizeof(old_rule)
                           : REG_SIZE == -1 ? sizeof(smrules_rule) + 16
                                            : REG_SIZE,
            .name = "OldEveryNth",
            .description = "fires at every global step divisible by every",
            .kind = SMRULES_KIND_TENSOR,
            .params = params,
            .settings_size = sizeof(settings),
            .data_needed = "any saved step",
            .init = init,
            .invoke_at_step = invoke_at_step,
            .finish = finish,
        },
    .poison = {1, 1, 1, 1, 1, 1, 1, 1},
};

SMRULES_PLUGIN_INIT {
  host = api;
  return (const smrules_rule *)(const void *)&plugin.reg;
}
