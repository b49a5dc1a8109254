/* test_json.c - the JSON model (base/json.h): building and reading,
 * both writing styles, parsing and its errors (offset and what was
 * expected), the depth and size limits, the kept member, and the number
 * and string conventions every JSON the project writes follows. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "smrules/json.h"
#include "unit.h"

static smr_json *parse(const char *text) {
  smr_json_error err;
  smr_json *v = smr_json_parse(text, strlen(text), NULL, &err);
  if (!v)
    fprintf(stderr, "parse failed at %zu: %s\n", err.offset, err.what);
  return v;
}

/* The text `text` parses to, written in `style`. */
static char *rewrite(const char *text, smr_json_style style) {
  smr_json *v = parse(text);
  char *out = v ? smr_json_text(v, style) : NULL;
  smr_json_free(v);
  return out;
}

static void check_rewrite(const char *text, smr_json_style style,
                          const char *want) {
  char *got = rewrite(text, style);
  CHECK_STR(got, want);
  free(got);
}

static void test_build_and_write(void) {
  smr_json *o = smr_json_obj_new();
  smr_json_add_int(o, "i", -7);
  smr_json_add_num(o, "d", 0.1);
  smr_json_add_num(o, "whole", 3);
  smr_json_add_num(o, "nan", NAN);
  smr_json_add_bool(o, "b", true);
  smr_json_add_null(o, "z");
  smr_json_add_str(o, "s", "a\"b\\c\n");
  smr_json_add_str(o, "nul", NULL);
  smr_json_add_raw(o, "raw", "[1,2]");
  smr_json_add_raw(o, "empty_raw", "");
  double nums[] = {1.5, INFINITY, 1e-05};
  smr_json_add_nums(o, "nums", nums, 3);
  int64_t ints[] = {INT64_MIN, 0};
  smr_json_add_ints(o, "ints", ints, 2);
  const char *strs[] = {"x", "y"};
  smr_json_add_strs(o, "strs", strs, 2);
  smr_json_add_int(smr_json_add_obj(o, "o"), "k", 1);
  char *c = smr_json_text(o, SMR_JSON_COMPACT);
  CHECK_STR(c, "{\"i\":-7,\"d\":0.1,\"whole\":3.0,\"nan\":null,\"b\":true,"
               "\"z\":null,\"s\":\"a\\\"b\\\\c\\n\",\"nul\":null,"
               "\"raw\":[1,2],\"empty_raw\":null,\"nums\":[1.5,null,1e-05],"
               "\"ints\":[-9223372036854775808,0],\"strs\":[\"x\",\"y\"],"
               "\"o\":{\"k\":1}}");
  char *s = smr_json_text(o, SMR_JSON_SPACED);
  CHECK(strstr(s, "{\"i\": -7, \"d\": 0.1, ") == s);
  CHECK(strstr(s, "\"nums\": [1.5, null, 1e-05], ") != NULL);
  CHECK(strstr(s, "\"raw\": [1,2], ") != NULL); /* raw text as given */
  free(c);
  free(s);
  smr_json_free(o);
}

static void test_add_set_del(void) {
  smr_json *o = smr_json_obj_new();
  smr_json_add_int(o, "a", 1);
  smr_json_add_int(o, "b", 2);
  smr_json_add_int(o, "a", 3); /* add appends, a lookup finds the last */
  CHECK_EQ_INT(smr_json_len(o), 3);
  CHECK_EQ_INT((int64_t)smr_json_num_or(o, "a", -1), 3);
  smr_json_set(o, "b", smr_json_str("two")); /* set replaces in place */
  smr_json_set(o, "c", smr_json_bool(false));
  char *t = smr_json_text(o, SMR_JSON_COMPACT);
  CHECK_STR(t, "{\"a\":1,\"b\":\"two\",\"a\":3,\"c\":false}");
  free(t);
  CHECK(smr_json_del(o, "a"));
  CHECK(!smr_json_del(o, "a"));
  t = smr_json_text(o, SMR_JSON_COMPACT);
  CHECK_STR(t, "{\"b\":\"two\",\"c\":false}");
  free(t);
  smr_json_clear(o);
  CHECK_EQ_INT(smr_json_len(o), 0);
  smr_json_free(o);
}

static void test_read(void) {
  smr_json *v = parse("{\"a\": {\"b\": [1, 2.5, \"x\", true]}, \"n\": 4,"
                      " \"f\": [0.5, 1.5], \"i\": [3, 4], \"s\": \"t\"}");
  CHECK(v != NULL);
  if (!v)
    return;
  const smr_json *b = smr_json_path(v, "a", "b", NULL);
  CHECK_EQ_INT(smr_json_type_of(b), SMR_JSON_ARR);
  CHECK_EQ_INT(smr_json_len(b), 4);
  CHECK_NEAR(smr_json_num_at(b, 1), 2.5, 0);
  CHECK(isnan(smr_json_num_at(b, 2)));
  CHECK_NEAR(smr_json_num_at(b, 3), 1, 0);
  CHECK_STR(smr_json_text_of(smr_json_at(b, 2)), "x");
  CHECK(smr_json_path(v, "a", "nope", NULL) == NULL);
  CHECK(smr_json_path(v, "n", "deeper", NULL) == NULL);
  CHECK_NEAR(smr_json_num_or(v, "n", 0), 4, 0);
  CHECK_NEAR(smr_json_num_or(v, "s", -1), -1, 0);
  /* arrays of numbers only are packed, and read the same */
  const smr_json *f = smr_json_get(v, "f"), *i = smr_json_get(v, "i");
  CHECK_EQ_INT(smr_json_len(f), 2);
  CHECK_NEAR(smr_json_num_at(f, 1), 1.5, 0);
  CHECK_NEAR(smr_json_num_at(i, 0), 3, 0);
  CHECK(isnan(smr_json_num_at(i, 2)));
  CHECK(smr_json_at(f, 0) == NULL); /* packed: no node per item */
  CHECK_STR(smr_json_key(smr_json_at(v, 1)), "n");
  CHECK(smr_json_is_obj(smr_json_get(v, "a")));
  CHECK(!smr_json_is_obj(smr_json_get(v, "n")));
  smr_json_free(v);
}

/* Written, parsed and written again: the same text, in both styles. */
static void test_round_trip(void) {
  const char *texts[] = {
      "{\"a\":[1,2.5,\"x\",{\"b\":null}],\"t\":true,\"f\":false}",
      "[1e-05,-0.0,1e+300,0.1,123456.789,-9223372036854775807]",
      "{\"s\":\"\xc3\xa9\xf0\x9f\x98\x80 \\\"q\\\" \\\\ \\t\\r\\n\\u0001\"}",
      "[[],{},[[[]]],\"\"]",
      "{\"dup\":1,\"dup\":2}",
  };
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
    for (int style = 0; style < 2; style++) {
      char *once = rewrite(texts[k], (smr_json_style)style);
      char *twice = once ? rewrite(once, (smr_json_style)style) : NULL;
      CHECK_STR(twice, once);
      if (style == SMR_JSON_COMPACT)
        CHECK_STR(once, texts[k]);
      free(once);
      free(twice);
    }
  /* what JSON allows in more than one way is written one way */
  check_rewrite("[1.0, 1E2, 0.5e1, -0, 1e400, 12345678901234567890]",
                SMR_JSON_COMPACT,
                "[1.0,100.0,5.0,0,null,1.2345678901234567e+19]");
  check_rewrite(" { \"a\" :\t[ ]\n, \"\\/\" : \"\\b\\f\" } ", SMR_JSON_SPACED,
                "{\"a\": [], \"/\": \"\\u0008\\u000c\"}");
  check_rewrite("[\"\\ud800x\"]", SMR_JSON_COMPACT, "[\"\xef\xbf\xbdx\"]");
  check_rewrite("\"\\u00e9\\ud83d\\ude00\\u001f\"", SMR_JSON_COMPACT,
                "\"\xc3\xa9\xf0\x9f\x98\x80\\u001f\"");
}

/* Bytes that are not UTF-8 are written as U+FFFD; DEL and controls are
 * escaped: the text is always valid JSON and valid UTF-8. */
static void test_strings_written_safely(void) {
  smr_json *o = smr_json_obj_new();
  smr_json_add_str(o, "\xff", "a\x7f\xc3\xa9\xc3");
  char *t = smr_json_text(o, SMR_JSON_COMPACT);
  CHECK_STR(t, "{\"\\ufffd\":\"a\\u007f\xc3\xa9\\ufffd\"}");
  free(t);
  smr_json_free(o);
  /* the spaced style writes controls as \u00XX and leaves DEL (as
   * ProfilerReport's files always have), still never bytes that are not
   * UTF-8 */
  o = smr_json_obj_new();
  smr_json_add_str(o, "p", "a:1\nb:\t2\x7f\xc3");
  t = smr_json_text(o, SMR_JSON_SPACED);
  CHECK_STR(t, "{\"p\": \"a:1\\u000ab:\\u00092\x7f\\ufffd\"}");
  free(t);
  smr_json_free(o);
}

/* take: a member handed over whole, the rest unchanged. */
static void test_take(void) {
  smr_json *v = parse("{\"a\": 1, \"d\": {\"x\": [1, 2]}, \"b\": 2}");
  smr_json *d = smr_json_take(v, "d");
  CHECK(smr_json_is_obj(d));
  CHECK(smr_json_take(v, "d") == NULL);
  char *t = smr_json_text(v, SMR_JSON_COMPACT);
  CHECK_STR(t, "{\"a\":1,\"b\":2}");
  free(t);
  t = smr_json_text(d, SMR_JSON_COMPACT);
  CHECK_STR(t, "{\"x\":[1,2]}");
  free(t);
  smr_json_free(d);
  smr_json_free(v);
  CHECK(smr_json_take(NULL, "a") == NULL);
}

static void check_error(const char *text, size_t offset, const char *what) {
  smr_json_error err;
  smr_json *v = smr_json_parse(text, strlen(text), NULL, &err);
  CHECK(v == NULL);
  smr_json_free(v);
  CHECK_EQ_INT(err.offset, offset);
  if (!strstr(err.what, what)) {
    fprintf(stderr, "error for %s: \"%s\", expected \"%s\"\n", text, err.what,
            what);
    CHECK(!"error message");
  }
}

static void test_errors_name_offset(void) {
  check_error("", 0, "a value, not the end");
  check_error("{\"a\":1,}", 7, "a string");
  check_error("{\"a\" 1}", 5, "':' after a member name");
  check_error("[1 2]", 3, "',' or ']'");
  check_error("[1,", 3, "a value, not the end");
  check_error("{\"a\":1", 6, "',' or '}'");
  check_error("\"abc", 0, "a closing '\"'");
  check_error("\"a\tb\"", 2, "no control character");
  check_error("\"\\x\"", 2, "one of");
  check_error("\"\\u12g4\"", 5, "a hex digit");
  check_error("\"\\u0000\"", 1, "no \\u0000");
  check_error("01", 0, "no leading zero");
  check_error("1.", 2, "a digit after '.'");
  check_error("1e+", 3, "a digit in the exponent");
  check_error("-", 0, "a value");
  check_error("tru", 0, "a value");
  check_error("NaN", 0, "a value");
  check_error("{} x", 3, "the end of the text");
  check_error("[1] [2]", 4, "the end of the text");
}

static void test_limits(void) {
  char deep[200];
  memset(deep, '[', 100);
  memset(deep + 100, ']', 100);
  smr_json_error err;
  smr_json *v = smr_json_parse(deep, 200, NULL, &err); /* default: 64 */
  CHECK(v == NULL);
  CHECK_EQ_INT(err.offset, 64);
  CHECK(strstr(err.what, "nesting deeper than 64") != NULL);
  smr_json_limits lim = {.max_depth = 100};
  v = smr_json_parse(deep, 200, &lim, &err);
  CHECK(v != NULL);
  smr_json_free(v);
  lim.max_depth = 99;
  CHECK(smr_json_parse(deep, 200, &lim, &err) == NULL);
  CHECK_EQ_INT(err.offset, 99);
  smr_json_limits small = {.max_bytes = 5};
  CHECK(smr_json_parse("[1,2,3]", 7, &small, &err) == NULL);
  CHECK_EQ_INT(err.offset, 5);
  CHECK(strstr(err.what, "at most 5 bytes") != NULL);
  v = smr_json_parse("[1,2]", 5, &small, &err);
  CHECK(v != NULL);
  smr_json_free(v);
  /* the length given is the end: a NUL-less buffer is never read past */
  v = smr_json_parse("[1]trailing", 3, NULL, &err);
  CHECK(v != NULL);
  smr_json_free(v);
}

/* keep_member: a root member that renders back unchanged is kept as its
 * text in keep_style; one that would not is a tree. */
static void test_kept_member(void) {
  const char *text = "{\"k\":{\"a\":1,\"b\":{\"c\":\"d\"}},\"n\":{\"x\":1}}";
  smr_json_limits lim = {.keep_member = "k", .keep_style = SMR_JSON_SPACED};
  smr_json_error err;
  smr_json *v = smr_json_parse(text, strlen(text), &lim, &err);
  CHECK(v != NULL);
  if (!v)
    return;
  const smr_json *k = smr_json_get(v, "k");
  CHECK_EQ_INT(smr_json_type_of(k), SMR_JSON_RAW);
  CHECK_STR(smr_json_text_of(k), "{\"a\": 1, \"b\": {\"c\": \"d\"}}");
  CHECK_EQ_INT(smr_json_type_of(smr_json_get(v, "n")), SMR_JSON_OBJ);
  char *spaced = smr_json_text(v, SMR_JSON_SPACED);
  char *plain = rewrite(text, SMR_JSON_SPACED);
  CHECK_STR(spaced, plain); /* the same text as the tree would write */
  free(spaced);
  free(plain);
  smr_json_free(v);
  const char *odd = "{\"k\":{\"a\":1.50}}"; /* would write 1.5: a tree */
  v = smr_json_parse(odd, strlen(odd), &lim, &err);
  CHECK_EQ_INT(smr_json_type_of(smr_json_get(v, "k")), SMR_JSON_OBJ);
  smr_json_free(v);
}

/* The kept member's text without a tree (objects, arrays, plain ASCII
 * strings, canonical integers, literals) must be what the tree would
 * give: the same document text, the same type, the same error. */
static void check_kept(const char *text, int max_depth,
                       smr_json_type want_type) {
  smr_json_limits keep = {.max_depth = max_depth,
                          .keep_member = "k",
                          .keep_style = SMR_JSON_SPACED};
  smr_json_limits tree = {.max_depth = max_depth};
  smr_json_error e1, e2;
  smr_json *a = smr_json_parse(text, strlen(text), &keep, &e1);
  smr_json *b = smr_json_parse(text, strlen(text), &tree, &e2);
  CHECK((a == NULL) == (b == NULL));
  if (!a || !b) {
    CHECK_EQ_INT(e1.offset, e2.offset);
    CHECK_STR(e1.what, e2.what);
    CHECK_EQ_INT(want_type, SMR_JSON_NULL); /* NULL here: an error */
  } else {
    CHECK_EQ_INT(smr_json_type_of(smr_json_get(a, "k")), want_type);
    char *ta = smr_json_text(a, SMR_JSON_SPACED);
    char *tb = smr_json_text(b, SMR_JSON_SPACED);
    CHECK_STR(ta, tb);
    free(ta);
    free(tb);
  }
  smr_json_free(a);
  smr_json_free(b);
}

static void test_kept_member_plain(void) {
  /* plain: respaced as text */
  check_kept("{\"k\":{\"a\":1,\"b\":[1,-2,{\"c\":\"d\"}],\"e\":true,\"f\":null,"
             "\"g\":false,\"h\":\"x:y,z {}[]\",\"\":{},\"i\":[],\"a\":0},"
             "\"n\":1}",
             0, SMR_JSON_RAW);
  check_kept("{\"k\":{\"n\":-999999999999999999}}", 0, SMR_JSON_RAW);
  /* not plain, decided by the tree: kept when it writes back the same */
  check_kept("{\"k\":{\"a\":\"\\n\\\"\"}}", 0, SMR_JSON_RAW);
  check_kept("{\"k\":{\"a\":1234567890123456789}}", 0, SMR_JSON_RAW);
  check_kept("{\"k\":{\"\xc3\xa9\":1}}", 0, SMR_JSON_RAW);
  check_kept("{\"k\":{\"a\":2.5}}", 0, SMR_JSON_RAW);
  /* ... and a tree when it would not */
  check_kept("{\"k\":{\"a\":-0}}", 0, SMR_JSON_OBJ);
  check_kept("{\"k\":{\"a\": 1}}", 0, SMR_JSON_OBJ);
  check_kept("{\"k\":{\"a\":1E2}}", 0, SMR_JSON_OBJ);
  check_kept("{\"k\":{\"a\":\"\\/\"}}", 0, SMR_JSON_OBJ);
  check_kept("{\"k\":{\"a\":\"\x7f\"}}", 0, SMR_JSON_OBJ);
  /* not an object: left alone */
  check_kept("{\"k\":[1,2]}", 0, SMR_JSON_ARR);
  /* errors where the tree finds them */
  check_kept("{\"k\":{\"a\":1,}}", 0, SMR_JSON_NULL);
  check_kept("{\"k\":{\"a\":01}}", 0, SMR_JSON_NULL);
  check_kept("{\"k\":{\"a\":[1}}", 0, SMR_JSON_NULL);
  check_kept("{\"k\":{\"a\"", 0, SMR_JSON_NULL);
  check_kept("{\"k\":{\"a\":tru}}", 0, SMR_JSON_NULL);
  check_kept("{\"k\":{\"a\":{\"b\":[1]}}}", 4, SMR_JSON_RAW);
  check_kept("{\"k\":{\"a\":{\"b\":[1]}}}", 3, SMR_JSON_NULL);
}

/* ASan reserves terabytes of shadow memory: no data limit under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifndef UNDER_ASAN
/* The process's data size (private writable memory: brk and mmap), bytes. */
static long long data_bytes(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmData: %lld kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return kb * 1024;
}
#endif

/* A kept member is checked on its text, never built as a tree: parsing a
 * report whose kept member has 200,000 snapshots (ProfilerReport's
 * CPUBottleneck on a long job) fits in twice the text's size more.  As a
 * tree it took nine times the text for the moment it was checked, and
 * ProfilerReport's peak grew with the job's length. */
static void test_kept_member_memory(void) {
#ifdef UNDER_ASAN
  fprintf(stderr, "test_kept_member_memory: skipped under ASan\n");
#else
  if (data_bytes() < 0) {
    fprintf(stderr, "test_kept_member_memory: no /proc, skipped\n");
    return;
  }
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    size_t n = 200000, cap = 64 + n * 48, len = 0;
    char *text = malloc(cap);
    if (!text)
      _exit(3);
    len += (size_t)snprintf(text, cap, "{\"n\":1,\"k\":{");
    for (size_t i = 0; i < n; i++)
      len += (size_t)snprintf(text + len, cap - len,
                              "%s\"%zu.0212\":{\"GPUs\":%zu,\"CPUs\":1}",
                              i ? "," : "", 1700000000 + i, i % 7);
    len += (size_t)snprintf(text + len, cap - len, "}}");
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = (rlim_t)(data_bytes() + 2 * (long long)len);
    if (setrlimit(RLIMIT_DATA, &lim) != 0)
      _exit(4);
    smr_json_limits keep = {.keep_member = "k", .keep_style = SMR_JSON_SPACED};
    smr_json *v = smr_json_parse(text, len, &keep, NULL); /* aborts if out */
    const char *k = smr_json_text_of(smr_json_get(v, "k"));
    _exit(k && strncmp(k, "{\"1700000000.0212\": {\"GPUs\": 0, ", 32) == 0 ? 0
                                                                           : 5);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status))
    fprintf(stderr, "the parse died of signal %d (out of memory: a tree?)\n",
            WTERMSIG(status));
  CHECK(WIFEXITED(status));
  CHECK_EQ_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
#endif
}

/* Python's repr of a float. */
static void test_numbers(void) {
  const struct {
    double v;
    const char *s;
  } cases[] = {{1, "1.0"},
               {0.1, "0.1"},
               {1e16, "1e+16"},
               {1e15, "1000000000000000.0"},
               {1e-05, "1e-05"},
               {0.0001, "0.0001"},
               {-2.5, "-2.5"},
               {1.5e-07, "1.5e-07"},
               {123456.789, "123456.789"},
               {-0.0, "-0.0"},
               {5e-324, "5e-324"},
               {1.7976931348623157e308, "1.7976931348623157e+308"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char b[40];
    smr_json_fmt_double(cases[i].v, b, sizeof b);
    CHECK_STR(b, cases[i].s);
  }
}

/* An object of many members (hashed lookups): set, get, obj_at, del and
 * take agree with a plain scan, duplicates included. */
static void test_many_members(void) {
  smr_json *o = smr_json_obj_new();
  char k[32];
  for (int i = 0; i < 5000; i++) {
    snprintf(k, sizeof k, "k%d", i);
    smr_json_set(o, k, smr_json_int(i));
  }
  for (int i = 0; i < 5000; i += 7) { /* replaced in place */
    snprintf(k, sizeof k, "k%d", i);
    smr_json_set(o, k, smr_json_int(-i));
  }
  smr_json_add_int(o, "k3", 33); /* a duplicate: lookups find it */
  CHECK_EQ_INT(smr_json_len(o), 5001);
  CHECK_EQ_INT((int64_t)smr_json_num_or(o, "k14", 0), -14);
  CHECK_EQ_INT((int64_t)smr_json_num_or(o, "k15", 0), 15);
  CHECK_EQ_INT((int64_t)smr_json_num_or(o, "k3", 0), 33);
  CHECK_STR(smr_json_key(smr_json_at(o, 14)), "k14");
  CHECK(smr_json_get(o, "k5000") == NULL);
  CHECK(smr_json_del(o, "k3")); /* both members of the key */
  CHECK(smr_json_get(o, "k3") == NULL);
  smr_json *t = smr_json_take(o, "k10");
  CHECK_EQ_INT((int64_t)smr_json_num_or(o, "k11", 0), 11);
  CHECK_EQ_INT(smr_json_len(o), 4998);
  smr_json_free(t);
  smr_json *sub = smr_json_obj_at(o, "k20"); /* an int: replaced in place */
  smr_json_add_int(sub, "x", 1);
  CHECK(smr_json_obj_at(o, "k20") == sub);
  CHECK_STR(smr_json_key(smr_json_at(o, 18)), "k20");
  CHECK_EQ_INT((int64_t)smr_json_num_or(smr_json_get(o, "k20"), "x", 0), 1);
  smr_json_free(o);
}

int main(void) {
  TEST_RUN(test_build_and_write);
  TEST_RUN(test_add_set_del);
  TEST_RUN(test_read);
  TEST_RUN(test_round_trip);
  TEST_RUN(test_strings_written_safely);
  TEST_RUN(test_take);
  TEST_RUN(test_many_members);
  TEST_RUN(test_errors_name_offset);
  TEST_RUN(test_limits);
  TEST_RUN(test_kept_member);
  TEST_RUN(test_kept_member_plain);
  TEST_RUN(test_kept_member_memory);
  TEST_RUN(test_numbers);
  return TEST_REPORT("test_json");
}
