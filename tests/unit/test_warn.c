/* test_warn.c - rate-limited warnings (core/base/warn.c): a warning shown
 * is not shown again; a kind shows at most its cap, then counts; a hidden
 * warning repeated is counted once; log lines (smr_say_limited) are not
 * deduplicated but capped; kinds are counted apart; the summary starts the
 * counts again.  The lines themselves go to stderr (the test log). */
#include <stdio.h>

#include "base/warn.h"
#include "unit.h"

static void test_dedup_and_cap(void) {
  smr_warn_summary();
  CHECK(smr_warn("k1", "same"));
  CHECK(!smr_warn("k1", "same")); /* shown already: neither shown nor counted */
  CHECK_EQ_INT(smr_warn_suppressed(), 0);
  for (int i = 1; i < SMR_WARN_PER_KIND; i++)
    CHECK(smr_warn("k1", "distinct %d", i));
  CHECK(!smr_warn("k1", "one too many"));
  CHECK_EQ_INT(smr_warn_suppressed(), 1);
  CHECK(!smr_warn("k1", "one too many")); /* a hidden repeat: counted once */
  CHECK_EQ_INT(smr_warn_suppressed(), 1);
  CHECK(!smr_warn("k1", "another"));
  CHECK_EQ_INT(smr_warn_suppressed(), 2);
  CHECK(smr_warn("k2", "another")); /* another kind has its own cap */
  smr_warn_summary();
  CHECK_EQ_INT(smr_warn_suppressed(), 0);
  CHECK(smr_warn("k1", "same")); /* counts start again */
  smr_warn_summary();
}

static void test_log_lines(void) {
  for (int i = 0; i < 5; i++)
    CHECK(smr_say_limited("log", 5, "the same line")); /* no dedup */
  CHECK(!smr_say_limited("log", 5, "the same line"));
  CHECK(!smr_say_limited("log", 5, "the same line"));
  CHECK_EQ_INT(smr_warn_suppressed(), 2); /* every line past the cap */
  smr_warn_summary();
}

static void test_total_cap(void) {
  size_t shown = 0;
  for (int k = 0; k < 100; k++) {
    char kind[32];
    snprintf(kind, sizeof kind, "kind %d", k < 60 ? k : 60); /* 61 kinds */
    for (int i = 0; i < SMR_WARN_PER_KIND; i++)
      shown += smr_warn(kind, "w %d %d", k, i);
  }
  CHECK_EQ_INT(shown, SMR_WARN_TOTAL);
  CHECK_EQ_INT(smr_warn_suppressed(), 100 * SMR_WARN_PER_KIND - SMR_WARN_TOTAL);
  smr_warn_summary();
}

int main(void) {
  TEST_RUN(test_dedup_and_cap);
  TEST_RUN(test_log_lines);
  TEST_RUN(test_total_cap);
  return TEST_REPORT("test_warn");
}
