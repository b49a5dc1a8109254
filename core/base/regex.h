/* regex.h - Python-compatible regular expressions (PCRE2) with "search"
 * semantics: a pattern matches when it matches anywhere in the subject, as
 * Python's re.search does (docs/formats.md#collections-files). */
#ifndef SMR_REGEX_H
#define SMR_REGEX_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

typedef struct smr_regex smr_regex;

/* Compile; on error SMR_ERR_USAGE with the PCRE2 message and the offset of
 * the error inside the pattern. */
int smr_regex_compile(const char *pattern, smr_regex **out, smr_error *err);
bool smr_regex_search(const smr_regex *re, const char *subject);

/* A budget of PCRE2 match steps (the unit of its match limit) shared by
 * several searches, e.g. a Lua rule's instruction budget: the work of a
 * catastrophic pattern is counted, not only bounded per subject. */
typedef struct smr_regex_meter {
  uint64_t budget; /* steps the searches may take */
  uint64_t spent;  /* never less than the steps taken */
  bool exhausted;  /* a search needed more than was left */
} smr_regex_meter;

/* smr_regex_search, counted in `m` (NULL: not counted).  The search runs
 * under a match limit that starts small and grows fourfold while it is
 * reached, each attempt counted at its limit, so `spent` is at least the
 * work done and at most about five times it (or the first limit, 16
 * steps, when that is more); when the limit would pass
 * what is left of the budget, the search stops there, `exhausted` is set
 * and the result is false.  Once exhausted, nothing more is searched. */
bool smr_regex_search_metered(const smr_regex *re, const char *subject,
                              smr_regex_meter *m);
void smr_regex_free(smr_regex *re);

#endif
