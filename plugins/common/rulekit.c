/* rulekit.c - shared helpers of the built-in rule plugins. */
#include "rulekit.h"

#include <stdlib.h>
#include <string.h>

const smrules_api *rk_api;

int rk_select(smrules_trial *t, const smrules_strlist *collections,
              const smrules_strlist *regexes, bool all_if_empty,
              smrules_strlist *out) {
  bool none = (!collections || collections->n == 0) &&
              (!regexes || regexes->n == 0);
  if (none && all_if_empty)
    return rk_api->tensor_names(t, out);
  return rk_api->select(t, collections, regexes, out);
}

int rk_regex(smrules_trial *t, const char *regex, smrules_strlist *out) {
  const char *one[1] = {regex};
  smrules_strlist re = {1, one};
  return rk_api->select(t, NULL, &re, out);
}

int rk_value(smrules_trial *t, const char *name, int64_t g,
             smrules_tensor *out) {
  return rk_api->value(t, name, g, SMRULES_MODE_GLOBAL, out);
}

bool rk_is_scalar(const smrules_tensor *v) { return v->count == 1; }

bool rk_is_numeric(const smrules_tensor *v) {
  return v->dtype != SMRULES_DT_STRING && v->count > 0;
}

bool rk_unavailable(int status) {
  return status == SMRULES_TENSOR_UNAVAILABLE_FOR_STEP ||
         status == SMRULES_STEP_UNAVAILABLE ||
         status == SMRULES_TENSOR_UNAVAILABLE ||
         status == SMRULES_STEP_NOT_YET;
}

size_t rk_steps_upto(smrules_trial *t, const char *name, int mode,
                     int64_t upto, int64_t *out, size_t max) {
  int64_t *steps;
  size_t n;
  if (rk_api->tensor_steps(t, name, mode, &steps, &n) != 0)
    return 0;
  size_t end = 0;
  while (end < n && steps[end] <= upto)
    end++;
  size_t begin = end > max ? end - max : 0;
  for (size_t i = begin; i < end; i++)
    out[i - begin] = steps[i];
  rk_api->steps_free(steps);
  return end - begin;
}

smrules_json *rk_violation(smrules_ctx *ctx, const char *tensor) {
  smrules_json *j = rk_api->violation(ctx);
  if (tensor)
    rk_api->json_str(j, "tensor", tensor);
  return j;
}
