/* ptrmap.h - a map from pointers to indexes, for tables keyed by interned
 * strings (whose pointers identify them): constant time where a linear
 * scan would make input with many distinct keys cost quadratic time. */
#ifndef SMR_PTRMAP_H
#define SMR_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct smr_ptrmap {
  const void **keys; /* open addressing; NULL: an empty slot */
  size_t *vals;
  size_t cap, n; /* cap is 0 or a power of two */
} smr_ptrmap;

/* The index stored for `key`, or false when there is none. */
bool smr_ptrmap_get(const smr_ptrmap *m, const void *key, size_t *val);
/* Store `val` for `key` (not NULL), replacing what was there. */
void smr_ptrmap_put(smr_ptrmap *m, const void *key, size_t val);
void smr_ptrmap_free(smr_ptrmap *m);

#endif
