/* test_s3_xml.c - the pieces of the S3 client that need no server: XML
 * answers (ListObjectsV2 pages with entities in keys, attributes, empty
 * elements, malformed input; <Error> bodies), timestamps, percent
 * encoding, and the S3 location helpers. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "aws/aws_xml.h"
#include "source/s3.h"
#include "source/source.h"
#include "source/source_s3.h"
#include "unit.h"

static const char PAGE[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>b</Name><Prefix>t/index/</Prefix><KeyCount>2</KeyCount>"
    "<MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>"
    "<Contents><Key>t/index/000000000/000000000001_w&amp;1.json</Key>"
    "<LastModified>2024-01-02T03:04:05.250Z</LastModified>"
    "<ETag>&quot;abc&quot;</ETag><Size>357</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>t/a &lt;b&gt; &#233;&#x4E2D;&apos;.json</Key>"
    "<Size>0</Size></Contents>"
    "<NextContinuationToken>1ueGcx/+=</NextContinuationToken>"
    "</ListBucketResult>";

static void test_list_page(void) {
  smr_s3_objects o = {0};
  bool truncated = false;
  char *token = NULL;
  smr_error e;
  CHECK_EQ_INT(
      smr_s3_parse_list(PAGE, strlen(PAGE), &o, &truncated, &token, &e),
      SMR_OK);
  CHECK_EQ_INT(o.n, 2);
  CHECK(truncated);
  CHECK_STR(token, "1ueGcx/+=");
  if (o.n == 2) {
    CHECK_STR(o.v[0].key, "t/index/000000000/000000000001_w&1.json");
    CHECK_EQ_INT(o.v[0].size, 357);
    CHECK_EQ_INT(o.v[0].mtime_ns, 1704164645250000000LL);
    CHECK_STR(o.v[1].key, "t/a <b> \xC3\xA9\xE4\xB8\xAD'.json");
    CHECK_EQ_INT(o.v[1].size, 0);
    CHECK_EQ_INT(o.v[1].mtime_ns, -1);
  }
  free(token);
  smr_s3_objects_free(&o);
}

static void test_last_page_and_empty(void) {
  const char *xml = "<ListBucketResult><IsTruncated>false</IsTruncated>"
                    "<Prefix/></ListBucketResult>";
  smr_s3_objects o = {0};
  bool truncated = true;
  char *token = NULL;
  smr_error e;
  CHECK_EQ_INT(smr_s3_parse_list(xml, strlen(xml), &o, &truncated, &token, &e),
               SMR_OK);
  CHECK_EQ_INT(o.n, 0);
  CHECK(!truncated);
  CHECK(token == NULL);
  smr_s3_objects_free(&o);
}

static int parse(const char *xml) {
  smr_s3_objects o = {0};
  bool truncated;
  char *token = NULL;
  smr_error e;
  int rc = smr_s3_parse_list(xml, strlen(xml), &o, &truncated, &token, &e);
  free(token);
  smr_s3_objects_free(&o);
  return rc;
}

static void test_malformed(void) {
  CHECK_EQ_INT(parse("<Error><Code>x</Code></Error>"), SMR_ERR_FORMAT);
  CHECK_EQ_INT(parse("<ListBucketResult><Contents><Key>a</Key>"),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(parse("<ListBucketResult><Contents><Key>a&bogus;</Key>"
                     "<Size>1</Size></Contents></ListBucketResult>"),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(parse("<ListBucketResult><Contents><Key>a</Key>"
                     "<Size>-1</Size></Contents></ListBucketResult>"),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(parse("<ListBucketResult><Contents><Key>a&#0;</Key>"
                     "<Size>1</Size></Contents></ListBucketResult>"),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(parse("<ListBucketResult><Contents><Size>1</Size>"
                     "</Contents></ListBucketResult>"),
               SMR_ERR_FORMAT);
}

static void test_unescape(void) {
  const char *in = "a&amp;b&lt;&gt;&quot;&apos;&#65;&#x42;";
  char *s = smr_xml_unescape(in, strlen(in));
  CHECK_STR(s, "a&b<>\"'AB");
  free(s);
  CHECK(smr_xml_unescape("&amp", 4) == NULL);
  CHECK(smr_xml_unescape("&#xD800;", 8) == NULL);
  CHECK(smr_xml_unescape("&#1114112;", 10) == NULL);
  CHECK(smr_xml_unescape("a<b", 3) == NULL);
}

static void test_error_body(void) {
  const char *xml = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                    "<Message>Please reduce your request rate &amp; "
                    "retry.</Message></Error>";
  char code[32], msg[64];
  smr_s3_parse_error(xml, strlen(xml), code, sizeof code, msg, sizeof msg);
  CHECK_STR(code, "SlowDown");
  CHECK_STR(msg, "Please reduce your request rate & retry.");
  smr_s3_parse_error(NULL, 0, code, sizeof code, msg, sizeof msg);
  CHECK_STR(code, "");
}

static void test_encode(void) {
  smr_buf b = {0};
  smr_s3_encode(&b, "a b/c+d~e_f.g-h%&=\xC3\xA9", true);
  CHECK_STR(b.data, "a%20b/c%2Bd~e_f.g-h%25%26%3D%C3%A9");
  smr_buf_free(&b);
  smr_s3_encode(&b, "x/y", false);
  CHECK_STR(b.data, "x%2Fy");
  smr_buf_free(&b);
}

static void test_time(void) {
  CHECK_EQ_INT(smr_s3_parse_time("1970-01-01T00:00:01Z"), 1000000000LL);
  CHECK_EQ_INT(smr_s3_parse_time("1970-01-01T00:00:00.5Z"), 500000000LL);
  CHECK_EQ_INT(smr_s3_parse_time("yesterday"), -1);
  /* out of range (regression: 9999-99-99 overflowed the ns product) */
  CHECK_EQ_INT(smr_s3_parse_time("9999-99-99T99:99:99Z"), -1);
  CHECK_EQ_INT(smr_s3_parse_time("9999-12-31T23:59:59Z"), -1);
  CHECK_EQ_INT(smr_s3_parse_time("-999-01-01T00:00:00Z"), -1);
  CHECK_EQ_INT(smr_s3_parse_time("2024-13-01T00:00:00Z"), -1);
  CHECK(smr_s3_parse_time("2261-12-31T23:59:59Z") > 0);
}

static void test_locations(void) {
  CHECK(smr_is_s3_location("s3://bucket/x"));
  CHECK(!smr_is_s3_location("/data/s3://x"));
  smr_source *s = NULL;
  smr_error e;
  CHECK_EQ_INT(smr_source_s3_open("s3://a/b", &s, &e), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_source_s3_open("s3://bad bucket/b", &s, &e), SMR_ERR_USAGE);
  CHECK_EQ_INT(smr_source_s3_open("s3:///x", &s, &e), SMR_ERR_USAGE);
  if (smr_source_s3_open("s3://bucket//a/b//", &s, &e) == SMR_OK) {
    CHECK_STR(smr_source_root(s), "s3://bucket/a/b");
    CHECK(smr_source_is_remote(s));
    /* paths leaving the prefix are refused before any request */
    char *buf = NULL;
    size_t len = 0;
    CHECK_EQ_INT(smr_source_read_all(s, "../x", 10, &buf, &len, &e),
                 SMR_ERR_IO);
    CHECK_EQ_INT(smr_source_read_all(s, "/etc/passwd", 10, &buf, &len, &e),
                 SMR_ERR_IO);
    CHECK_EQ_INT(smr_source_read_all(s, "a/./b", 10, &buf, &len, &e),
                 SMR_ERR_IO);
    CHECK_EQ_INT(smr_source_read_all(s, "a//b", 10, &buf, &len, &e),
                 SMR_ERR_IO);
    smr_range r;
    CHECK_EQ_INT(smr_source_read_range(s, "events/../../x", 0, 1, &r, &e),
                 SMR_ERR_IO);
    smr_source_close(s);
  } else {
    CHECK(!"open failed");
  }
}

static void test_cache_dir(void) {
  char tmpl[] = "/tmp/smrules-s3-unit-XXXXXX";
  char *base = mkdtemp(tmpl);
  CHECK(base != NULL);
  if (!base)
    return;
  setenv("XDG_CACHE_HOME", base, 1);
  char *a = smr_s3_cache_dir("s3://bucket/p");
  char *b = smr_s3_cache_dir("s3://bucket/p/");
  char *c = smr_s3_cache_dir("s3://bucket/q");
  CHECK(a && b && c);
  if (a && b && c) {
    CHECK_STR(a, b);
    CHECK(strcmp(a, c) != 0);
    CHECK(strncmp(a, base, strlen(base)) == 0);
  }
  smr_s3_set_endpoint("http://127.0.0.1:9");
  char *d = smr_s3_cache_dir("s3://bucket/p");
  CHECK(d && a && strcmp(a, d) != 0);
  smr_s3_set_endpoint(NULL);
  free(a);
  free(b);
  free(c);
  free(d);
  char *cmd = smr_xasprintf("rm -rf '%s'", base);
  CHECK(system(cmd) == 0);
  free(cmd);
}

/* Locations reach their kind of source through locate.c's table: the
 * scheme picks S3, anything else is the local disk, and a setting goes to
 * the kind that knows it. */
static void test_source_kinds(void) {
  CHECK(smr_location_is_remote("s3://bucket/p"));
  CHECK(!smr_location_is_remote("/data/s3://x"));
  CHECK(!smr_location_is_remote("relative/dir"));
  CHECK(!smr_source_configure("no-such-setting", "x"));
  char tmpl[] = "/tmp/smrules-s3-kind-XXXXXX";
  char *base = mkdtemp(tmpl);
  CHECK(base != NULL);
  if (!base)
    return;
  /* a local trial's state: in $XDG_STATE_HOME/smrules/trials/<key>, one
   * folder a trial, none for a folder that is not there */
  setenv("XDG_STATE_HOME", base, 1);
  char *t1 = smr_xasprintf("%s/t1", base), *t2 = smr_xasprintf("%s/t2", base);
  CHECK(mkdir(t1, 0755) == 0 && mkdir(t2, 0755) == 0);
  char *l1 = smr_location_state_dir(t1), *l1b = smr_location_state_dir(t1);
  char *l2 = smr_location_state_dir(t2);
  char *want = smr_xasprintf("%s/smrules/trials/", base);
  CHECK(l1 && strncmp(l1, want, strlen(want)) == 0);
  CHECK(l1 && l1b && strcmp(l1, l1b) == 0);
  CHECK(l1 && l2 && strcmp(l1, l2) != 0);
  char *gone = smr_xasprintf("%s/missing", base);
  CHECK(smr_location_state_dir(gone) == NULL);
  free(gone);
  free(want);
  free(l1);
  free(l1b);
  free(l2);
  free(t1);
  free(t2);
  setenv("XDG_CACHE_HOME", base, 1);
  char *a = smr_location_state_dir("s3://bucket/p");
  CHECK(smr_source_configure("s3-endpoint", "http://127.0.0.1:9"));
  char *b = smr_location_state_dir("s3://bucket/p");
  CHECK(smr_source_configure("s3-endpoint", NULL));
  char *c = smr_location_state_dir("s3://bucket/p");
  CHECK(a && b && c && strncmp(a, base, strlen(base)) == 0);
  CHECK(a && b && strcmp(a, b) != 0); /* the endpoint reached S3 */
  CHECK(a && c && strcmp(a, c) == 0);
  free(a);
  free(b);
  free(c);
  char *cmd = smr_xasprintf("rm -rf '%s'", base);
  CHECK(system(cmd) == 0);
  free(cmd);
}

int main(void) {
  TEST_RUN(test_list_page);
  TEST_RUN(test_last_page_and_empty);
  TEST_RUN(test_malformed);
  TEST_RUN(test_unescape);
  TEST_RUN(test_error_body);
  TEST_RUN(test_encode);
  TEST_RUN(test_time);
  TEST_RUN(test_locations);
  TEST_RUN(test_cache_dir);
  TEST_RUN(test_source_kinds);
  return TEST_REPORT("test_s3_xml");
}
