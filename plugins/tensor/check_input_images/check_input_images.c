/* CheckInputImages (docs/rules/CheckInputImages.md): input images are not
 * normalized.  Per input tensor the per-channel sums and element counts
 * accumulate over the steps; once `threshold_samples` images have been seen, a
 * channel whose mean is farther than `threshold_mean` from 0 is a violation.
 * The accumulated sums are the rule's state (save_state/load_state). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "smrules/rulekit.h"

typedef struct settings {
  double threshold_mean;
  int64_t threshold_samples;
  const char *regex;
  int64_t channel;
} settings;

static const smrules_param params[] = {
    SMRULES_FLOAT_PARAM("threshold_mean", "0.2", settings, threshold_mean,
                        "largest allowed |mean| of a channel", SMRULES_MIN(0)),
    SMRULES_INT_PARAM("threshold_samples", "500", settings, threshold_samples,
                      "images to accumulate before the means are checked",
                      SMRULES_MIN(0)),
    SMRULES_STRING_PARAM(
        "regex", ".*hybridsequential0_input_0", settings, regex,
        "regex selecting the input tensors (search semantics)", SMRULES_REGEX),
    SMRULES_INT_PARAM("channel", "1", settings, channel,
                      "axis of the channels (batch is axis 0)", SMRULES_MIN(1)),
    SMRULES_END_PARAMS};

/* What has been accumulated for one input tensor. */
typedef struct input {
  char *name;
  int64_t images;
  size_t channels;
  double *sum;
  double *count;
  bool warned;
} input;

typedef struct state {
  const settings *s;
  input *v;
  size_t n;
} state;

static void inputs_clear(state *st) {
  for (size_t i = 0; i < st->n; i++) {
    free(st->v[i].name);
    free(st->v[i].sum);
    free(st->v[i].count);
  }
  free(st->v);
  st->v = NULL;
  st->n = 0;
}

static void destroy(void *p) {
  state *st = p;
  inputs_clear(st);
  free(st);
}

static int init(smrules_ctx *ctx, const void *s, void **out) {
  state *st = calloc(1, sizeof *st);
  if (!st) {
    rk_api->fail(ctx, "out of memory");
    return SMRULES_ERR;
  }
  st->s = s;
  *out = st;
  return 0;
}

/* The entry of `name` (created with `channels` channels when new), or NULL
 * when out of memory. */
static input *input_of(state *st, const char *name, size_t channels) {
  for (size_t i = 0; i < st->n; i++)
    if (strcmp(st->v[i].name, name) == 0)
      return &st->v[i];
  input *v = realloc(st->v, (st->n + 1) * sizeof *v);
  if (!v)
    return NULL;
  st->v = v;
  input *in = &v[st->n];
  memset(in, 0, sizeof *in);
  in->name = strdup(name);
  in->sum = calloc(channels ? channels : 1, sizeof *in->sum);
  in->count = calloc(channels ? channels : 1, sizeof *in->count);
  in->channels = channels;
  if (!in->name || !in->sum || !in->count) {
    free(in->name);
    free(in->sum);
    free(in->count);
    return NULL;
  }
  st->n++;
  return in;
}

/* Adds the tensor's per-channel sums; returns its entry, or NULL when its
 * layout does not fit. */
static input *accumulate(smrules_ctx *ctx, state *st, const char *name,
                         const smrules_tensor *v) {
  int64_t ch = st->s->channel;
  if (v->ndim < 2 || ch >= v->ndim || v->shape[ch] <= 0) {
    rk_api->log(ctx, SMRULES_LOG_WARNING,
                "%s: shape has no channel axis %lld; skipped", name,
                (long long)ch);
    return NULL;
  }
  size_t channels = (size_t)v->shape[ch];
  input *in = input_of(st, name, channels);
  if (!in || in->channels != channels) {
    if (in && !in->warned)
      rk_api->log(ctx, SMRULES_LOG_WARNING,
                  "%s: %zu channels, earlier steps had %zu; skipped", name,
                  channels, in->channels);
    if (in)
      in->warned = true;
    return NULL;
  }
  int64_t outer, inner;
  rk_channel_sums(v, (int)ch, in->sum, &outer, &inner);
  for (size_t c = 0; c < channels; c++)
    in->count[c] += (double)(outer * inner);
  in->images += v->shape[0];
  return in;
}

/* After threshold_samples images: a violation if some channel mean is off. */
static int check(smrules_ctx *ctx, const state *st, const input *in) {
  if (in->images < st->s->threshold_samples)
    return 0;
  double *means = malloc(in->channels * sizeof *means);
  if (!means)
    return 0;
  bool off = false;
  for (size_t c = 0; c < in->channels; c++) {
    means[c] = in->count[c] > 0 ? in->sum[c] / in->count[c] : NAN;
    off |= fabs(means[c]) > st->s->threshold_mean;
  }
  if (off) {
    smrules_json *j = rk_violation(ctx, in->name);
    rk_api->json_int(j, "images", in->images);
    rk_api->json_nums(j, "channel_means", means, in->channels);
  }
  free(means);
  return off;
}

static int invoke(smrules_ctx *ctx, void *p, int64_t g) {
  state *st = p;
  smrules_trial *t = rk_api->trial(ctx);
  smrules_strlist names;
  if (rk_regex(t, st->s->regex, &names) != 0)
    return SMRULES_SKIPPED;
  int64_t evaluated = 0, violations = 0;
  for (size_t i = 0; i < names.n; i++) {
    smrules_tensor v;
    if (rk_value(t, names.v[i], g, &v) != 0)
      continue;
    const input *in =
        rk_is_numeric(&v) ? accumulate(ctx, st, names.v[i], &v) : NULL;
    rk_api->release(&v);
    if (!in)
      continue;
    evaluated++;
    violations += check(ctx, st, in);
  }
  rk_api->strlist_free(&names);
  rk_api->datapoints(ctx, evaluated);
  return rk_result(evaluated, violations);
}

/* State text: "v1" then per tensor "T name images channels (sum count)*". */
static char *save_state(smrules_ctx *ctx, void *p) {
  const state *st = p;
  rk_text t = {0};
  rk_text_printf(&t, "v1");
  for (size_t i = 0; i < st->n; i++) {
    const input *in = &st->v[i];
    rk_text_printf(&t, "\nT");
    rk_text_name(&t, in->name);
    rk_text_int(&t, in->images);
    rk_text_int(&t, (int64_t)in->channels);
    for (size_t c = 0; c < in->channels; c++) {
      rk_text_num(&t, in->sum[c]);
      rk_text_num(&t, in->count[c]);
    }
  }
  return rk_text_take(&t);
}

static bool load_input(state *st, rk_scan *sc) {
  char *name = rk_scan_name(sc);
  int64_t images, channels;
  bool ok = name && rk_scan_int(sc, &images) && rk_scan_int(sc, &channels) &&
            channels > 0 && (size_t)channels <= rk_scan_left(sc) / 2;
  input *in = ok ? input_of(st, name, (size_t)channels) : NULL;
  free(name);
  if (!in)
    return false;
  in->images = images;
  for (size_t c = 0; c < in->channels; c++)
    if (!rk_scan_num(sc, &in->sum[c]) || !rk_scan_num(sc, &in->count[c]))
      return false;
  return true;
}

static int load_state(smrules_ctx *ctx, void *p, const char *text) {
  state *st = p;
  rk_scan sc = {text, false};
  inputs_clear(st);
  bool ok = rk_scan_word(&sc, "v1");
  while (ok && rk_scan_word(&sc, "T"))
    ok = load_input(st, &sc);
  if (ok && rk_scan_end(&sc))
    return 0;
  inputs_clear(st);
  rk_api->log(ctx, SMRULES_LOG_WARNING,
              "stored state unreadable; evaluating from the start");
  return -1;
}

static const smrules_rule rule = {
    .api_version = SMRULES_API_VERSION,
    .struct_size = sizeof(smrules_rule),
    .name = "CheckInputImages",
    .description = "input images that are not normalized (channel mean far "
                   "from 0)",
    .kind = SMRULES_KIND_TENSOR,
    .params = params,
    .settings_size = sizeof(settings),
    .data_needed = "input tensors matched by regex (SageMaker saves "
                   "collection input_image, include_regex "
                   ".*hybridsequential0_input_0)",
    .init = init,
    .invoke_at_step = invoke,
    .destroy = destroy,
    .save_state = save_state,
    .load_state = load_state,
};

RK_PLUGIN(rule)
