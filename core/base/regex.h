/* regex.h - Python-compatible regular expressions (PCRE2) with "search"
 * semantics: a pattern matches when it matches anywhere in the subject, as
 * Python's re.search does (docs/formats.md#collections-files). */
#ifndef SMR_REGEX_H
#define SMR_REGEX_H

#include <stdbool.h>

#include "base/common.h"

typedef struct smr_regex smr_regex;

/* Compile; on error SMR_ERR_USAGE with the PCRE2 message and the offset of
 * the error inside the pattern. */
int smr_regex_compile(const char *pattern, smr_regex **out, smr_error *err);
bool smr_regex_search(const smr_regex *re, const char *subject);
void smr_regex_free(smr_regex *re);

#endif
