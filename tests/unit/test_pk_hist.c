/* test_pk_hist.c - the profiler rules' histories (plugins/profkit/pk_hist.c):
 * readings pushed come back exactly, from memory or from the temporary
 * file; the memory a history holds is bounded by its `keep`, not by its
 * length; released chunks are reused; without a usable temporary directory
 * everything stays in memory.  And the closed keys of maps moved out of
 * memory window by window (pk_closed.c). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../plugins/profkit/profkit.h"
#include "unit.h"

#define CHUNK PK_HIST_CHUNK

/* A reading that tells its index (and is not a small integer). */
static double reading(size_t i, double salt) {
  return (double)i * 0.25 + salt;
}

static void push_n(pk_hist *h, size_t n, double salt) {
  for (size_t i = 0; i < n; i++)
    pk_hist_push(h, reading(h->n, salt));
}

/* Readings [from, to) are those pushed, through view and copy. */
static int same(const pk_hist *h, size_t from, size_t to, double salt) {
  double *copy;
  const double *v = pk_hist_view(h, from, to, &copy);
  double *c = pk_hist_copy(h, from, to);
  int bad = 0;
  for (size_t i = from; i < to; i++)
    bad += v[i - from] != reading(i, salt) || c[i - from] != reading(i, salt);
  free(copy);
  free(c);
  return bad;
}

/* The history file's name, from /proc/self/fd ("" when none is open). */
static void spill_file_name(char *out, size_t n) {
  out[0] = '\0';
  for (int fd = 3; fd < 1024; fd++) {
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, target, sizeof target - 1);
    if (k <= 0)
      continue;
    target[k] = '\0';
    if (strstr(target, "(deleted)")) {
      snprintf(out, n, "%s", target);
      return;
    }
  }
}

static void test_small_stays_in_memory(void) {
  pk_hist h = {0};
  pk_hist_keep(&h, 10);
  push_n(&h, 1000, 0.5);
  CHECK_EQ_INT(h.n, 1000);
  CHECK_EQ_INT(h.nchunks, 0);
  double *copy;
  const double *tail = pk_hist_view(&h, 990, 1000, &copy);
  CHECK(copy == NULL);
  CHECK(tail[9] == reading(999, 0.5));
  CHECK_EQ_INT(same(&h, 0, 1000, 0.5), 0);
  pk_hist_free(&h);
}

/* Memory stays under 2 keep + 2 chunks however long the history. */
static void test_spill_and_read_back(void) {
  pk_hist h = {0};
  pk_hist_keep(&h, 500);
  size_t n = 250000;
  push_n(&h, n, 1.0);
  CHECK(h.nchunks > 0);
  CHECK(h.mem_cap <= 2 * 500 + 2 * CHUNK);
  CHECK(h.n - h.nchunks * CHUNK >= 500);
  double *copy;
  const double *tail = pk_hist_view(&h, n - 500, n, &copy);
  CHECK(copy == NULL); /* the tail a rule reads every time: no file read */
  CHECK(tail[499] == reading(n - 1, 1.0));
  CHECK_EQ_INT(same(&h, 0, n, 1.0), 0);
  /* ranges across chunk boundaries, inside one chunk, and across the
   * memory boundary */
  CHECK_EQ_INT(same(&h, CHUNK - 3, 3 * CHUNK + 7, 1.0), 0);
  CHECK_EQ_INT(same(&h, 5, 17, 1.0), 0);
  CHECK_EQ_INT(same(&h, h.nchunks * CHUNK - 100, n, 1.0), 0);
  CHECK_EQ_INT(same(&h, 17, 17, 1.0), 0);
  pk_hist_free(&h);
}

static void test_window_zero_and_huge_keep(void) {
  pk_hist a = {0}, b = {0};
  pk_hist_keep(&a, 0);
  pk_hist_keep(&b, INT64_MAX); /* keep everything: never spills */
  push_n(&a, 3 * CHUNK + 5, 2.0);
  push_n(&b, 3 * CHUNK + 5, 2.0);
  CHECK(a.mem_cap <= 2 * CHUNK);
  CHECK_EQ_INT(b.nchunks, 0);
  CHECK_EQ_INT(same(&a, 0, a.n, 2.0), 0);
  CHECK_EQ_INT(same(&b, 0, b.n, 2.0), 0);
  pk_hist_free(&a);
  pk_hist_free(&b);
}

/* Reading one, rewriting and searching, in the file and in memory. */
static void test_set_and_find(void) {
  pk_hist h = {0};
  pk_hist_keep(&h, 1);
  push_n(&h, 5 * CHUNK, 0);
  pk_hist_set(&h, 7, -1.5);            /* in the file */
  pk_hist_set(&h, 5 * CHUNK - 1, 9.5); /* in memory */
  double *c = pk_hist_copy(&h, 0, h.n);
  CHECK(c[7] == -1.5);
  CHECK(c[6] == reading(6, 0) && c[8] == reading(8, 0));
  CHECK(c[5 * CHUNK - 1] == 9.5);
  free(c);
  CHECK_EQ_INT(pk_hist_rfind(&h, -1.5), 8);
  CHECK_EQ_INT(pk_hist_rfind(&h, 9.5), 5 * CHUNK);
  CHECK_EQ_INT(pk_hist_rfind(&h, reading(CHUNK + 1, 0)), CHUNK + 2);
  CHECK_EQ_INT(pk_hist_rfind(&h, reading(0, 0)), 1);
  CHECK_EQ_INT(pk_hist_rfind(&h, -7), 0);
  CHECK(pk_hist_at(&h, 7) == -1.5 &&
        pk_hist_at(&h, CHUNK) == reading(CHUNK, 0));
  CHECK(pk_hist_at(&h, 5 * CHUNK - 1) == 9.5);
  pk_hist_push(&h, -1.5); /* the last equal one */
  CHECK_EQ_INT(pk_hist_rfind(&h, -1.5), 5 * CHUNK + 1);
  pk_hist_free(&h);
}

/* A cleared (the reference's reset) or freed history's chunks are reused:
 * the file holds what the live histories hold, not what was ever pushed. */
static void test_reset_reuses_chunks(void) {
  pk_hist a = {0}, b = {0};
  pk_hist_keep(&a, 100);
  pk_hist_keep(&b, 100);
  push_n(&a, 40 * CHUNK, 3.0);
  size_t held = pk_hist_file_chunks();
  CHECK(held >= 35);
  for (int round = 0; round < 5; round++) {
    pk_hist_clear(&a);
    CHECK_EQ_INT(a.n, 0);
    push_n(&a, 40 * CHUNK, 3.0);
    CHECK_EQ_INT(same(&a, 0, a.n, 3.0), 0);
  }
  CHECK_EQ_INT(pk_hist_file_chunks(), held);
  pk_hist_free(&a);
  push_n(&b, 40 * CHUNK, 4.0); /* takes the chunks a released */
  CHECK_EQ_INT(pk_hist_file_chunks(), held);
  CHECK_EQ_INT(same(&b, 0, b.n, 4.0), 0);
  pk_hist_free(&b);
  CHECK_EQ_INT(pk_hist_file_chunks(), 0); /* nothing held: cut back */
}

/* The file lies in $TMPDIR and has no name there. */
static void test_tmpdir(void) {
  char dir[] = "/tmp/test_pk_hist.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  /* in a child: the file is created once per process */
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TMPDIR", dir, 1);
    pk_hist h = {0};
    push_n(&h, 3 * CHUNK, 5.0);
    char name[PATH_MAX];
    spill_file_name(name, sizeof name);
    int ok = h.nchunks > 0 && strncmp(name, dir, strlen(dir)) == 0 &&
             same(&h, 0, h.n, 5.0) == 0;
    pk_hist_free(&h);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(rmdir(dir) == 0); /* nothing left behind */
}

/* No usable temporary directory: one warning, the readings stay in memory
 * and come back exactly. */
static void test_no_tmpdir_falls_back(void) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TMPDIR", "/nonexistent/test_pk_hist", 1);
    if (!freopen("/dev/null", "w", stderr))
      _exit(2);
    pk_hist h = {0};
    pk_hist_keep(&h, 10);
    push_n(&h, 10 * CHUNK, 6.0);
    int ok = h.nchunks == 0 && h.n == 10 * CHUNK && same(&h, 0, h.n, 6.0) == 0;
    pk_hist_clear(&h);
    push_n(&h, 100, 6.0);
    ok = ok && same(&h, 0, h.n, 6.0) == 0;
    pk_hist_free(&h);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Closed keys: the last close's keys found in memory, older ones on file,
 * absent ones told apart. */
static void test_closed_keys(void) {
  pk_closed c;
  pk_closed_init(&c);
  pk_closed_begin(&c); /* window 1 */
  CHECK_EQ_INT(pk_closed_push(&c, 10), 0);
  CHECK_EQ_INT(pk_closed_push(&c, 12), 1);
  CHECK_EQ_INT(pk_closed_push(&c, 11), 2);
  CHECK_EQ_INT(pk_closed_find(&c, 11), 3);
  CHECK_EQ_INT(pk_closed_find(&c, 13), 0);
  pk_closed_begin(&c); /* window 2 */
  pk_closed_push(&c, 20);
  CHECK_EQ_INT(pk_closed_find(&c, 12), 2); /* older: searched */
  CHECK_EQ_INT(pk_closed_find(&c, 20), 4);
  CHECK_EQ_INT(pk_closed_find(&c, 10.5), 0); /* not above: searched, absent */
  CHECK_EQ_INT(pk_closed_find(&c, 15), 0);   /* above every older key */
  CHECK_EQ_INT(pk_closed_find(&c, NAN), 0);
  /* many windows: the keys spill; an old one is found on file */
  for (int w = 0; w < 100; w++) {
    pk_closed_begin(&c);
    for (int k = 0; k < 200; k++)
      pk_closed_push(&c, 1000 + w * 200 + k + 0.5);
  }
  CHECK(c.keys.nchunks > 0);
  CHECK_EQ_INT(pk_closed_find(&c, 1000 + 3 * 200 + 7 + 0.5),
               4 + 3 * 200 + 7 + 1);
  CHECK_EQ_INT(pk_closed_find(&c, 1000 + 99 * 200 + 0.5), 4 + 99 * 200 + 1);
  CHECK_EQ_INT(pk_closed_find(&c, 1000.25), 0);
  pk_closed_clear(&c);
  CHECK_EQ_INT(c.keys.n, 0);
  CHECK_EQ_INT(pk_closed_find(&c, 12), 0);
  pk_closed_free(&c);
}

int main(void) {
  /* the two that fork first: a child opens its own file only if this
   * process has none yet */
  TEST_RUN(test_tmpdir);
  TEST_RUN(test_no_tmpdir_falls_back);
  char dir[] = "/tmp/test_pk_hist.XXXXXX"; /* whatever $TMPDIR is */
  CHECK(mkdtemp(dir) != NULL);
  setenv("TMPDIR", dir, 1);
  TEST_RUN(test_small_stays_in_memory);
  TEST_RUN(test_spill_and_read_back);
  TEST_RUN(test_window_zero_and_huge_keep);
  TEST_RUN(test_set_and_find);
  TEST_RUN(test_reset_reuses_chunks);
  TEST_RUN(test_closed_keys);
  CHECK(rmdir(dir) == 0);
  return TEST_REPORT("test_pk_hist");
}
