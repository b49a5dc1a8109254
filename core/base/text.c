/* text.c - terminal-safe copies (see text.h). */
#include "base/text.h"

#include <stdbool.h>
#include <string.h>

#include "base/common.h"

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
