/* test_sdk_query.c - the SDK's one statistics query (api->query and
 * api->tensor_query, core/host/host_api.c) on a real trial, through the
 * host's function table as a plugin sees it: each tensor's status, the
 * parts of the mask filled and the rest NaN, the same numbers for a value
 * in hand, a plugin that knows a smaller smrules_values getting only that
 * part (nothing written past it), and bad requests refused. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "host/rulectx.h"
#include "smrules/smrules.h"
#include "trial/trial.h"
#include "unit.h"

#define TRIAL "tests/fixtures/trials/exploding_mse_high_lr"
#define GRAD "gradient/Sequential_0.weight"

static smr_trial *open_trial(void) {
  smr_trial *t = NULL;
  smr_error err;
  int rc = smr_trial_open(TRIAL, &(smr_trial_opts){.fresh = true}, &t, &err);
  CHECK_EQ_INT(rc, SMR_OK);
  return rc == SMR_OK ? t : NULL;
}

static bool same_bits(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

static void test_query_statuses_and_parts(void) {
  const smrules_api *api = smr_host_api();
  smr_trial *t = open_trial();
  if (!t)
    return;
  smrules_trial *st = (smrules_trial *)t;
  const char *names[] = {GRAD, "no/such/tensor", "MSELoss_output_0"};
  smrules_values v[3];
  int status[3];
  unsigned what = SMRULES_Q_STATS | SMRULES_Q_STD | SMRULES_Q_ABS_RED(2);
  CHECK_EQ_INT(api->query(st, names, 3, 4, SMRULES_MODE_GLOBAL, what, v,
                          sizeof v[0], status),
               SMRULES_OK);
  CHECK_EQ_INT(status[0], SMRULES_OK);
  CHECK(status[1] < 0 && status[1] != SMRULES_ERR); /* not saved: skipped */
  CHECK_EQ_INT(status[2], SMRULES_OK);
  CHECK_EQ_INT(v[0].stats.count, 4096);
  CHECK(v[0].stats.has_finite && !isnan(v[0].stats.l2));
  CHECK(!isnan(v[0].red[SMRULES_RED_STD]) &&
        !isnan(v[0].abs_red[SMRULES_RED_MEAN]));
  CHECK(isnan(v[0].red[SMRULES_RED_MEAN]) && isnan(v[0].abs_red[0]));
  CHECK(v[1].stats.count == 0 && isnan(v[1].red[SMRULES_RED_STD]));

  /* the same numbers from the value in hand */
  smrules_tensor x;
  CHECK_EQ_INT(api->value(st, GRAD, 4, SMRULES_MODE_GLOBAL, &x), SMRULES_OK);
  smrules_values h;
  CHECK_EQ_INT(api->tensor_query(&x, what, &h, sizeof h), SMRULES_OK);
  CHECK(same_bits(h.stats.l2, v[0].stats.l2) &&
        same_bits(h.stats.min, v[0].stats.min) &&
        h.stats.zeros == v[0].stats.zeros);
  CHECK(same_bits(h.red[SMRULES_RED_STD], v[0].red[SMRULES_RED_STD]));
  CHECK(same_bits(h.abs_red[2], v[0].abs_red[2]));
  /* counts alone: the other statistics NaN */
  CHECK_EQ_INT(api->tensor_query(&x, SMRULES_Q_COUNTS, &h, sizeof h),
               SMRULES_OK);
  CHECK(h.stats.zeros == v[0].stats.zeros && isnan(h.stats.l2));
  api->release(&x);
  CHECK_EQ_INT(api->tensor_query(&x, SMRULES_Q_COUNTS, &h, sizeof h),
               SMRULES_ERR); /* released: no value */
  smr_trial_close(t);
}

/* A plugin built when smrules_values ended before red[] passes that size:
 * each element is that size, and nothing past it is written. */
static void test_query_smaller_values(void) {
  const smrules_api *api = smr_host_api();
  smr_trial *t = open_trial();
  if (!t)
    return;
  enum { OLD = offsetof(smrules_values, red) };
  /* room for a host that would write whole elements: the check sees it */
  unsigned char buf[2 * OLD + 2 * sizeof(smrules_values)];
  memset(buf, 0xa5, sizeof buf);
  const char *names[] = {GRAD, GRAD};
  int status[2];
  CHECK_EQ_INT(api->query((smrules_trial *)t, names, 2, 4, SMRULES_MODE_GLOBAL,
                          SMRULES_Q_STATS | SMRULES_Q_MAX,
                          (smrules_values *)(void *)buf, OLD, status),
               SMRULES_OK);
  smrules_stats s0, s1;
  memcpy(&s0, buf, sizeof s0);
  memcpy(&s1, buf + OLD, sizeof s1);
  CHECK(s0.count == 4096 && s1.count == 4096 && same_bits(s0.l2, s1.l2));
  size_t untouched = 0;
  for (size_t i = 2 * OLD; i < sizeof buf; i++)
    untouched += buf[i] == 0xa5;
  CHECK_EQ_INT(untouched, sizeof buf - 2 * OLD);
  smr_trial_close(t);
}

static void test_query_refuses_bad_requests(void) {
  const smrules_api *api = smr_host_api();
  smr_trial *t = open_trial();
  if (!t)
    return;
  smrules_trial *st = (smrules_trial *)t;
  const char *names[] = {GRAD};
  smrules_values v;
  int status = 12345;
  /* a bit this host does not know (a newer header's): refused, untouched */
  CHECK_EQ_INT(api->query(st, names, 1, 4, SMRULES_MODE_GLOBAL, 1u << 31, &v,
                          sizeof v, &status),
               SMRULES_ERR);
  CHECK_EQ_INT(status, 12345);
  CHECK_EQ_INT(api->query(st, NULL, 1, 4, SMRULES_MODE_GLOBAL, SMRULES_Q_COUNTS,
                          &v, sizeof v, &status),
               SMRULES_ERR);
  CHECK_EQ_INT(api->query(st, names, 1, 4, SMRULES_MODE_GLOBAL,
                          SMRULES_Q_COUNTS, &v, 0, &status),
               SMRULES_ERR);
  CHECK_EQ_INT(api->query(st, NULL, 0, 4, SMRULES_MODE_GLOBAL, SMRULES_Q_COUNTS,
                          NULL, 0, NULL),
               SMRULES_OK); /* nothing asked of nothing */
  smrules_tensor none;
  memset(&none, 0, sizeof none);
  CHECK_EQ_INT(api->tensor_query(&none, SMRULES_Q_STATS, &v, sizeof v),
               SMRULES_ERR);
  smr_trial_close(t);
}

int main(void) {
  TEST_RUN(test_query_statuses_and_parts);
  TEST_RUN(test_query_smaller_values);
  TEST_RUN(test_query_refuses_bad_requests);
  return TEST_REPORT("test_sdk_query");
}
