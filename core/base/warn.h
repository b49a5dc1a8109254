/* warn.h - lines on stderr that input can multiply (warnings about a
 * trial's files, rules' log lines), rate-limited and deduplicated: a
 * warning said once is not said again, each kind of line is said at most
 * `per_kind` times, and at most SMR_WARN_TOTAL lines are said in all.
 * The rest are counted (distinct warnings once, while a 512 KB table of
 * their hashes has room), and at exit one line a kind says how many were
 * not shown.  An index file naming 200,000 tensors that share one record
 * cost 640 MB of stderr; it now costs 20 lines and a count. */
#ifndef SMR_WARN_H
#define SMR_WARN_H

#include <stdbool.h>
#include <stddef.h>

#define SMR_WARN_PER_KIND 20 /* warnings of one kind */
#define SMR_WARN_TOTAL 1000  /* lines of every kind together */

/* Prints "smrules: <text>\n" on stderr (text from fmt, at most 2047
 * bytes, made safe for a terminal) unless `kind` (any string; 63
 * distinct kinds are told apart, the rest share one count) has had
 * `per_kind` lines, or SMR_WARN_TOTAL lines were printed.  Returns
 * whether it printed.  Thread-safe. */
bool smr_say_limited(const char *kind, size_t per_kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "smrules: warning: <text>" with per_kind SMR_WARN_PER_KIND, and a
 * text already shown (of that kind) is not shown again. */
bool smr_warn(const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* How many lines were not shown so far (all kinds). */
size_t smr_warn_suppressed(void);

/* Says now, once a kind, how many lines were not shown (also done at
 * exit); the counts start again. */
void smr_warn_summary(void);

#endif
