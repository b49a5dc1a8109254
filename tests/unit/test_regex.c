/* test_regex.c - the PCRE2 wrapper with the Python regexes smdebug data
 * uses (docs/formats.md#default-collections), re.search semantics and thread
 * safety. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/regex.h"
#include "unit.h"

/* Compile `pattern` and search `subject` with it. */
static bool search(const char *pattern, const char *subject) {
  smr_regex *re = NULL;
  smr_error err;
  smr_error_clear(&err);
  if (smr_regex_compile(pattern, &re, &err) != SMR_OK) {
    fprintf(stderr, "compile '%s' failed: %s\n", pattern, err.msg);
    return false;
  }
  bool m = smr_regex_search(re, subject);
  smr_regex_free(re);
  return m;
}

static void test_weights_regex(void) {
  const char *re = "^(?!gradient).*weight";
  CHECK(search(re, "Net_fc1.weight"));
  CHECK(!search(re, "gradient/Net_fc1.weight"));
  CHECK(!search(re, "Net_fc1.bias"));
}

static void test_losses_regex(void) {
  const char *re = "[Ll]oss_(?!input).*output";
  CHECK(search(re, "CrossEntropyLoss_output_0"));
  CHECK(!search(re, "CrossEntropyLoss_input_0"));
  CHECK(search(re, "my_loss_output_1"));
}

static void test_xgboost_losses_lookbehind(void) {
  const char *re = "^[a-zA-z]+-.+(?<!(auc|map))$";
  CHECK(search(re, "train-rmse"));
  CHECK(search(re, "validation-logloss"));
  CHECK(!search(re, "validation-auc"));
  CHECK(!search(re, "train-map"));
  CHECK(!search(re, "hyperparameters/eta"));
}

static void test_search_is_unanchored(void) {
  CHECK(search(".*relu_output", "layer1.relu_output_0"));
  CHECK(search("relu", "layer1.relu_output_0"));
  CHECK(search("^gradient", "gradient/x"));
  CHECK(!search("^gradient", "x/gradient"));
  CHECK(search("output_0$", "relu_output_0"));
  CHECK(search("", "anything"));
  CHECK(search("^predictions$", "predictions"));
  CHECK(!search("^predictions$", "predictions2"));
  /* Python's $ also matches before a final newline */
  CHECK(search("a$", "a\n"));
}

static void test_python_syntax(void) {
  CHECK(search("(?P<n>ab)(?P=n)", "xxabab"));
  CHECK(search("^average_shap/.*[^/bias]$", "average_shap/f1"));
  CHECK(!search("^average_shap/.*[^/bias]$", "average_shap/bias"));
  CHECK(search("\\d+", "step_12"));
  CHECK(search("caf\\w", "caf\xc3\xa9")); /* \w is Unicode-aware */
}

static void test_compile_error(void) {
  smr_regex *re = (smr_regex *)1;
  smr_error err;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_regex_compile("ab(c", &re, &err), SMR_ERR_USAGE);
  CHECK(re == NULL);
  CHECK_EQ_INT(err.status, SMR_ERR_USAGE);
  CHECK(err.offset == 4);
  CHECK(strstr(err.msg, "ab(c") != NULL);
  CHECK_EQ_INT(smr_regex_compile("(?<!a+)b", &re, &err), SMR_ERR_USAGE);
}

static void test_invalid_utf8_subject(void) {
  /* Not a match and not a crash. */
  CHECK(!search("^abc$", "ab\xff"));
  CHECK(search("ab", "ab\xff"));
}

#define N_THREADS 4
static smr_regex *shared_re;
static void *thread_search(void *arg) {
  int *bad_count = arg;
  for (int i = 0; i < 2000; i++) {
    if (!smr_regex_search(shared_re, "Net_fc1.weight") ||
        smr_regex_search(shared_re, "gradient/Net_fc1.weight"))
      (*bad_count)++;
  }
  return NULL;
}

/* A catastrophic pattern stops at PCRE2's match limit: not a match.
 * Without the limit it would take 2^40 steps: the test would not end, and
 * the suite's hang guard fails it (no clock here: a busy machine must not
 * fail a bounded search, and test_metered_search counts the work). */
static void test_catastrophic_pattern_is_bounded(void) {
  char subject[64];
  memset(subject, 'a', 40);
  subject[40] = '\0';
  CHECK(!search("^(a|a)*[bc]", subject));
}

/* Metered searches: the same answers, the work counted, and a budget
 * that runs out stops the search there. */
static void test_metered_search(void) {
  smr_regex *plain = NULL, *bad = NULL;
  CHECK_EQ_INT(smr_regex_compile("layer1", &plain, NULL), SMR_OK);
  CHECK_EQ_INT(smr_regex_compile("^(a|a)*[bc]", &bad, NULL), SMR_OK);
  char subject[64];
  memset(subject, 'a', 40);
  subject[40] = '\0';

  smr_regex_meter m = {.budget = UINT64_MAX};
  CHECK(smr_regex_search_metered(plain, "gradient/layer1.weight", &m));
  CHECK(!smr_regex_search_metered(plain, "layer2.weight", &m));
  CHECK(!m.exhausted);
  CHECK(m.spent >= 2 && m.spent <= 64); /* the first limit, twice */

  /* unbounded: PCRE2's match limit ends it, counted in full */
  m = (smr_regex_meter){.budget = UINT64_MAX};
  CHECK(!smr_regex_search_metered(bad, subject, &m));
  CHECK(!m.exhausted);
  CHECK(m.spent >= 1000000);

  /* a budget: spent up to it, then nothing more is searched */
  m = (smr_regex_meter){.budget = 50000};
  CHECK(!smr_regex_search_metered(bad, subject, &m));
  CHECK(m.exhausted);
  CHECK_EQ_INT(m.spent, 50000);
  CHECK(!smr_regex_search_metered(plain, "layer1", &m));
  CHECK_EQ_INT(m.spent, 50000);

  /* a budget too small for a plain match is exhausted, not a miss */
  m = (smr_regex_meter){.budget = 0};
  CHECK(!smr_regex_search_metered(plain, "layer1", &m));
  CHECK(m.exhausted);

  /* no meter: as smr_regex_search */
  CHECK(smr_regex_search_metered(plain, "layer1", NULL));
  smr_regex_free(plain);
  smr_regex_free(bad);
}

static void test_threads_share_pattern(void) {
  CHECK_EQ_INT(smr_regex_compile("^(?!gradient).*weight", &shared_re, NULL),
               SMR_OK);
  pthread_t th[N_THREADS];
  int bad_counts[N_THREADS] = {0};
  for (int i = 0; i < N_THREADS; i++)
    CHECK_EQ_INT(pthread_create(&th[i], NULL, thread_search, &bad_counts[i]),
                 0);
  for (int i = 0; i < N_THREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_INT(bad_counts[i], 0);
  }
  smr_regex_free(shared_re);
}

int main(void) {
  TEST_RUN(test_weights_regex);
  TEST_RUN(test_losses_regex);
  TEST_RUN(test_xgboost_losses_lookbehind);
  TEST_RUN(test_search_is_unanchored);
  TEST_RUN(test_python_syntax);
  TEST_RUN(test_compile_error);
  TEST_RUN(test_invalid_utf8_subject);
  TEST_RUN(test_threads_share_pattern);
  TEST_RUN(test_catastrophic_pattern_is_bounded);
  TEST_RUN(test_metered_search);
  return TEST_REPORT("test_regex");
}
