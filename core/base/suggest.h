/* suggest.h - "did you mean ...?": the candidate closest to a misspelt
 * name, by edit distance (case-insensitive). */
#ifndef SMR_SUGGEST_H
#define SMR_SUGGEST_H

#include <stddef.h>

/* Levenshtein distance of a and b, ignoring case (bounded: names longer
 * than 255 characters count as far from everything). */
size_t smr_edit_distance(const char *a, const char *b);

/* The candidate nearest to `word`, or NULL when none is close enough to
 * be what was meant (distance at most a third of the word's length, at
 * least 2; ties: the first). */
const char *smr_suggest(const char *word, const char *const *cands, size_t n);

#endif
