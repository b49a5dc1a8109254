/* s3_xml.c - S3's answers: ListObjectsV2 pages and <Error> bodies, read
 * with the AWS XML scanner of aws/aws_xml.c. */
#include "source/s3.h"

#include "aws/aws_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
  if (!smr_xml_open(p, end, "ListBucketResult", &empty))
    return smr_error_set(err, SMR_ERR_FORMAT, "ListObjectsV2", -1,
                         "the answer is not a ListBucketResult");
  const char *c;
  while ((c = smr_xml_open(p, end, "Contents", &empty)) != NULL) {
    const char *close = smr_xml_close(c, end, "Contents");
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
