/* aws_xml.c - just enough XML for AWS answers (S3 listings and errors,
 * SNS Publish results).  AWS writes flat elements without CDATA, and
 * escapes '<' and '&' inside text, so finding "<Tag>" ... "</Tag>" is
 * exact; entities in text (S3 keys may contain '&', '<', quotes, any
 * character as &#N;) are decoded. */
#include "aws/aws_xml.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Append code point `cp` as UTF-8; false for NUL, surrogates, > U+10FFFF. */
static bool put_utf8(smr_buf *b, unsigned long cp) {
  unsigned char u[4];
  size_t n;
  if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return false;
  if (cp < 0x80) {
    u[0] = (unsigned char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (unsigned char)(0xC0 | cp >> 6);
    u[1] = (unsigned char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (unsigned char)(0xE0 | cp >> 12);
    u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[2] = (unsigned char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (unsigned char)(0xF0 | cp >> 18);
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  smr_buf_append(b, u, n);
  return true;
}

/* Decode the entity starting at s[0] == '&' (n bytes available); returns
 * its length or 0 when malformed. */
static size_t entity(smr_buf *b, const char *s, size_t n) {
  static const struct {
    const char *name;
    char c;
  } named[] = {{"amp;", '&'},
               {"lt;", '<'},
               {"gt;", '>'},
               {"quot;", '"'},
               {"apos;", '\''}};
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
    size_t k = strlen(named[i].name);
    if (n > k && memcmp(s + 1, named[i].name, k) == 0) {
      smr_buf_append(b, &named[i].c, 1);
      return k + 1;
    }
  }
  if (n < 4 || s[1] != '#')
    return 0;
  bool hex = s[2] == 'x';
  size_t i = hex ? 3 : 2;
  unsigned long cp = 0;
  size_t digits = 0;
  for (; i < n && s[i] != ';' && digits < 8; i++, digits++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'          ? c - '0'
            : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
            : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : -1;
    if (d < 0)
      return 0;
    cp = cp * (hex ? 16 : 10) + (unsigned long)d;
  }
  if (digits == 0 || i >= n || s[i] != ';' || !put_utf8(b, cp))
    return 0;
  return i + 1;
}

char *smr_xml_unescape(const char *s, size_t n) {
  smr_buf b = {0};
  smr_buf_append(&b, "", 0);
  for (size_t i = 0; i < n;) {
    if (s[i] == '\0' || s[i] == '<')
      goto bad;
    if (s[i] != '&') {
      size_t j = i;
      while (j < n && s[j] != '&' && s[j] != '<' && s[j] != '\0')
        j++;
      smr_buf_append(&b, s + i, j - i);
      i = j;
      continue;
    }
    size_t k = entity(&b, s + i, n - i);
    if (k == 0)
      goto bad;
    i += k;
  }
  smr_buf_append(&b, "", 1);
  return b.data;
bad:
  smr_buf_free(&b);
  return NULL;
}

/* Find "<tag>" in [p, end); also accepts the empty element "<tag/>". */
const char *smr_xml_open(const char *p, const char *end, const char *tag,
                         bool *empty) {
  size_t k = strlen(tag);
  while (p < end) {
    const char *lt = memchr(p, '<', (size_t)(end - p));
    if (!lt || (size_t)(end - lt) < k + 2)
      return NULL;
    char after = lt[k + 1];
    if (memcmp(lt + 1, tag, k) == 0 &&
        (after == '>' || after == '/' || after == ' ' || after == '\t' ||
         after == '\r' || after == '\n')) {
      /* attributes (xmlns=...) are skipped; values hold no '>' in S3's
       * answers */
      const char *gt = memchr(lt + k + 1, '>', (size_t)(end - lt - k - 1));
      if (!gt)
        return NULL;
      *empty = gt[-1] == '/';
      return gt + 1;
    }
    p = lt + 1;
  }
  return NULL;
}

const char *smr_xml_close(const char *p, const char *end, const char *tag) {
  size_t k = strlen(tag);
  while (p < end) {
    const char *lt = memchr(p, '<', (size_t)(end - p));
    if (!lt || (size_t)(end - lt) < k + 3)
      return NULL;
    if (lt[1] == '/' && memcmp(lt + 2, tag, k) == 0 && lt[k + 2] == '>')
      return lt;
    p = lt + 1;
  }
  return NULL;
}

char *smr_xml_child(const char *p, const char *end, const char *tag,
                    const char **next) {
  bool empty = false;
  const char *v = smr_xml_open(p, end, tag, &empty);
  if (!v)
    return NULL;
  if (empty) {
    if (next)
      *next = v;
    return smr_xstrdup("");
  }
  const char *c = smr_xml_close(v, end, tag);
  if (!c)
    return NULL;
  if (next)
    *next = c + strlen(tag) + 3;
  return smr_xml_unescape(v, (size_t)(c - v));
}
