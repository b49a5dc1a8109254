/* s3_xml.c - just enough XML for S3 answers: ListObjectsV2 pages and
 * <Error> bodies.  S3 writes flat elements without attributes or CDATA,
 * and escapes '<' and '&' inside text, so finding "<Tag>" ... "</Tag>" is
 * exact; entities in text (keys may contain '&', '<', quotes, any
 * character as &#N;) are decoded. */
#include "source/s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static const char *find_open(const char *p, const char *end, const char *tag,
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

static const char *find_close(const char *p, const char *end, const char *tag) {
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
  const char *v = find_open(p, end, tag, &empty);
  if (!v)
    return NULL;
  if (empty) {
    if (next)
      *next = v;
    return smr_xstrdup("");
  }
  const char *c = find_close(v, end, tag);
  if (!c)
    return NULL;
  if (next)
    *next = c + strlen(tag) + 3;
  return smr_xml_unescape(v, (size_t)(c - v));
}

int64_t smr_s3_parse_time(const char *s) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  int frac_len = 0;
  unsigned frac = 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
             &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
    return -1;
  /* Nanoseconds since 1970 fit in int64 until 2262; a field out of range
   * is a malformed time, not one to normalise. */
  if (tm.tm_year < 1970 || tm.tm_year > 2261 || tm.tm_mon < 1 ||
      tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 ||
      tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 ||
      tm.tm_sec > 60)
    return -1;
  const char *dot = strchr(s, '.');
  if (dot && sscanf(dot + 1, "%9u%n", &frac, &frac_len) == 1)
    for (int i = frac_len; i < 9; i++)
      frac *= 10;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t t = timegm(&tm);
  if (t == (time_t)-1)
    return -1;
  return (int64_t)t * 1000000000 + frac;
}

static void objects_add(smr_s3_objects *o, char *key, int64_t size,
                        int64_t mtime) {
  if (o->n == o->cap) {
    o->cap = o->cap ? o->cap * 2 : 256;
    o->v = smr_xrealloc(o->v, o->cap * sizeof *o->v);
  }
  o->v[o->n++] = (smr_s3_object){key, size, mtime};
}

void smr_s3_objects_free(smr_s3_objects *o) {
  for (size_t i = 0; i < o->n; i++)
    free(o->v[i].key);
  free(o->v);
  memset(o, 0, sizeof *o);
}

/* One <Contents> element: Key, Size and LastModified. */
static int parse_contents(const char *p, const char *end, smr_s3_objects *out,
                          smr_error *err) {
  char *key = smr_xml_child(p, end, "Key", NULL);
  char *size = smr_xml_child(p, end, "Size", NULL);
  char *mod = smr_xml_child(p, end, "LastModified", NULL);
  char *stop = NULL;
  long long sz = size ? strtoll(size, &stop, 10) : -1;
  int rc = SMR_OK;
  if (!key || !key[0] || !size || stop == size || *stop || sz < 0)
    rc = smr_error_set(err, SMR_ERR_FORMAT, "ListObjectsV2", -1,
                       "a <Contents> element without a valid Key and Size");
  else
    objects_add(out, key, sz, mod ? smr_s3_parse_time(mod) : -1);
  if (rc != SMR_OK)
    free(key);
  free(size);
  free(mod);
  return rc;
}

int smr_s3_parse_list(const char *xml, size_t len, smr_s3_objects *out,
                      bool *truncated, char **next_token, smr_error *err) {
  const char *p = xml, *end = xml + len;
  *truncated = false;
  *next_token = NULL;
  bool empty;
  if (!find_open(p, end, "ListBucketResult", &empty))
    return smr_error_set(err, SMR_ERR_FORMAT, "ListObjectsV2", -1,
                         "the answer is not a ListBucketResult");
  const char *c;
  while ((c = find_open(p, end, "Contents", &empty)) != NULL) {
    const char *close = find_close(c, end, "Contents");
    if (empty || !close)
      return smr_error_set(err, SMR_ERR_FORMAT, "ListObjectsV2",
                           (int64_t)(c - xml), "unterminated <Contents>");
    int rc = parse_contents(c, close, out, err);
    if (rc)
      return rc;
    p = close + strlen("</Contents>");
  }
  char *tr = smr_xml_child(xml, end, "IsTruncated", NULL);
  *truncated = tr && strcmp(tr, "true") == 0;
  free(tr);
  if (*truncated)
    *next_token = smr_xml_child(xml, end, "NextContinuationToken", NULL);
  return SMR_OK;
}

void smr_s3_parse_error(const char *xml, size_t len, char *code, size_t ncode,
                        char *msg, size_t nmsg) {
  code[0] = msg[0] = '\0';
  if (!xml || !len)
    return;
  char *c = smr_xml_child(xml, xml + len, "Code", NULL);
  char *m = smr_xml_child(xml, xml + len, "Message", NULL);
  if (c)
    snprintf(code, ncode, "%s", c);
  if (m)
    snprintf(msg, nmsg, "%s", m);
  free(c);
  free(m);
}
