/* fuzz_lua_pattern.c - libFuzzer target for the step counter of Lua
 * patterns (core/lua/lua_pattern.c), which walks whatever pattern a rule
 * passes to string.find/match/gmatch/gsub before Lua's own matcher sees
 * it: malformed patterns, unbalanced captures, back-references to nothing
 * and deep nesting must only end the count, never read outside the
 * strings.  The first byte is the pattern's length, the rest pattern then
 * subject; each is copied with a terminating NUL, as Lua's strings have. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lua/lua_pattern.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t m = data[0] < size - 1 ? data[0] : size - 1;
  size_t n = size - 1 - m;
  char *p = malloc(m + 1), *s = malloc(n + 1);
  if (!p || !s) {
    free(p);
    free(s);
    return 0;
  }
  memcpy(p, data + 1, m);
  p[m] = '\0';
  memcpy(s, data + 1 + m, n);
  s[n] = '\0';
  const uint64_t limit = 100000;
  smr_pattern_find(s, n, p, m, 0, false, limit);
  smr_pattern_find(s, n, p, m, n / 2, smr_pattern_is_plain(p, m), limit);
  smr_pattern_gsub(s, n, p, m, (int64_t)n + 1, limit);
  size_t src = 0;
  int64_t last = -1;
  bool found = true;
  for (int k = 0; k < 8 && found; k++)
    smr_pattern_gmatch_next(s, n, p, m, &src, &last, &found, limit);
  free(p);
  free(s);
  return 0;
}
