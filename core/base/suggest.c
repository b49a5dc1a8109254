/* suggest.c - the closest name to a misspelt one. */
#include "base/suggest.h"

#include <ctype.h>
#include <string.h>

#define MAX_LEN 255

size_t smr_edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > MAX_LEN || m > MAX_LEN)
    return (size_t)-1;
  size_t row[MAX_LEN + 1];
  for (size_t j = 0; j <= m; j++)
    row[j] = j;
  for (size_t i = 1; i <= n; i++) {
    size_t diag = row[0]; /* row[i-1][j-1] */
    row[0] = i;
    for (size_t j = 1; j <= m; j++) {
      size_t up = row[j];
      size_t cost =
          tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
      size_t best = diag + cost;
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[m];
}

const char *smr_suggest(const char *word, const char *const *cands, size_t n) {
  size_t limit = strlen(word) / 3;
  if (limit < 2)
    limit = 2;
  const char *best = NULL;
  size_t best_d = limit + 1;
  for (size_t i = 0; i < n; i++) {
    size_t d = smr_edit_distance(word, cands[i]);
    if (d < best_d) {
      best_d = d;
      best = cands[i];
    }
  }
  return best;
}
