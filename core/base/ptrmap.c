/* ptrmap.c - pointers to indexes by open addressing (see ptrmap.h). */
#include "base/ptrmap.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/common.h"

/* Pointers are aligned and close together: multiply to spread them over
 * the high bits, and take those (Fibonacci hashing). */
static size_t slot_of(const void *key, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 32) & (cap - 1);
}

bool smr_ptrmap_get(const smr_ptrmap *m, const void *key, size_t *val) {
  if (m->cap == 0)
    return false;
  for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == NULL)
      return false;
    if (m->keys[i] == key) {
      *val = m->vals[i];
      return true;
    }
  }
}

static void insert(smr_ptrmap *m, const void *key, size_t val) {
  size_t i = slot_of(key, m->cap);
  while (m->keys[i] != NULL && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  m->n += m->keys[i] == NULL;
  m->keys[i] = key;
  m->vals[i] = val;
}

static void grow(smr_ptrmap *m) {
  smr_ptrmap bigger = {.cap = m->cap ? m->cap * 2 : 16};
  bigger.keys = smr_xcalloc(bigger.cap, sizeof *bigger.keys);
  bigger.vals = smr_xmalloc(bigger.cap * sizeof *bigger.vals);
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i])
      insert(&bigger, m->keys[i], m->vals[i]);
  smr_ptrmap_free(m);
  *m = bigger;
}

void smr_ptrmap_put(smr_ptrmap *m, const void *key, size_t val) {
  if (2 * (m->n + 1) > m->cap) /* at most half full */
    grow(m);
  insert(m, key, val);
}

void smr_ptrmap_free(smr_ptrmap *m) {
  free(m->keys);
  free(m->vals);
  m->keys = NULL;
  m->vals = NULL;
  m->cap = m->n = 0;
}
