/* unit.h - a tiny test harness.  Each test binary calls TEST_RUN(fn) for
 * each test function and ends with TEST_REPORT(), which prints
 * "<binary>: N passed, N failed" and returns the exit status. */
#ifndef SMR_UNIT_H
#define SMR_UNIT_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int unit_failed_checks;
static int unit_passed, unit_failed;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      unit_failed_checks++;                                                    \
    }                                                                          \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                     \
  do {                                                                         \
    long long va_ = (long long)(a), vb_ = (long long)(b);                      \
    if (va_ != vb_) {                                                          \
      fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__,          \
              __LINE__, #a, va_, vb_);                                         \
      unit_failed_checks++;                                                    \
    }                                                                          \
  } while (0)

#define CHECK_STR(a, b)                                                        \
  do {                                                                         \
    const char *sa_ = (a), *sb_ = (b);                                         \
    if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                               \
      fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__,      \
              __LINE__, #a, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");       \
      unit_failed_checks++;                                                    \
    }                                                                          \
  } while (0)

#define CHECK_NEAR(a, b, rel)                                                  \
  do {                                                                         \
    double da_ = (a), db_ = (b);                                               \
    if (!(fabs(da_ - db_) <= (rel)*fmax(fabs(db_), 1e-300) ||                  \
          (isnan(da_) && isnan(db_)) || da_ == db_)) {                         \
      fprintf(stderr, "%s:%d: %s == %.17g, expected %.17g\n", __FILE__,        \
              __LINE__, #a, da_, db_);                                         \
      unit_failed_checks++;                                                    \
    }                                                                          \
  } while (0)

#define TEST_RUN(fn)                                                           \
  do {                                                                         \
    int before_ = unit_failed_checks;                                          \
    fn();                                                                      \
    if (unit_failed_checks == before_) {                                       \
      unit_passed++;                                                           \
    } else {                                                                   \
      unit_failed++;                                                           \
      fprintf(stderr, "FAIL %s\n", #fn);                                       \
    }                                                                          \
  } while (0)

#define TEST_REPORT(name)                                                      \
  (printf("%s: %d passed, %d failed\n", (name), unit_passed, unit_failed),     \
   unit_failed ? 1 : 0)

#endif
