/* utf8.c - recognising valid UTF-8 (see utf8.h). */
#include "base/utf8.h"

size_t smr_utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (c >= 0xf5 || len == 0 || len > n)
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80)
      return 0;
  if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
      (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
    return 0;
  return len;
}
