/* utf8.h - recognising valid UTF-8.  Includes nothing but the C library:
 * the JSON model (json.c), which the plugin kits compile too, uses it. */
#ifndef SMR_UTF8_H
#define SMR_UTF8_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one
 * (overlong forms, surrogates and code points above U+10FFFF included). */
size_t smr_utf8_len(const unsigned char *s, size_t n);

#endif
