/* test_profiler.c - the profiler-output reader: system-line parsing,
 * the reference's file selection for a time range (bisect rules and the
 * 3-minute buffer), inclusive window boundaries, trace-parser semantics
 * (phases, base time, B/E pairing), TF profiler .json.gz files, corrupt
 * lines and incomplete trace files, first/latest timestamps, args, and
 * readers sharing files (alone, interleaved and from two threads). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/path.h"
#include "base/safefs.h"
#include "format/index.h"
#include "profiler/profiler.h"
#include "source/source.h"
#include "unit.h"

static char tmp_root[] = "/tmp/smr_test_profiler_XXXXXX";
static int dir_counter;

/* ---- helpers ---- */

static void write_file(const char *path, const char *text) {
  char *dir = smr_xstrdup(path);
  *strrchr(dir, '/') = '\0';
  smr_mkdirs(dir, 0755);
  free(dir);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* write_file with a formatted path. */
static void write_at(const char *text, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void write_at(const char *text, const char *fmt, ...) {
  char path[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(path, sizeof path, fmt, ap);
  va_end(ap);
  write_file(path, text);
}

static char *new_dir(void) {
  return smr_xasprintf("%s/p%d", tmp_root, ++dir_counter);
}

static smr_profiler *open_quiet(const char *dir) {
  smr_profiler_opts o = {.quiet = true};
  smr_profiler *p = NULL;
  smr_error e;
  CHECK(smr_profiler_open(dir, &o, &p, &e) == SMR_OK);
  return p;
}

#define B_S 1600000000LL /* base time, seconds */
#define B_US (B_S * 1000000LL)

/* ---- system lines ---- */

static void test_sys_line(void) {
  const char *l = "{\"Type\": \"gpu\", \"Name\": \"gpu0\", \"Dimension\": "
                  "\"GPUUtilization\", \"Value\": 8.0, \"NodeId\": \"algo-1\", "
                  "\"Timestamp\": 1591160899.7570894}";
  char scratch[512], why[160];
  smr_sys_line s;
  CHECK_EQ_INT(
      smr_profiler_parse_sys_line(l, strlen(l), scratch, &s, why, sizeof why),
      0);
  CHECK_STR(s.type, "gpu");
  CHECK_STR(s.name, "gpu0");
  CHECK(s.has_name);
  CHECK_STR(s.dimension, "GPUUtilization");
  CHECK_STR(s.node, "algo-1");
  CHECK(s.value == 8.0);
  CHECK(!s.timestamp_is_int);
  CHECK(s.timestamp_ns ==
        (int64_t)(((1591160899.7570894 * 1000) * 1000) * 1000));
  /* compact spacing, escapes, integer timestamp, extra keys, Name null */
  const char *l2 = "{\"Type\":\"m\\u00e9m\",\"Name\":null,\"Dimension\":\"\","
                   "\"Value\":3,\"NodeId\":\"algo-2\",\"Extra\":[1,{\"a\":2}],"
                   "\"Timestamp\":1600000000}";
  CHECK_EQ_INT(
      smr_profiler_parse_sys_line(l2, strlen(l2), scratch, &s, why, sizeof why),
      0);
  CHECK_STR(s.type, "m\xc3\xa9m");
  CHECK(!s.has_name);
  CHECK(s.timestamp_is_int);
  CHECK(s.timestamp_ns == 1600000000LL * 1000000000LL);
  /* duplicate keys: the last wins, as in a Python dict */
  const char *l3 = "{\"Type\":\"a\",\"Type\":\"b\",\"Dimension\":\"d\","
                   "\"Value\":1,\"NodeId\":\"n\",\"Timestamp\":1}";
  CHECK_EQ_INT(
      smr_profiler_parse_sys_line(l3, strlen(l3), scratch, &s, why, sizeof why),
      0);
  CHECK_STR(s.type, "b");
}

static void test_sys_line_errors(void) {
  const char *bad[] = {
      "",
      "{",
      "[1]",
      "{\"Type\":\"a\",\"Dimension\":\"d\",\"Value\":1,\"NodeId\":\"n\"}",
      "{\"Type\":\"a\",\"Dimension\":\"d\",\"Value\":\"1\",\"NodeId\":\"n\","
      "\"Timestamp\":1}",
      "{\"Type\":\"a\",\"Dimension\":\"d\",\"Value\":1,\"NodeId\":\"n\","
      "\"Timestamp\":NaN}",
      "{\"Type\":\"a\",\"Dimension\":\"d\",\"Value\":01,\"NodeId\":\"n\","
      "\"Timestamp\":1}",
      "{\"Type\":\"a\",\"Dimension\":\"d\",\"Value\":1,\"NodeId\":\"n\","
      "\"Timestamp\":1} x",
      "{\"Type\":\"a\tb\",\"Dimension\":\"d\",\"Value\":1,\"NodeId\":\"n\","
      "\"Timestamp\":1}",
      "{\"Type\":\"\xff\",\"Dimension\":\"d\",\"Value\":1,\"NodeId\":\"n\","
      "\"Timestamp\":1}",
  };
  char scratch[512], why[160];
  smr_sys_line s;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    why[0] = '\0';
    CHECK_EQ_INT(smr_profiler_parse_sys_line(bad[i], strlen(bad[i]), scratch,
                                             &s, why, sizeof why),
                 -1);
    CHECK(strstr(why, "expected") != NULL);
  }
}

/* ---- file selection ---- */

/* 21 system files, one per minute from B; each holds an event exactly at
 * `at` (Value = file index) and one 1 µs later. */
static char *system_minutes(int64_t at_us) {
  char *root = new_dir();
  for (int i = 0; i <= 20; i++) {
    char *path = smr_xasprintf("%s/system/incremental/2020091312/%lld.algo-1."
                               "json",
                               root, (long long)(B_S + i * 60));
    char *text = smr_xasprintf(
        "{\"Type\":\"gpu\",\"Name\":\"gpu0\",\"Dimension\":\"GPUUtilization\","
        "\"Value\":%d,\"NodeId\":\"algo-1\",\"Timestamp\":%lld.0}\n"
        "{\"Type\":\"gpu\",\"Name\":\"gpu0\",\"Dimension\":\"GPUUtilization\","
        "\"Value\":%d,\"NodeId\":\"algo-1\",\"Timestamp\":%lld.000001}\n",
        i, (long long)(at_us / 1000000), 100 + i, (long long)(at_us / 1000000));
    write_file(path, text);
    free(text);
    free(path);
  }
  return root;
}

static void check_values(smr_profiler *p, int64_t s, int64_t e, int lo,
                         int hi) {
  smr_sys_events ev;
  smr_error err;
  CHECK(smr_profiler_system_events(p, s, e, &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, hi - lo + 1);
  for (size_t i = 0; i < ev.n; i++)
    CHECK_EQ_INT(ev.v[i].value, lo + (int)i);
  smr_profiler_release_sys(p, &ev);
}

static void test_system_selection(void) {
  /* W = B + 690 s: lo = bisect_right(T, W - 180 s) - 1 = file 8 (480 s),
   * hi = bisect_left(T, W + 180 s) = file 15 (900 s) */
  int64_t w = B_US + 690 * 1000000LL;
  char *root = system_minutes(w);
  smr_profiler *p = open_quiet(root);
  check_values(p, w, w, 8, 15);
  smrules_profiler_info in;
  smr_profiler_info(p, &in);
  CHECK(in.first_us == B_US);
  CHECK(in.latest_us == B_US + 1200 * 1000000LL);
  CHECK_EQ_INT(in.system_files, 21);
  smr_profiler_close(p);
  free(root);
  /* exactly on file timestamps: W - 180 s = file 8 (kept by the -1),
   * W + 180 s = file 14 (bisect_left) */
  w = B_US + 660 * 1000000LL;
  root = system_minutes(w);
  p = open_quiet(root);
  check_values(p, w, w, 8, 14);
  /* a range before every file: lo clamps to 0 */
  smr_sys_events ev;
  smr_error err;
  CHECK(smr_profiler_system_events(p, B_US - 3600000000LL, B_US - 3500000000LL,
                                   &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, 0);
  CHECK_EQ_INT(ev.npins, 1); /* file 0 was read */
  smr_profiler_release_sys(p, &ev);
  smr_profiler_close(p);
  free(root);
}

static void test_boundaries(void) {
  int64_t w = B_US + 690 * 1000000LL;
  char *root = system_minutes(w);
  smr_profiler *p = open_quiet(root);
  /* the sample exactly at the window end and at the next window's start */
  smr_sys_events a, b;
  smr_error err;
  CHECK(smr_profiler_system_events(p, w - 60000000, w, &a, &err) == SMR_OK);
  CHECK(smr_profiler_system_events(p, w, w + 60000000, &b, &err) == SMR_OK);
  /* [W - 60 s, W] reads files 7..15: the events at W, not those 1 µs
   * later; [W, W + 60 s] reads files 8..16: both */
  CHECK_EQ_INT(a.n, 9);
  CHECK_EQ_INT(b.n, 9 + 9);
  smr_profiler_release_sys(p, &a);
  smr_profiler_release_sys(p, &b);
  smr_profiler_close(p);
  free(root);
}

static char *trace_text(int64_t base, const char *phase, const char *name,
                        int64_t ts, int64_t dur) {
  return smr_xasprintf(
      "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
      "{\"start_time_since_epoch_in_micros\": %lld}},\n"
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": "
      "{\"name\": \"%s\"}},\n"
      "{\"name\": \"%s\", \"pid\": 1, \"ph\": \"X\", \"ts\": %lld, \"dur\": "
      "%lld, \"args\": {\"step_num\": \"7\"}}\n]\n",
      (long long)base, phase, name, (long long)ts, (long long)dur);
}

static void test_framework_selection(void) {
  char *root = new_dir();
  int64_t w = B_US + 690 * 1000000LL;
  for (int i = 0; i <= 20; i++) {
    int64_t end = B_US + i * 60000000LL;
    char name[16];
    snprintf(name, sizeof name, "f%d", i);
    char *path = smr_xasprintf(
        "%s/framework/pevents/2020091312/%lld_0-algo-1_pythontimeline.json",
        root, (long long)end);
    char *t = trace_text(B_US, "Step:ModeKeys.TRAIN", name, w - B_US - 1, 2);
    write_file(path, t);
    free(t);
    free(path);
  }
  /* not trace files: never selected, no timestamp */
  write_at("{}", "%s/framework/pytorch/cprofile/x/python_stats.json", root);
  smr_profiler *p = open_quiet(root);
  smr_fw_events ev;
  smr_error err;
  /* lo = bisect_left(T, W - 180 s) = file 9 (540 s), hi =
   * bisect_left(T, W + 180 s) = file 15 (900 s) */
  CHECK(smr_profiler_framework_events(p, w, w, &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, 7);
  for (size_t i = 0; i < ev.n; i++) {
    char name[16];
    snprintf(name, sizeof name, "f%d", 9 + (int)i);
    CHECK_STR(ev.v[i].name, name);
    CHECK_STR(ev.v[i].phase, "Step:ModeKeys.TRAIN");
    CHECK_STR(ev.v[i].node, "algo-1-0");
    CHECK_STR(ev.v[i].file_type, "PythontimelineMetrics");
    CHECK(ev.v[i].start_us == (double)(w - 1) && ev.v[i].end_us == w + 1);
    CHECK(ev.v[i].times_are_int);
  }
  smr_profiler_release_fw(p, &ev);
  /* an event ending exactly at the range start overlaps it */
  CHECK(smr_profiler_framework_events(p, w + 1, w + 5, &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, 7);
  smr_profiler_release_fw(p, &ev);
  CHECK(smr_profiler_framework_events(p, w + 2, w + 5, &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, 0);
  smr_profiler_release_fw(p, &ev);
  smrules_profiler_info in;
  smr_profiler_info(p, &in);
  CHECK(in.first_us == B_US); /* framework only (Decision F13) */
  CHECK(in.latest_us == B_US + 1200 * 1000000LL);
  CHECK_EQ_INT(in.framework_files, 21);
  smr_profiler_close(p);
  free(root);
}

/* ---- readers sharing files ---- */

/* Trace files whose events take their phase from the process name the
 * previous file set (each file names its process after its event), so
 * what a query returns depends on the reader's parser state, that is, on
 * which queries that reader answered before. */
static char *chained_traces(void) {
  char *root = new_dir();
  for (int i = 0; i <= 20; i++) {
    int64_t t = 60000000LL * i;
    char *path = smr_xasprintf(
        "%s/framework/pevents/2020091312/%lld_0-algo-1_pythontimeline.json",
        root, (long long)(B_US + t + 60000000LL));
    char *text = smr_xasprintf(
        "[{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, "
        "\"args\": {\"start_time_since_epoch_in_micros\": %lld}},\n"
        "{\"name\": \"s%d\", \"ph\": \"X\", \"pid\": 1, \"ts\": %lld, "
        "\"dur\": 600000000},\n"
        "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, "
        "\"args\": {\"name\": \"P%d\"}}]\n",
        (long long)B_US, i, (long long)t, i);
    write_file(path, text);
    free(text);
    free(path);
  }
  return root;
}

/* The events of window k (one minute) as text: "name start end;...". */
static char *window_text(smr_profiler *p, int k) {
  smr_fw_events ev;
  smr_error err;
  int64_t s = B_US + 60000000LL * k;
  CHECK(smr_profiler_framework_events(p, s, s + 60000000LL, &ev, &err) ==
        SMR_OK);
  smr_buf b = {0};
  for (size_t i = 0; i < ev.n; i++)
    smr_buf_printf(&b, "%s %s %.0f %.0f;", ev.v[i].name, ev.v[i].phase,
                   ev.v[i].start_us, ev.v[i].end_us);
  smr_profiler_release_fw(p, &ev);
  return b.data ? b.data : smr_xstrdup("");
}

/* A reader sharing files with another answers exactly what a reader of
 * its own answers to the same queries, whatever the other one asks in
 * between (each keeps its parser state); the files outlive the reader
 * that opened them. */
static void test_shared_readers(void) {
  char *root = chained_traces();
  smr_profiler *a = open_quiet(root), *b = smr_profiler_share(a);
  smr_profiler *a1 = open_quiet(root), *b1 = open_quiet(root);
  int differ = 0, nonempty = 0, history_shows = 0;
  for (int k = 0; k < 21; k++) {
    char *x = window_text(a, k), *x1 = window_text(a1, k);
    differ += strcmp(x, x1) != 0;
    free(x1);
    if (k < 9 || k % 3) {
      free(x);
      continue; /* b starts late and asks for every third window only */
    }
    char *y = window_text(b, k), *y1 = window_text(b1, k);
    differ += strcmp(y, y1) != 0;
    nonempty += *y != '\0';
    history_shows += strcmp(x, y) != 0; /* the data is state-sensitive */
    free(x);
    free(y);
    free(y1);
  }
  CHECK_EQ_INT(differ, 0);
  CHECK(nonempty > 3);
  CHECK(history_shows > 0);
  smr_profiler_close(a); /* b keeps the files */
  char *y = window_text(b, 20), *y1 = window_text(b1, 20);
  CHECK_STR(y, y1);
  free(y);
  free(y1);
  smrules_profiler_info in;
  smr_profiler_info(b, &in);
  CHECK_EQ_INT(in.framework_files, 21);
  smr_profiler_close(b);
  smr_profiler_close(a1);
  smr_profiler_close(b1);
  free(root);
}

#define ROUNDS 5

typedef struct reader_job {
  smr_profiler *p;
  char *got[ROUNDS * 21];
} reader_job;

static void *read_windows(void *arg) {
  reader_job *j = arg;
  for (int i = 0; i < ROUNDS * 21; i++)
    j->got[i] = window_text(j->p, i % 21);
  return NULL;
}

/* Readers sharing files may be used from two threads at once (a small
 * cache makes them evict and parse files under each other's feet); each
 * answers what a reader of its own answers alone. */
static void test_shared_readers_threads(void) {
  char *root = chained_traces();
  smr_profiler_opts o = {.quiet = true, .cache_bytes = 1};
  smr_profiler *a = NULL;
  smr_error e;
  CHECK(smr_profiler_open(root, &o, &a, &e) == SMR_OK);
  reader_job alone = {.p = open_quiet(root)};
  read_windows(&alone);
  reader_job j[2] = {{.p = a}, {.p = smr_profiler_share(a)}};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, read_windows, &j[1]) == 0);
  read_windows(&j[0]);
  pthread_join(t, NULL);
  int wrong = 0;
  for (int i = 0; i < ROUNDS * 21; i++) {
    wrong += strcmp(j[0].got[i], alone.got[i]) != 0;
    wrong += strcmp(j[1].got[i], alone.got[i]) != 0;
    free(j[0].got[i]);
    free(j[1].got[i]);
    free(alone.got[i]);
  }
  CHECK_EQ_INT(wrong, 0);
  smr_profiler_close(alone.p);
  smr_profiler_close(j[1].p);
  smr_profiler_close(a);
  free(root);
}

/* ---- trace parser semantics ---- */

typedef struct collected {
  char names[16][32], phases[16][32], args[16][64];
  double start[16], end[16];
  int n;
} collected;

static void collect(void *arg, const smrules_fw_event *e) {
  collected *c = arg;
  if (c->n >= 16)
    return;
  snprintf(c->names[c->n], 32, "%s", e->name);
  snprintf(c->phases[c->n], 32, "%s", e->phase);
  snprintf(c->args[c->n], 64, "%s", e->args ? e->args : "-");
  c->start[c->n] = e->start_us;
  c->end[c->n++] = e->end_us;
}

static void test_begin_end_pairs(void) {
  const char *t =
      "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":"
      "{\"start_time_since_epoch_in_micros\":1000}},"
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":"
      "{\"name\":\"DataLoaderIter\"}},"
      "{\"name\":\"a\",\"ph\":\"B\",\"pid\":1,\"ts\":10},"
      "{\"name\":\"b\",\"ph\":\"B\",\"pid\":1,\"ts\":20},"
      "{\"ph\":\"E\",\"pid\":1,\"ts\":30,\"args\":{\"x\":1}},"
      "{\"ph\":\"E\",\"pid\":1,\"ts\":40},"
      "{\"ph\":\"E\",\"pid\":1,\"ts\":50},"
      "{\"name\":\"c\",\"ph\":\"B\",\"pid\":2,\"ts\":100},"
      "{\"ph\":\"E\",\"pid\":2,\"ts\":90},"
      "{\"name\":\"d\",\"ph\":\"X\",\"pid\":3,\"ts\":5,\"dur\":2.5},"
      "{\"name\":\"i\",\"ph\":\"i\",\"pid\":1,\"ts\":5},"
      "{\"name\":\"nophase\",\"pid\":1,\"ts\":5,\"dur\":1},"
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{}},"
      "{\"name\":\"e\",\"ph\":\"X\",\"pid\":1,\"ts\":7,\"dur\":1}]";
  collected c = {0};
  char why[160];
  int n = smr_profiler_parse_trace(t, strlen(t), "0-algo-2", 0, collect, &c,
                                   why, sizeof why);
  CHECK_EQ_INT(n, 4);
  CHECK_STR(c.names[0], "b"); /* completion order */
  CHECK_STR(c.phases[0], "DataLoaderIter");
  CHECK_STR(c.args[0], "{\"x\":1}"); /* the E's args */
  CHECK(c.start[0] == 1020 && c.end[0] == 1030);
  CHECK_STR(c.names[1], "a");
  CHECK(c.start[1] == 1010 && c.end[1] == 1040);
  CHECK_STR(c.args[1], "-");
  CHECK_STR(c.names[2], "d");
  CHECK_STR(c.phases[2], "Unknown");
  CHECK(c.start[2] == 1005 && c.end[2] == 1007.5);
  /* a later process_name without a name makes the phase "Unknown" */
  CHECK_STR(c.names[3], "e");
  CHECK_STR(c.phases[3], "Unknown");
}

static void test_node_rewrite(void) {
  char *s = smr_profiler_node_rewrite("0-algo-1");
  CHECK_STR(s, "algo-1-0");
  free(s);
  s = smr_profiler_node_rewrite("12-x-algo-3");
  CHECK_STR(s, "algo-3-12-x");
  free(s);
  s = smr_profiler_node_rewrite("1234-ip-10-0-0-1");
  CHECK_STR(s, "1234-ip-10-0-0-1");
  free(s);
}

static void test_incomplete_trace(void) {
  const char *t =
      "[{\"name\":\"d\",\"ph\":\"X\",\"pid\":3,\"ts\":5,\"dur\":2},";
  char why[160];
  CHECK_EQ_INT(smr_profiler_parse_trace(t, strlen(t), "n", 0, NULL, NULL, why,
                                        sizeof why),
               -1);
  CHECK(strstr(why, "expected") != NULL);
  /* in a directory: the file contributes nothing */
  char *root = new_dir();
  write_at(t,
           "%s/framework/pevents/2020091312/"
           "%lld_0-algo-1_pythontimeline.json",
           root, (long long)(B_US + 60000000));
  smr_profiler *p = open_quiet(root);
  smr_fw_events ev;
  smr_error err;
  CHECK(smr_profiler_framework_events(p, 0, B_US * 2, &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, 0);
  smr_profiler_release_fw(p, &ev);
  smr_profiler_close(p);
  free(root);
}

/* ---- corrupt system lines (Decision F14) ---- */

static void test_corrupt_lines(void) {
  char *root = new_dir();
  const char *good = "{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":"
                     "\"CPUUtilization\",\"Value\":%d,\"NodeId\":\"algo-1\","
                     "\"Timestamp\":%lld.5}";
  long long s = B_S + 10;
  char *l1 = smr_xasprintf(good, 1, s), *l2 = smr_xasprintf(good, 2, s),
       *l3 = smr_xasprintf(good, 3, s);
  char *text = smr_xasprintf("%s\n{broken\n%s\r\n\n%s\r{\"Type\":", l1, l2, l3);
  write_at(text, "%s/system/incremental/2020091312/%lld.algo-1.json", root,
           (long long)B_S);
  smr_profiler *p = open_quiet(root);
  smr_sys_events ev;
  smr_error err;
  CHECK(smr_profiler_system_events(p, B_US, B_US + 60000000, &ev, &err) ==
        SMR_OK);
  CHECK_EQ_INT(ev.n, 3);
  for (size_t i = 0; i < ev.n; i++)
    CHECK_EQ_INT(ev.v[i].value, (int)i + 1);
  smr_profiler_release_sys(p, &ev);
  smr_profiler_close(p);
  free(l1);
  free(l2);
  free(l3);
  free(text);
  free(root);
}

/* ---- TF profiler trace.json.gz ---- */

static void test_tf_gz(void) {
  char *root = new_dir();
  char *step = smr_xasprintf("%s/framework/tensorflow/detailed_profiling/"
                             "2020091312/000000001",
                             root);
  int64_t start = B_US + 5000000, end = B_US + 9000000;
  write_at("", "%s/host-1_%lld_%lld.metadata", step, (long long)start,
           (long long)end);
  char *dir = smr_xasprintf("%s/plugins/profile/2020_09_13_12_00_00", step);
  smr_mkdirs(dir, 0755);
  char *gz = smr_xasprintf("%s/host-1.trace.json.gz", dir);
  const char *json =
      "{\"displayTimeUnit\":\"ns\",\"traceEvents\":["
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":5,\"args\":"
      "{\"name\":\"/host:CPU\"}},"
      "{\"name\":\"op\",\"ph\":\"X\",\"pid\":5,\"ts\":10,\"dur\":5,"
      "\"args\":{\"thread_id\":7}}]}";
  gzFile g = gzopen(gz, "wb");
  gzwrite(g, json, (unsigned)strlen(json));
  gzclose(g);
  smr_profiler *p = open_quiet(root);
  smrules_profiler_info in;
  smr_profiler_info(p, &in);
  CHECK(in.framework_first_us == end); /* the .metadata end time */
  smr_fw_events ev;
  smr_error err;
  CHECK(smr_profiler_framework_events(p, start, end, &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, 1);
  if (ev.n == 1) {
    CHECK_STR(ev.v[0].name, "op");
    CHECK_STR(ev.v[0].phase, "/host:CPU");
    CHECK_STR(ev.v[0].node, "host-1");
    CHECK_STR(ev.v[0].file_type, "TFProfilerMetrics");
    CHECK(ev.v[0].start_us == (double)(start + 10));
    CHECK_EQ_INT(ev.v[0].tid, 7);
  }
  smr_profiler_release_fw(p, &ev);
  smr_profiler_close(p);
  free(gz);
  free(dir);
  free(step);
  free(root);
}

/* ---- trace.json.gz inflated in memory, compared with gzread ---- */

/* `text` as one gzip member. */
static void gz_member(smr_buf *out, const char *text, size_t len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  CHECK(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) == Z_OK);
  size_t cap = deflateBound(&z, (uLong)len);
  unsigned char *buf = smr_xmalloc(cap);
  z.next_in = (Bytef *)text;
  z.avail_in = (uInt)len;
  z.next_out = buf;
  z.avail_out = (uInt)cap;
  CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
  smr_buf_append(out, buf, cap - z.avail_out);
  deflateEnd(&z);
  free(buf);
}

/* What gzread makes of the same bytes on disk: 0 and the text, or -1. */
static int gzread_bytes(const smr_buf *b, smr_buf *text) {
  char *path = smr_xasprintf("%s/gz%d", tmp_root, ++dir_counter);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(b->data ? b->data : "", 1, b->len, f);
    fclose(f);
  }
  gzFile g = gzopen(path, "rb");
  int rc = g ? 0 : -1;
  char chunk[4096];
  int n;
  while (g && (n = gzread(g, chunk, sizeof chunk)) > 0)
    smr_buf_append(text, chunk, (size_t)n);
  if (g && n < 0)
    rc = -1;
  if (g)
    gzclose(g);
  free(path);
  return rc;
}

/* smr_profiler_gunzip agrees with gzread; returns its status. */
static int gunzip_like_gzread(const smr_buf *b, size_t max, smr_error *e,
                              char **out, size_t *len) {
  smr_error_clear(e);
  int rc = smr_profiler_gunzip(b->data ? b->data : "", b->len, max,
                               "host.trace.json.gz", out, len, e);
  smr_buf want = {0};
  int grc = gzread_bytes(b, &want);
  if (rc == SMR_OK && grc == 0) {
    CHECK_EQ_INT(*len, want.len);
    CHECK(*len == 0 || memcmp(*out, want.data, *len) == 0);
    CHECK((*out)[*len] == '\0');
  } else if (max >= want.len) {
    CHECK_EQ_INT(rc != SMR_OK, grc != 0); /* both fail or neither */
  }
  smr_buf_free(&want);
  return rc;
}

static void test_gunzip(void) {
  const char *a = "{\"traceEvents\": [", *b = "{\"name\": \"op\"}]}";
  smr_buf one = {0}, two = {0}, junk = {0}, plain = {0}, cut = {0}, bad = {0};
  gz_member(&one, a, strlen(a));
  gz_member(&two, a, strlen(a));
  gz_member(&two, b, strlen(b));
  smr_buf_append(&junk, one.data, one.len);
  smr_buf_append(&junk, "\0\0garbage", 9);
  smr_buf_append(&plain, b, strlen(b));
  smr_buf_append(&cut, one.data, one.len - 5);
  smr_buf_append(&bad, one.data, one.len);
  bad.data[12] ^= 0x5a; /* inside the deflate data */
  char *out = NULL;
  size_t len = 0;
  smr_error e;
  /* one member; two concatenated; a member then bytes that are no member */
  CHECK_EQ_INT(gunzip_like_gzread(&one, 1 << 20, &e, &out, &len), SMR_OK);
  CHECK_STR(out, a);
  free(out);
  CHECK_EQ_INT(gunzip_like_gzread(&two, 1 << 20, &e, &out, &len), SMR_OK);
  CHECK_EQ_INT(len, strlen(a) + strlen(b));
  free(out);
  CHECK_EQ_INT(gunzip_like_gzread(&junk, 1 << 20, &e, &out, &len), SMR_OK);
  CHECK_STR(out, a);
  free(out);
  /* no gzip magic: taken as it is (also empty data) */
  CHECK_EQ_INT(gunzip_like_gzread(&plain, 1 << 20, &e, &out, &len), SMR_OK);
  CHECK_STR(out, b);
  free(out);
  smr_buf empty = {0};
  CHECK_EQ_INT(gunzip_like_gzread(&empty, 1 << 20, &e, &out, &len), SMR_OK);
  CHECK_EQ_INT(len, 0);
  free(out);
  /* cut short (still being written): what it holds, as gzread gives */
  CHECK_EQ_INT(gunzip_like_gzread(&cut, 1 << 20, &e, &out, &len), SMR_OK);
  free(out);
  /* corrupt: an error naming the file and what was expected */
  out = NULL;
  CHECK_EQ_INT(gunzip_like_gzread(&bad, 1 << 20, &e, &out, &len),
               SMR_ERR_FORMAT);
  CHECK(out == NULL);
  CHECK_STR(e.file, "host.trace.json.gz");
  CHECK(strstr(e.msg, "expected gzip data: incorrect data check") != NULL);
  /* the decompressed size is capped */
  CHECK_EQ_INT(gunzip_like_gzread(&two, strlen(a), &e, &out, &len),
               SMR_ERR_FORMAT);
  CHECK_STR(e.file, "host.trace.json.gz");
  char want[80];
  snprintf(want, sizeof want, "expected at most %zu bytes of decompressed data",
           strlen(a));
  CHECK_STR(e.msg, want);
  CHECK_EQ_INT(gunzip_like_gzread(&plain, 3, &e, &out, &len), SMR_ERR_FORMAT);
  CHECK_EQ_INT(gunzip_like_gzread(&two, strlen(a) + strlen(b), &e, &out, &len),
               SMR_OK);
  free(out);
  /* larger than the first guess of the output size: the buffer grows */
  smr_buf big = {0}, many = {0};
  for (int i = 0; i < 20000; i++)
    smr_buf_printf(&big, "{\"name\": \"op%d\", \"ts\": %d},", i, i);
  gz_member(&many, big.data, big.len);
  CHECK_EQ_INT(gunzip_like_gzread(&many, 1 << 24, &e, &out, &len), SMR_OK);
  CHECK_EQ_INT(len, big.len);
  free(out);
  smr_buf_free(&big);
  smr_buf_free(&many);
  smr_buf_free(&one);
  smr_buf_free(&two);
  smr_buf_free(&junk);
  smr_buf_free(&plain);
  smr_buf_free(&cut);
  smr_buf_free(&bad);
}

/* ---- the reader over a source other than the local disk ---- */

/* An in-memory source that lists flat like S3 and counts what is asked
 * of it. */
typedef struct mem_file {
  char *path;
  smr_buf data;
  int64_t mtime_ns;
} mem_file;

typedef struct mem_source {
  smr_source base;
  mem_file *files;
  size_t n;
  int lists, reads, exists;
} mem_source;

static mem_source *M(smr_source *s) {
  return (mem_source *)s;
}

static mem_file *mem_find(mem_source *m, const char *rel) {
  for (size_t i = 0; i < m->n; i++)
    if (strcmp(m->files[i].path, rel) == 0)
      return &m->files[i];
  return NULL;
}

static void mem_close(smr_source *s) {
  mem_source *m = M(s);
  for (size_t i = 0; i < m->n; i++) {
    free(m->files[i].path);
    smr_buf_free(&m->files[i].data);
  }
  free(m->files);
  free(s->root);
  free(m);
}

static int cmp_listed(const void *a, const void *b) {
  return strcmp(((const smr_source_file *)a)->path,
                ((const smr_source_file *)b)->path);
}

static int mem_list(smr_source *s, const char *dir, const char *suffix,
                    smr_source_listing *out, smr_error *err) {
  mem_source *m = M(s);
  m->lists++;
  size_t k = strlen(dir), ks = strlen(suffix);
  for (size_t i = 0; i < m->n; i++) {
    const char *p = m->files[i].path;
    size_t n = strlen(p);
    if (strncmp(p, dir, k) == 0 && p[k] == '/' && n >= ks &&
        strcmp(p + n - ks, suffix) == 0)
      smr_source_listing_add(out, smr_xstrdup(p), (int64_t)m->files[i].data.len,
                             m->files[i].mtime_ns);
  }
  if (out->n > 1)
    qsort(out->files, out->n, sizeof *out->files, cmp_listed);
  return SMR_OK;
}

static bool mem_exists(smr_source *s, const char *rel, int64_t *size,
                       int64_t *mtime_ns) {
  mem_source *m = M(s);
  m->exists++;
  mem_file *f = smr_path_is_safe(rel) ? mem_find(m, rel) : NULL;
  if (f && size)
    *size = (int64_t)f->data.len;
  if (f && mtime_ns)
    *mtime_ns = f->mtime_ns;
  return f != NULL;
}

static int mem_read_all(smr_source *s, const char *rel, size_t max, char **buf,
                        size_t *len, smr_error *err) {
  mem_source *m = M(s);
  m->reads++;
  if (!smr_path_is_safe(rel))
    return smr_error_set(err, SMR_ERR_IO, rel, -1,
                         "cannot open: path leads outside the trial prefix");
  mem_file *f = mem_find(m, rel);
  if (!f)
    return smr_error_set(err, SMR_ERR_IO, rel, -1,
                         "cannot open: No such file or directory");
  if (f->data.len > max)
    return smr_error_set(err, SMR_ERR_FORMAT, rel, -1, "too large");
  *buf = smr_xmalloc(f->data.len + 1);
  if (f->data.len)
    memcpy(*buf, f->data.data, f->data.len);
  (*buf)[f->data.len] = '\0';
  *len = f->data.len;
  return SMR_OK;
}

static int mem_read_range(smr_source *s, const char *rel, uint64_t off,
                          uint64_t len, smr_range *out, smr_error *err) {
  return smr_error_set(err, SMR_ERR_IO, rel, -1, "no ranges here");
}

static const smr_source_ops MEM_OPS = {
    .kind = "memory",
    .close = mem_close,
    .list = mem_list,
    .exists = mem_exists,
    .read_all = mem_read_all,
    .read_range = mem_read_range,
};

static mem_source *mem_new(void) {
  mem_source *m = smr_xcalloc(1, sizeof *m);
  m->base.ops = &MEM_OPS;
  m->base.root = smr_xstrdup("s3://bucket/job/profiler-output");
  return m;
}

/* Put (or replace) a file; every write gets a new mtime. */
static void mem_put(mem_source *m, const char *rel, const void *data,
                    size_t len) {
  static int64_t clock_ns = 1;
  mem_file *f = mem_find(m, rel);
  if (!f) {
    m->files = smr_xrealloc(m->files, (m->n + 1) * sizeof *m->files);
    f = &m->files[m->n++];
    memset(f, 0, sizeof *f);
    f->path = smr_xstrdup(rel);
  }
  f->data.len = 0;
  smr_buf_append(&f->data, data, len);
  f->mtime_ns = ++clock_ns;
}

static void mem_put_str(mem_source *m, const char *rel, const char *text) {
  mem_put(m, rel, text, strlen(text));
}

static char *sys_lines(int value, int64_t ts_s) {
  return smr_xasprintf(
      "{\"Type\":\"gpu\",\"Name\":\"gpu0\",\"Dimension\":\"GPUUtilization\","
      "\"Value\":%d,\"NodeId\":\"algo-1\",\"Timestamp\":%lld.5}\n",
      value, (long long)ts_s);
}

static smr_profiler *open_mem(mem_source *m, bool live) {
  smr_profiler_opts o = {.quiet = true, .live = live};
  smr_profiler *p = NULL;
  smr_error e;
  CHECK(smr_profiler_open_source(&m->base, &o, &p, &e) == SMR_OK);
  return p;
}

/* A TF profiler trace.json.gz (two gzip members) and its .metadata found
 * from a flat listing, as from S3; paths in the root's URL form. */
static void test_source_tf_gz(void) {
  mem_source *m = mem_new();
  int64_t start = B_US + 5000000, end = B_US + 9000000;
  const char *step = "framework/tensorflow/detailed_profiling/2020091312/"
                     "000000001";
  char *meta = smr_xasprintf("%s/host-1_%lld_%lld.metadata", step,
                             (long long)start, (long long)end);
  mem_put_str(m, meta, "");
  /* a larger name elsewhere under the step folder is not the one taken */
  char *other = smr_xasprintf("%s/plugins/zz_1_2.metadata", step);
  mem_put_str(m, other, "");
  const char *json =
      "{\"displayTimeUnit\":\"ns\",\"traceEvents\":["
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":5,\"args\":"
      "{\"name\":\"/host:CPU\"}},"
      "{\"name\":\"op\",\"ph\":\"X\",\"pid\":5,\"ts\":10,\"dur\":5,"
      "\"args\":{\"thread_id\":7}}]}";
  smr_buf gz = {0};
  gz_member(&gz, json, 40);
  gz_member(&gz, json + 40, strlen(json) - 40);
  char *trace = smr_xasprintf("%s/plugins/profile/2020_09_13_12_00_00/"
                              "host-1.trace.json.gz",
                              step);
  mem_put(m, trace, gz.data, gz.len);
  /* a trace whose step folder has no .metadata: never selected */
  mem_put(m,
          "framework/tensorflow/detailed_profiling/2020091312/000000002/"
          "plugins/profile/2020_09_13_12_00_01/host-1.trace.json.gz",
          gz.data, gz.len);
  smr_profiler *p = open_mem(m, false);
  CHECK_STR(smr_profiler_root(p), "s3://bucket/job/profiler-output");
  smrules_profiler_info in;
  smr_profiler_info(p, &in);
  CHECK_EQ_INT(in.framework_files, 1);
  CHECK(in.framework_first_us == end);
  smr_fw_events ev;
  smr_error err;
  CHECK(smr_profiler_framework_events(p, start, end, &ev, &err) == SMR_OK);
  CHECK_EQ_INT(ev.n, 1);
  if (ev.n == 1) {
    CHECK_STR(ev.v[0].name, "op");
    CHECK_STR(ev.v[0].node, "host-1");
    CHECK(ev.v[0].start_us == (double)(start + 10));
  }
  smr_profiler_release_fw(p, &ev);
  CHECK_EQ_INT(m->lists, 2); /* system/ and framework/, once */
  CHECK_EQ_INT(m->exists, 0);
  smr_profiler_close(p);
  smr_buf_free(&gz);
  free(trace);
  free(other);
  free(meta);
}

/* Live over a remote source: listed at most once a second; changed files
 * seen from the listing; the end marker from the listing (no lookup of
 * its own); the stop signal read through the source. */
static void test_source_live(void) {
  mem_source *m = mem_new();
  char *t0 = sys_lines(1, B_S);
  mem_put_str(m, "system/incremental/2020091312/1600000000.algo-1.json", t0);
  smr_profiler *p = open_mem(m, true);
  CHECK_EQ_INT(m->lists, 2);
  /* a second file appears: not listed again within the second */
  char *t1 = sys_lines(2, B_S + 60);
  mem_put_str(m, "system/incremental/2020091312/1600000060.algo-1.json", t1);
  smrules_profiler_info in;
  for (int i = 0; i < 50; i++)
    smr_profiler_info(p, &in);
  CHECK_EQ_INT(m->lists, 2);
  CHECK_EQ_INT(in.system_files, 1);
  CHECK(!in.job_finished);
  struct timespec pause = {1, 50000000};
  nanosleep(&pause, NULL);
  smr_profiler_info(p, &in);
  CHECK_EQ_INT(m->lists, 4);
  CHECK_EQ_INT(in.system_files, 2);
  /* a file rewritten: read again after the listing shows it */
  smr_sys_events ev;
  smr_error err;
  CHECK(smr_profiler_system_events(p, B_US, B_US + 60000000, &ev, &err) ==
        SMR_OK);
  CHECK_EQ_INT(ev.n, 1);
  smr_profiler_release_sys(p, &ev);
  int reads = m->reads;
  char *t0b = sys_lines(7, B_S);
  mem_put_str(m, "system/incremental/2020091312/1600000000.algo-1.json", t0b);
  CHECK(smr_profiler_system_events(p, B_US, B_US + 60000000, &ev, &err) ==
        SMR_OK);
  CHECK_EQ_INT(m->reads, reads); /* not listed yet: the parsed version */
  CHECK(ev.n == 1 && ev.v[0].value == 1);
  smr_profiler_release_sys(p, &ev);
  smr_profiler_refresh(p);
  CHECK(smr_profiler_system_events(p, B_US, B_US + 60000000, &ev, &err) ==
        SMR_OK);
  CHECK_EQ_INT(m->reads, reads + 1);
  CHECK(ev.n == 1 && ev.v[0].value == 7);
  smr_profiler_release_sys(p, &ev);
  /* the stop signal: a name leading outside counts as absent */
  setenv("SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE", "../stop", 1);
  smr_profiler_refresh(p);
  smr_profiler_info(p, &in);
  CHECK(!in.job_finished);
  setenv("SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE", "stop", 1);
  mem_put_str(m, "stop", "1000\n"); /* long ago: grace time passed */
  smr_profiler_refresh(p);
  smr_profiler_info(p, &in);
  CHECK(in.job_finished);
  unsetenv("SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE");
  smr_profiler_refresh(p);
  CHECK(!smr_profiler_job_finished(p));
  /* the end marker, noticed from the listing */
  int exists = m->exists;
  mem_put_str(m, "framework/training_job_end.ts", "");
  smr_profiler_refresh(p);
  smr_profiler_info(p, &in);
  CHECK(in.job_finished);
  CHECK_EQ_INT(m->exists, exists);
  smr_profiler_close(p);
  free(t0);
  free(t0b);
  free(t1);
}

/* ---- trial info, windows, args ---- */

static void test_window_status(void) {
  int64_t w = B_US + 690 * 1000000LL;
  char *root = system_minutes(w);
  smr_profiler *p = open_quiet(root);
  int64_t latest = B_US + 1200 * 1000000LL, S = 60000000;
  CHECK_EQ_INT(smr_profiler_window_status(p, latest - S, latest), SMR_OK);
  CHECK_EQ_INT(smr_profiler_window_status(p, latest, latest + S),
               SMR_NO_MORE_DATA);
  CHECK(smr_profiler_job_finished(p)); /* offline (Decision F11) */
  smr_profiler_close(p);
  smr_profiler_opts o = {.live = true, .quiet = true};
  smr_error e;
  CHECK(smr_profiler_open(root, &o, &p, &e) == SMR_OK);
  CHECK(!smr_profiler_job_finished(p));
  CHECK_EQ_INT(smr_profiler_window_status(p, latest, latest + S),
               SMR_STEP_NOT_YET);
  CHECK_EQ_INT(smr_profiler_window_status(p, latest - S, latest), SMR_OK);
  write_at("", "%s/system/training_job_end.ts", root);
  CHECK(smr_profiler_job_finished(p));
  CHECK_EQ_INT(smr_profiler_window_status(p, latest, latest + S),
               SMR_NO_MORE_DATA);
  smr_profiler_close(p);
  free(root);
}

static void test_fw_arg(void) {
  smrules_fw_event e = {.args = "{\"step_num\": \"12\", \"pid\": 93, "
                                "\"pin_memory\": false, \"o\": {\"a\": [1]}, "
                                "\"s\": \"x\\\"y\", \"pid\": 94}"};
  smr_strv scratch = {0};
  smrules_arg a;
  CHECK_EQ_INT(smr_profiler_fw_arg(&e, "step_num", &a, &scratch),
               SMRULES_ARG_STRING);
  CHECK_STR(a.str, "12");
  CHECK_STR(a.json, "\"12\"");
  CHECK_EQ_INT(smr_profiler_fw_arg(&e, "pid", &a, &scratch),
               SMRULES_ARG_NUMBER);
  CHECK(a.num == 94 && a.is_int); /* the last duplicate wins */
  CHECK_EQ_INT(smr_profiler_fw_arg(&e, "pin_memory", &a, &scratch),
               SMRULES_ARG_BOOL);
  CHECK(!a.b);
  CHECK_EQ_INT(smr_profiler_fw_arg(&e, "o", &a, &scratch), SMRULES_ARG_OTHER);
  CHECK_STR(a.json, "{\"a\": [1]}");
  CHECK_EQ_INT(smr_profiler_fw_arg(&e, "s", &a, &scratch), SMRULES_ARG_STRING);
  CHECK_STR(a.str, "x\"y");
  CHECK_EQ_INT(smr_profiler_fw_arg(&e, "missing", &a, &scratch),
               SMRULES_ARG_MISSING);
  smrules_fw_event none = {0};
  CHECK_EQ_INT(smr_profiler_fw_arg(&none, "pid", &a, &scratch),
               SMRULES_ARG_MISSING);
  smr_strv_free(&scratch);
}

static void test_cache_budget(void) {
  /* a tiny cache: every query still answers the same */
  int64_t w = B_US + 690 * 1000000LL;
  char *root = system_minutes(w);
  smr_profiler_opts o = {.quiet = true, .cache_bytes = 1};
  smr_profiler *p;
  smr_error e;
  CHECK(smr_profiler_open(root, &o, &p, &e) == SMR_OK);
  for (int round = 0; round < 3; round++)
    check_values(p, w, w, 8, 15);
  smr_profiler_close(p);
  free(root);
}

int main(void) {
  if (!mkdtemp(tmp_root)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_sys_line);
  TEST_RUN(test_sys_line_errors);
  TEST_RUN(test_system_selection);
  TEST_RUN(test_boundaries);
  TEST_RUN(test_framework_selection);
  TEST_RUN(test_shared_readers);
  TEST_RUN(test_shared_readers_threads);
  TEST_RUN(test_begin_end_pairs);
  TEST_RUN(test_node_rewrite);
  TEST_RUN(test_incomplete_trace);
  TEST_RUN(test_corrupt_lines);
  TEST_RUN(test_tf_gz);
  TEST_RUN(test_gunzip);
  TEST_RUN(test_source_tf_gz);
  TEST_RUN(test_source_live);
  TEST_RUN(test_window_status);
  TEST_RUN(test_fw_arg);
  TEST_RUN(test_cache_budget);
  char *cmd = smr_xasprintf("rm -rf '%s'", tmp_root);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", tmp_root);
  free(cmd);
  return TEST_REPORT("test_profiler");
}
