/* lua_pattern.h - the steps Lua's pattern matcher takes, counted before it
 * runs (lua_sandbox.c charges them to the instruction budget, as PCRE2's
 * match steps are charged in base/regex.h).
 *
 * The count walks the algorithm of Lua 5.4's lstrlib.c (backtracking
 * over the same pattern items, captures and back-references, in the same
 * order) without building any result: a step is one subject byte tested
 * against a pattern item, one byte a back-reference or %b compares, one
 * call of the matcher.  It stops as soon as the count passes `limit`, so
 * counting a catastrophic pattern costs no more than the budget it is
 * refused for.  A malformed pattern or one too complex for Lua is left to
 * the original function, which raises its own error: the count is then
 * whatever was walked.  Internal to core/lua. */
#ifndef SMR_LUA_PATTERN_H
#define SMR_LUA_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct smr_pattern_count {
  uint64_t steps;
  bool over; /* passed the limit: the call must be refused */
} smr_pattern_count;

/* string.find / string.match from byte offset `init` (0-based, already
 * made relative as Lua does; > n: no search at all), `plain` for find's
 * fourth argument (or a pattern without special characters). */
smr_pattern_count smr_pattern_find(const char *s, size_t n, const char *p,
                                   size_t m, size_t init, bool plain,
                                   uint64_t limit);
/* string.gsub: every match up to `max_n` replacements. */
smr_pattern_count smr_pattern_gsub(const char *s, size_t n, const char *p,
                                   size_t m, int64_t max_n, uint64_t limit);

/* string.gmatch, one call of its iterator: from `*src` (offset), with the
 * end of the last match `*last` (-1: none); both advanced as the
 * iterator advances them.  *found: whether there was a match. */
smr_pattern_count smr_pattern_gmatch_next(const char *s, size_t n,
                                          const char *p, size_t m, size_t *src,
                                          int64_t *last, bool *found,
                                          uint64_t limit);

/* Whether Lua's find takes the pattern as plain text (none of
 * "^$*+?.([%-"). */
bool smr_pattern_is_plain(const char *p, size_t m);

#endif
