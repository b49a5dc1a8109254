/* test_index.c - index files, collections files, file names, reduction
 * names (docs/formats.md#the-trial-directory, docs/formats.md#index-files,
 * docs/formats.md#collections-files, docs/formats.md#reductions).  Run from the
 * repository root. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/path.h"
#include "format/index.h"
#include "unit.h"

/* ---- fixtures ---- */

/* "tests/fixtures/<rel>": tests run from the repository root and read
 * nothing outside it. */
static char *fixture(const char *rel) {
  return smr_xasprintf("tests/fixtures/%s", rel);
}

static char *slurp(const char *rel, size_t *len) {
  char *path = fixture(rel), *data = NULL;
  smr_error err;
  smr_error_clear(&err);
  if (smr_read_file(path, 1 << 24, &data, len, &err) != SMR_OK)
    fprintf(stderr, "cannot read %s: %s\n", path, err.msg);
  free(path);
  return data;
}

static int parse_index_str(const char *json, smr_index *ix, smr_error *err) {
  smr_error_clear(err);
  return smr_index_parse(json, strlen(json), "ix.json", ix, err);
}

/* ---- index files ---- */

static void test_index_real_file(void) {
  const char *rel = "synthetic/hook_reductions_only/index/000000000/"
                    "000000000000_worker_0.json";
  size_t len;
  char *json = slurp(rel, &len);
  CHECK(json != NULL);
  if (!json)
    return;
  smr_index ix;
  smr_error err;
  CHECK_EQ_INT(smr_index_parse(json, len, rel, &ix, &err), SMR_OK);
  CHECK_EQ_INT(ix.mode, SMR_MODE_TRAIN);
  CHECK_EQ_INT(ix.mode_step, 0);
  CHECK_STR(ix.event_file_name,
            "events/000000000000/000000000000_worker_0.tfevents");
  CHECK_EQ_INT(ix.n_tensors, 15);
  CHECK_EQ_INT(ix.n_shapes, 0);
  if (ix.n_tensors == 15) {
    CHECK_STR(ix.tensors[0].name, "smdebug/reductions/min/layer1.weight");
    CHECK_EQ_INT(ix.tensors[0].start_idx, 0);
    CHECK_EQ_INT(ix.tensors[0].length, 108);
    CHECK_STR(ix.tensors[14].name,
              "smdebug/reductions/abs_max/gradients/layer1.weight");
    CHECK_EQ_INT(ix.tensors[14].start_idx, 1549);
    CHECK_EQ_INT(ix.tensors[14].length, 122);
  }
  char *out = smr_index_to_json(&ix);
  CHECK_STR(out, json); /* byte-identical to what smdebug wrote */
  free(out);
  smr_index_free(&ix);
  free(json);
}

static void test_index_shapes_only(void) {
  const char *rel =
      "synthetic/hook_shapes_only/index/000000000/000000000001_worker_0.json";
  size_t len;
  char *json = slurp(rel, &len);
  CHECK(json != NULL);
  if (!json)
    return;
  smr_index ix;
  smr_error err;
  CHECK_EQ_INT(smr_index_parse(json, len, rel, &ix, &err), SMR_OK);
  CHECK(ix.event_file_name == NULL);
  CHECK_EQ_INT(ix.n_tensors, 0);
  CHECK_EQ_INT(ix.n_shapes, 4);
  if (ix.n_shapes == 4) {
    CHECK_STR(ix.shapes[3].name, "dense/kernel:0");
    CHECK_STR(ix.shapes[3].originalname, "sequential/dense/kernel:0");
    CHECK_EQ_INT(ix.shapes[3].ndim, 2);
    CHECK_EQ_INT(ix.shapes[3].shape[0], 4);
    CHECK_EQ_INT(ix.shapes[3].shape[1], 2);
  }
  char *out = smr_index_to_json(&ix);
  CHECK_STR(out, json);
  free(out);
  smr_index_free(&ix);
  free(json);
}

/* Every index file of the fixtures parses and serializes back to the same
 * bytes; every collections file parses. */
static int n_index_files, n_coll_files;
static void check_fixture_file(const char *path) {
  size_t n = strlen(path);
  bool is_index =
      strstr(path, "/index/") && n > 5 && strcmp(path + n - 5, ".json") == 0;
  bool is_coll = n > 17 && strcmp(path + n - 17, "_collections.json") == 0;
  if ((!is_index && !is_coll) || strstr(path, "/corrupt/"))
    return;
  char *json = NULL;
  size_t len;
  smr_error err;
  CHECK_EQ_INT(smr_read_file(path, 1 << 24, &json, &len, &err), SMR_OK);
  if (!json)
    return;
  if (is_index) {
    smr_index ix;
    int rc = smr_index_parse(json, len, path, &ix, &err);
    if (rc)
      fprintf(stderr, "%s: %s\n", path, err.msg);
    CHECK_EQ_INT(rc, SMR_OK);
    char *out = smr_index_to_json(&ix);
    if (strcmp(out, json) != 0)
      fprintf(stderr, "round trip differs: %s\n", path);
    CHECK(strcmp(out, json) == 0);
    free(out);
    smr_index_free(&ix);
    n_index_files++;
  } else {
    smr_collections c;
    int rc = smr_collections_parse(json, len, path, &c, &err);
    if (rc)
      fprintf(stderr, "%s: %s\n", path, err.msg);
    CHECK_EQ_INT(rc, SMR_OK);
    smr_collections_free(&c);
    n_coll_files++;
  }
  free(json);
}

static void walk(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    char *p = smr_xasprintf("%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
      walk(p);
    else
      check_fixture_file(p);
    free(p);
  }
  closedir(d);
}

static void test_all_fixture_files(void) {
  char *root = fixture("synthetic");
  walk(root);
  free(root);
  root = fixture("trials");
  walk(root);
  free(root);
  CHECK(n_index_files > 100);
  CHECK(n_coll_files > 20);
}

static void test_index_malformed_json(void) {
  const char *rel =
      "corrupt/malformed_index_json/index/000000000/000000000001_worker_0.json";
  size_t len;
  char *json = slurp(rel, &len);
  CHECK(json != NULL);
  if (!json)
    return;
  smr_index ix;
  smr_error err;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_index_parse(json, len, rel, &ix, &err), SMR_ERR_FORMAT);
  CHECK_STR(err.file, rel);
  CHECK(err.offset >= 0 && err.offset <= (int64_t)len);
  CHECK(strstr(err.msg, "not valid JSON") != NULL);
  CHECK(ix.tensors == NULL && ix.event_file_name == NULL);
  free(json);

  const char *bad[] = {"",     "   ",   "[1,2]",    "nul",    "{\"meta\": }",
                       "{}{}", "\"x\"", "{} extra", "{\"a\"", "\x01"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    smr_error_clear(&err);
    CHECK_EQ_INT(smr_index_parse(bad[i], strlen(bad[i]), "b.json", &ix, &err),
                 SMR_ERR_FORMAT);
    CHECK_STR(err.file, "b.json");
  }
  /* bytes after the given length are not read */
  CHECK_EQ_INT(smr_index_parse("{}xxxx", 2, "c.json", &ix, &err),
               SMR_ERR_FORMAT); /* {} lacks meta */
  CHECK(strstr(err.msg, "meta") != NULL);
}

static void test_index_unsafe_paths(void) {
  static const struct {
    const char *rel, *want;
  } cases[] = {
      {"corrupt/index_absolute_path/index/000000000/000000000001_worker_0.json",
       "is absolute"},
      {"corrupt/index_path_traversal/trial/index/000000000/"
       "000000000001_worker_0.json",
       "escapes the trial directory"},
  };
  for (size_t i = 0; i < 2; i++) {
    size_t len;
    char *json = slurp(cases[i].rel, &len);
    CHECK(json != NULL);
    if (!json)
      continue;
    smr_index ix;
    smr_error err;
    smr_error_clear(&err);
    /* the index still parses (step, mode, names stay known); the unsafe
     * path is not kept and the reason is */
    CHECK_EQ_INT(smr_index_parse(json, len, cases[i].rel, &ix, &err), SMR_OK);
    CHECK(ix.event_file_name == NULL);
    CHECK(ix.event_file_problem != NULL);
    CHECK(ix.n_tensors == 3);
    if (ix.event_file_problem) {
      CHECK(strstr(ix.event_file_problem, cases[i].want) != NULL);
      CHECK(strstr(ix.event_file_problem, "event_file_name '") != NULL);
    }
    smr_index_free(&ix);
    free(json);
  }
}

#define META_OK                                                                \
  "\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 1, "                         \
  "\"event_file_name\": \"events/e.tfevents\"}"
static void test_index_entry_validation(void) {
  const char *bad[] = {
      "{\"meta\": {}, \"tensor_payload\": []}",
      "{\"tensor_payload\": []}",
      "{" META_OK "}",
      "{" META_OK ", \"tensor_payload\": 3}",
      "{\"meta\": {\"mode\": \"TRAINING\", \"mode_step\": 1}, "
      "\"shape_payload\": []}",
      "{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": -1}, "
      "\"shape_payload\": []}",
      "{\"meta\": {\"mode\": \"TRAIN\"}, \"shape_payload\": []}",
      "{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 1}, "
      "\"tensor_payload\": [{\"tensorname\": \"a\", \"start_idx\": 0, "
      "\"length\": 20}]}",
      "{" META_OK ", \"shape_payload\": [{\"tensorname\": \"a\", "
      "\"shape\": [1, -2]}]}",
      "{" META_OK ", \"shape_payload\": [{\"tensorname\": \"a\", "
      "\"shape\": [1, 2.5]}]}",
      "{" META_OK ", \"shape_payload\": [{\"tensorname\": \"a\"}]}",
      "{" META_OK ", \"shape_payload\": [{\"tensorname\": \"a\", \"shape\": "
      "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}",
      "{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 1, "
      "\"event_file_name\": 3}, \"shape_payload\": []}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    smr_index ix;
    smr_error err;
    int rc = parse_index_str(bad[i], &ix, &err);
    if (rc != SMR_ERR_FORMAT)
      fprintf(stderr, "case %zu accepted: %s\n", i, bad[i]);
    CHECK_EQ_INT(rc, SMR_ERR_FORMAT);
    CHECK_STR(err.file, "ix.json");
    CHECK(err.msg[0] != '\0');
  }
}

/* A bad tensor_payload entry costs that entry only: one with an invalid
 * place is kept with its problem (that tensor at that step cannot be
 * read), one without a usable name is left out; the good entry beside it
 * stays readable. */
static void test_index_bad_entry_alone(void) {
  const char *entries[] = {
      "{\"tensorname\": \"a\", \"start_idx\": 0.5, \"length\": 20}",
      "{\"tensorname\": \"a\", \"start_idx\": -1, \"length\": 20}",
      "{\"tensorname\": \"a\", \"start_idx\": 9007199254740994, "
      "\"length\": 20}",
      "{\"tensorname\": \"a\", \"start_idx\": 1e400, \"length\": 20}",
      "{\"tensorname\": \"a\", \"start_idx\": 0, \"length\": 15}",
      "{\"tensorname\": \"a\", \"start_idx\": \"0\", \"length\": 20}",
      "{\"tensorname\": \"a\", \"start_idx\": 0, "
      "\"length\": 4611686018427387904}",
      "{\"tensorname\": 5, \"start_idx\": 0, \"length\": 20}",
      "{\"start_idx\": 0, \"length\": 20}",
      "7",
  };
  for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
    char *json = smr_xasprintf(
        "{" META_OK ", \"tensor_payload\": [%s, {\"tensorname\": \"good\", "
        "\"start_idx\": 20, \"length\": 30}]}",
        entries[i]);
    smr_index ix;
    smr_error err;
    int rc = parse_index_str(json, &ix, &err);
    CHECK_EQ_INT(rc, SMR_OK);
    if (rc == SMR_OK) {
      bool named = i < 7;
      CHECK_EQ_INT(ix.n_tensors, named ? 2 : 1);
      const smr_index_tensor *good = &ix.tensors[ix.n_tensors - 1];
      CHECK_STR(good->name, "good");
      CHECK(good->problem == NULL);
      CHECK_EQ_INT(good->length, 30);
      if (named) {
        CHECK_STR(ix.tensors[0].name, "a");
        CHECK(ix.tensors[0].problem != NULL);
      }
      smr_index_free(&ix);
    }
    free(json);
  }
}

/* An unsafe path is kept out of the index but does not fail it. */
static void test_index_unsafe_path_inline(void) {
  smr_index ix;
  smr_error err;
  int rc = parse_index_str("{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 1, "
                           "\"event_file_name\": \"a/../../b\"}, "
                           "\"shape_payload\": []}",
                           &ix, &err);
  CHECK_EQ_INT(rc, SMR_OK);
  CHECK(ix.event_file_name == NULL);
  CHECK(ix.event_file_problem && strstr(ix.event_file_problem, "escapes"));
  smr_index_free(&ix);
}

static void test_index_lenient_forms(void) {
  smr_index ix;
  smr_error err;
  /* whitespace around the mode, shapes only, 32 dims, 2^53, null list,
   * missing originalname, duplicate key (last wins) */
  const char *json =
      "{\"meta\": {\"mode\": \" EVAL\\n\", \"mode_step\": 4, \"mode_step\": 5},"
      " \"tensor_payload\": null, \"shape_payload\": [{\"tensorname\": \"s\","
      " \"shape\": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
      "1,1,9007199254740992]}, {\"tensorname\": \"t\", \"shape\": []}]}";
  CHECK_EQ_INT(parse_index_str(json, &ix, &err), SMR_OK);
  CHECK_EQ_INT(ix.mode, SMR_MODE_EVAL);
  CHECK_EQ_INT(ix.mode_step, 5);
  CHECK_EQ_INT(ix.n_shapes, 2);
  if (ix.n_shapes == 2) {
    CHECK_EQ_INT(ix.shapes[0].ndim, 32);
    CHECK_EQ_INT(ix.shapes[0].shape[31], 9007199254740992LL);
    CHECK_STR(ix.shapes[0].originalname, "s");
    CHECK_EQ_INT(ix.shapes[1].ndim, 0);
  }
  char *out = smr_index_to_json(&ix);
  CHECK(strstr(out, "{\"meta\": {\"mode\": \"EVAL\", \"mode_step\": 5}, "
                    "\"tensor_payload\": [], \"shape_payload\": [") == out);
  CHECK(strstr(out, "{\"tensorname\": \"t\", \"originalname\": \"t\", "
                    "\"shape\": []}]}") != NULL);
  free(out);
  smr_index_free(&ix);
}

static void test_index_json_escaping(void) {
  smr_index_tensor t = {"caf\xc3\xa9\"\\\n\x7f\xf0\x9f\x98\x80", 0, 20, NULL};
  smr_index ix = {.mode = SMR_MODE_PREDICT,
                  .mode_step = 2,
                  .event_file_name = "events/a.tfevents",
                  .n_tensors = 1,
                  .tensors = &t};
  char *out = smr_index_to_json(&ix);
  /* what Python's json.dumps writes */
  CHECK_STR(out, "{\"meta\": {\"mode\": \"PREDICT\", \"mode_step\": 2, "
                 "\"event_file_name\": \"events/a.tfevents\"}, "
                 "\"tensor_payload\": [{\"tensorname\": "
                 "\"caf\\u00e9\\\"\\\\\\n\\u007f\\ud83d\\ude00\", "
                 "\"start_idx\": 0, \"length\": 20}], \"shape_payload\": []}");
  smr_index back;
  smr_error err;
  CHECK_EQ_INT(parse_index_str(out, &back, &err), SMR_OK);
  if (back.n_tensors == 1)
    CHECK_STR(back.tensors[0].name, t.name);
  smr_index_free(&back);
  free(out);
}

/* ---- modes ---- */

static void test_modes(void) {
  CHECK_EQ_INT(smr_mode_from_name("TRAIN"), 1);
  CHECK_EQ_INT(smr_mode_from_name("EVAL"), 2);
  CHECK_EQ_INT(smr_mode_from_name("PREDICT"), 3);
  CHECK_EQ_INT(smr_mode_from_name("GLOBAL"), 4);
  CHECK_EQ_INT(smr_mode_from_name(" \tTRAIN\n"), 1);
  CHECK_EQ_INT(smr_mode_from_name("ModeKeys.EVAL"), 2);
  CHECK_EQ_INT(smr_mode_from_name("3"), 3);
  CHECK_EQ_INT(smr_mode_from_name("5"), 0);
  CHECK_EQ_INT(smr_mode_from_name("train"), 0);
  CHECK_EQ_INT(smr_mode_from_name(""), 0);
  CHECK_EQ_INT(smr_mode_from_name("ModeKeys."), 0);
  CHECK_EQ_INT(smr_mode_from_name(NULL), 0);
  CHECK_STR(smr_mode_name(SMR_MODE_GLOBAL), "GLOBAL");
  CHECK_STR(smr_mode_name(SMR_MODE_TRAIN), "TRAIN");
  CHECK_STR(smr_mode_name(0), "?");
}

/* ---- file names ---- */

static void check_step_worker(const char *base, int64_t step,
                              const char *worker) {
  int64_t s = -1;
  char *w = NULL;
  CHECK_EQ_INT(smr_parse_step_worker(base, &s, &w), SMR_OK);
  CHECK_EQ_INT(s, step);
  CHECK_STR(w, worker);
  free(w);
}

static void test_step_worker_names(void) {
  check_step_worker("000000000012_worker_0.json", 12, "worker_0");
  check_step_worker("000000000012_worker_0.tfevents", 12, "worker_0");
  check_step_worker("000000000007__job-worker_replica-0_task-1_device-GPU-0."
                    "json",
                    7, "/job:worker/replica:0/task:1/device:GPU:0");
  check_step_worker("000000000002__replica-0_task-0_device-GPU-1.tfevents", 2,
                    "/replica:0/task:0/device:GPU:1");
  check_step_worker("10000000000000_algo-1.json", 10000000000000LL, "algo-1");
  /* '__' later in the name is not a device name */
  check_step_worker("000000000003_my__worker-1.json", 3, "my__worker-1");
  /* a worker inside a directory whose path contains "__" (F7: only the
   * basename decides) */
  const char *path = "/data/run__2/index/000000000/000000000003_worker_0.json";
  check_step_worker(strrchr(path, '/') + 1, 3, "worker_0");

  const char *bad[] = {
      "worker_0.json", "12.json",  "12_.json",    "12_w.csv",
      "_w.json",       "12w.json", "a/12_w.json", "99999999999999999999_w.json",
      ".json",         ""};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int64_t s;
    char *w = (char *)1;
    CHECK_EQ_INT(smr_parse_step_worker(bad[i], &s, &w), SMR_ERR_FORMAT);
    CHECK(w == NULL);
  }
}

static void test_collections_worker_names(void) {
  char *w = smr_parse_collections_worker("worker_0_collections.json");
  CHECK_STR(w, "worker_0");
  free(w);
  w = smr_parse_collections_worker(
      "_replica-0_task-0_device-GPU-1_collections.json");
  CHECK_STR(w, "/replica:0/task:0/device:GPU:1");
  free(w);
  CHECK(smr_parse_collections_worker("_collections.json") == NULL);
  CHECK(smr_parse_collections_worker("worker_0.json") == NULL);
  CHECK(smr_parse_collections_worker("a/w_collections.json") == NULL);
}

static void test_relpaths(void) {
  char *p = smr_event_file_relpath(12, "worker_0");
  CHECK_STR(p, "events/000000000012/000000000012_worker_0.tfevents");
  free(p);
  p = smr_index_file_relpath(1234, "/job:worker/replica:0/task:1/device:GPU:0");
  CHECK_STR(p, "index/000000001/"
               "000000001234__job-worker_replica-0_task-1_device-GPU-0.json");
  free(p);
  p = smr_index_file_relpath(999, "worker_1");
  CHECK_STR(p, "index/000000000/000000000999_worker_1.json");
  free(p);
  p = smr_event_file_relpath(1234567890123LL, "w");
  CHECK_STR(p, "events/1234567890123/1234567890123_w.tfevents");
  free(p);
  p = smr_collections_file_relpath("/replica:0/task:0/device:GPU:0");
  CHECK_STR(p, "collections/000000000/"
               "_replica-0_task-0_device-GPU-0_collections.json");
  free(p);
  p = smr_worker_serialize("worker_0");
  CHECK_STR(p, "worker_0");
  free(p);
}

static void test_path_is_safe(void) {
  CHECK(smr_path_is_safe("events/000000000001/000000000001_worker_0.tfevents"));
  CHECK(smr_path_is_safe("./a"));
  CHECK(smr_path_is_safe("..a/b.."));
  CHECK(smr_path_is_safe("a/.../b"));
  CHECK(!smr_path_is_safe(""));
  CHECK(!smr_path_is_safe(NULL));
  CHECK(!smr_path_is_safe("/etc/passwd"));
  CHECK(!smr_path_is_safe(".."));
  CHECK(!smr_path_is_safe("../x"));
  CHECK(!smr_path_is_safe("a/../b"));
  CHECK(!smr_path_is_safe("a/.."));
  CHECK(!smr_path_is_safe("a//../b"));
  CHECK(!smr_path_is_safe("a\\..\\b"));
}

/* ---- collections ---- */

static void test_collections_tf_device(void) {
  const char *rel = "synthetic/workers2_tf_device_names/collections/000000000/"
                    "_replica-0_task-0_device-GPU-1_collections.json";
  size_t len;
  char *json = slurp(rel, &len);
  CHECK(json != NULL);
  if (!json)
    return;
  smr_collections c;
  smr_error err;
  CHECK_EQ_INT(smr_collections_parse(json, len, rel, &c, &err), SMR_OK);
  CHECK_EQ_INT(c.num_workers, 2);
  CHECK_EQ_INT(c.n, 1);
  if (c.n == 1) {
    CHECK_STR(c.items[0].name, "default");
    CHECK_EQ_INT(c.items[0].n_include_regex, 0);
    CHECK_EQ_INT(c.items[0].n_tensor_names, 1);
    CHECK_STR(c.items[0].tensor_names[0], "dense/kernel:0");
    CHECK(!c.items[0].has_reduction_config);
    CHECK(c.items[0].reductions == NULL);
  }
  char *out = smr_collections_to_json(&c);
  CHECK_STR(out, json);
  free(out);
  smr_collections_free(&c);
  free(json);
}

static void test_collections_reductions(void) {
  const char *rel = "synthetic/hook_reductions_only/collections/000000000/"
                    "worker_0_collections.json";
  size_t len;
  char *json = slurp(rel, &len);
  CHECK(json != NULL);
  if (!json)
    return;
  smr_collections c;
  smr_error err;
  CHECK_EQ_INT(smr_collections_parse(json, len, rel, &c, &err), SMR_OK);
  CHECK_EQ_INT(c.n, 2);
  if (c.n == 2) {
    CHECK_STR(c.items[0].name, "weights");
    CHECK(c.items[0].has_reduction_config);
    CHECK(!c.items[0].save_raw_tensor);
    CHECK(!c.items[0].save_shape);
    CHECK_STR(c.items[0].reductions,
              "min,max,mean,l2_norm,abs_mean,abs_l1_norm");
    CHECK_STR(c.items[1].tensor_names[0], "gradients/layer1.weight");
  }
  char *out = smr_collections_to_json(&c);
  CHECK_STR(out, json);
  free(out);
  smr_collections_free(&c);
  free(json);
}

static void test_collections_real_trial(void) {
  const char *rel = "trials/healthy_mlp_digits/collections/000000000/"
                    "worker_0_collections.json";
  size_t len;
  char *json = slurp(rel, &len);
  if (!json)
    return; /* checked by test_all_fixture_files when present */
  smr_collections c;
  smr_error err;
  CHECK_EQ_INT(smr_collections_parse(json, len, rel, &c, &err), SMR_OK);
  bool found = false;
  for (size_t i = 0; i < c.n; i++)
    if (strcmp(c.items[i].name, "losses") == 0) {
      found = true;
      CHECK_EQ_INT(c.items[i].n_include_regex, 1);
      CHECK_STR(c.items[i].include_regex[0], "[Ll]oss_(?!input).*output");
      CHECK(c.items[i].save_raw_tensor);
      CHECK_STR(c.items[i].reductions, "");
    }
  CHECK(found);
  smr_collections_free(&c);
  free(json);
}

static void test_collections_lenient_and_bad(void) {
  smr_collections c;
  smr_error err;
  const char *ok = "{\"collections\": {\"k\": {\"include_regex\": false, "
                   "\"tensor_names\": null, \"reduction_config\": "
                   "{\"reductions\": null}}}, \"_meta\": {\"num_workers\": 3}}";
  CHECK_EQ_INT(smr_collections_parse(ok, strlen(ok), "c.json", &c, &err),
               SMR_OK);
  CHECK_EQ_INT(c.num_workers, 3);
  CHECK_EQ_INT(c.n, 1);
  if (c.n == 1) {
    CHECK_STR(c.items[0].name, "k");
    CHECK_EQ_INT(c.items[0].n_include_regex, 0);
    CHECK_EQ_INT(c.items[0].n_tensor_names, 0);
    CHECK(c.items[0].has_reduction_config);
    CHECK_STR(c.items[0].reductions, "");
  }
  char *out = smr_collections_to_json(&c);
  CHECK_STR(out, "{\"collections\": {\"k\": {\"name\": \"k\", "
                 "\"include_regex\": [], \"tensor_names\": [], "
                 "\"reduction_config\": {\"save_raw_tensor\": false, "
                 "\"reductions\": \"\", \"save_shape\": false}, "
                 "\"save_config\": null, \"save_histogram\": true}}, "
                 "\"_meta\": {\"num_workers\": 3}}");
  free(out);
  smr_collections_free(&c);

  const char *bad[] = {
      "{\"collections\": {}}",
      "{\"_meta\": {\"num_workers\": 1}}",
      "{\"collections\": [], \"_meta\": {\"num_workers\": 1}}",
      "{\"collections\": {}, \"_meta\": {\"num_workers\": 0}}",
      "{\"collections\": {}, \"_meta\": {\"num_workers\": 1.5}}",
      "{\"collections\": {\"a\": 1}, \"_meta\": {\"num_workers\": 1}}",
      "{\"collections\": {\"a\": {\"include_regex\": [1]}}, "
      "\"_meta\": {\"num_workers\": 1}}",
      "{\"collections\": {\"a\": {\"tensor_names\": \"x\"}}, "
      "\"_meta\": {\"num_workers\": 1}}",
      "{\"collections\": {\"a\": {\"reduction_config\": 1}}, "
      "\"_meta\": {\"num_workers\": 1}}",
      "{\"collections\": {\"a\": {\"reduction_config\": {\"save_shape\": 1}}},"
      " \"_meta\": {\"num_workers\": 1}}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    smr_error_clear(&err);
    int rc = smr_collections_parse(bad[i], strlen(bad[i]), "c.json", &c, &err);
    if (rc != SMR_ERR_FORMAT)
      fprintf(stderr, "collections case %zu accepted\n", i);
    CHECK_EQ_INT(rc, SMR_ERR_FORMAT);
    CHECK_STR(err.file, "c.json");
  }
}

static void test_collections_not_json(void) {
  const char *rel = "corrupt/collections_not_json/collections/000000000/"
                    "worker_0_collections.json";
  size_t len;
  char *json = slurp(rel, &len);
  CHECK(json != NULL);
  if (!json)
    return;
  smr_collections c;
  smr_error err;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_collections_parse(json, len, rel, &c, &err), SMR_ERR_FORMAT);
  CHECK_STR(err.file, rel);
  CHECK(err.offset >= 60 && err.offset <= 64); /* Python: char 64 */
  CHECK(c.items == NULL);
  free(json);
}

/* ---- reduction names ---- */

static void check_red(const char *stored, const char *base, int red, bool abs) {
  char *b = NULL;
  int r = -1;
  bool a = !abs;
  CHECK(smr_reduction_name_parse(stored, &b, &r, &a));
  CHECK_STR(b, base);
  CHECK_EQ_INT(r, red);
  CHECK(a == abs);
  free(b);
}

static void test_reduction_names(void) {
  check_red("smdebug/reductions/abs_mean/gradient/Net_fc1.weight",
            "gradient/Net_fc1.weight", SMR_RED_MEAN, true);
  check_red("smdebug/reductions/l2/layer1.weight", "layer1.weight", SMR_RED_L2,
            false);
  check_red("smdebug/reductions/abs_l1/x", "x", SMR_RED_L1, true);
  check_red("smdebug/reductions/variance/dense/kernel:0", "dense/kernel:0",
            SMR_RED_VARIANCE, false);
  const char *bad[] = {"smdebug/reductions/foo/x",  "smdebug/reductions/mean",
                       "smdebug/reductions/mean/",  "smdebug/reductions//x",
                       "smdebug/reductions/abs_/x", "smdebug/reductions/linf/x",
                       "reductions/mean/x",         "loss"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *b = NULL;
    int r;
    bool a;
    CHECK(!smr_reduction_name_parse(bad[i], &b, &r, &a));
    CHECK(b == NULL);
  }
  char *n = smr_reduction_tensor_name("gradient/x", SMR_RED_L1, true);
  CHECK_STR(n, "smdebug/reductions/abs_l1/gradient/x");
  free(n);
  n = smr_reduction_tensor_name("w", SMR_RED_STD, false);
  CHECK_STR(n, "smdebug/reductions/std/w");
  free(n);
  CHECK(smr_reduction_tensor_name("w", SMR_RED_LINF, false) == NULL);
  CHECK(smr_reduction_tensor_name("w", -1, false) == NULL);
}

int main(void) {
  TEST_RUN(test_index_real_file);
  TEST_RUN(test_index_shapes_only);
  TEST_RUN(test_all_fixture_files);
  TEST_RUN(test_index_malformed_json);
  TEST_RUN(test_index_unsafe_paths);
  TEST_RUN(test_index_entry_validation);
  TEST_RUN(test_index_bad_entry_alone);
  TEST_RUN(test_index_lenient_forms);
  TEST_RUN(test_index_unsafe_path_inline);
  TEST_RUN(test_index_json_escaping);
  TEST_RUN(test_modes);
  TEST_RUN(test_step_worker_names);
  TEST_RUN(test_collections_worker_names);
  TEST_RUN(test_relpaths);
  TEST_RUN(test_path_is_safe);
  TEST_RUN(test_collections_tf_device);
  TEST_RUN(test_collections_reductions);
  TEST_RUN(test_collections_real_trial);
  TEST_RUN(test_collections_lenient_and_bad);
  TEST_RUN(test_collections_not_json);
  TEST_RUN(test_reduction_names);
  return TEST_REPORT("test_index");
}
