/* text.c - UTF-8 recognition and terminal-safe copies (see text.h). */
#include "base/text.h"

#include <stdbool.h>
#include <string.h>

#include "base/common.h"

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

char *smr_term_safe(const char *s) {
  smr_buf b = {0};
  const unsigned char *u = (const unsigned char *)(s ? s : "");
  size_t n = strlen((const char *)u);
  for (size_t i = 0; i < n;) {
    unsigned char c = u[i];
    size_t len = c < 0x80 ? 1 : smr_utf8_len(u + i, n - i);
    bool c1 = len == 2 && c == 0xc2 && u[i + 1] < 0xa0; /* U+0080..U+009F */
    if ((c < 0x20 && c != '\t') || c == 0x7f || len == 0 || c1) {
      for (size_t k = 0; k < (len ? len : 1); k++)
        smr_buf_printf(&b, "\\x%02x", u[i + k]);
    } else {
      smr_buf_append(&b, u + i, len);
    }
    i += len ? len : 1;
  }
  smr_buf_append(&b, "", 1);
  return b.data;
}
