/* test_shared_records.c - records a local source keeps for the rules that
 * read them next (shared_records.c, smr_source_share_records).
 *
 * Rules in lock step read step s's records, and rules that look back
 * (UnchangedTensor: two steps) read step s - 1's and s - 2's again.  The
 * kept records leave in the order they were first read, so three steps
 * that fit in the budget are each read from disk once.  (Kept by last use
 * instead, the look-back reads made the older steps look newer and step
 * s's records were dropped just before the next step came back for
 * them: this test then counted 36 reads from disk where 16 suffice.)
 *
 * Rules on other threads asking for a record while it is being read wait
 * for that read instead of reading it too.
 *
 * A record lands in memory at its offset in the file modulo 64: the
 * kernel's copy from the page cache was 3.7 times slower on this AMD EPYC
 * when the destination sat 16 bytes off the source's alignment, as a
 * malloc'd buffer did for records at multiples of 64.
 *
 * A record kept is found by its name (source, file, range) without
 * opening the file again; once its source is closed, by no other.
 *
 * A large record a rule keeps past its turn (smr_range_keep, the SDK's
 * value_keep) moves from the thread's turn bytes to the run's, which the
 * scheduler leaves out of the budget; it is kept only while every turn
 * that may run side by side can still hold two of the largest records,
 * and leaves the count when released. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "source/source.h"
#include "unit.h"

enum {
  STEPS = 8,
  PER_STEP = 2,
  RECORD = 4 << 20, /* 8 MiB a step: three steps fit in the budget, four not */
  LOOK_BACK = 2
};

static char dir[] = "/tmp/smr-shared-XXXXXX";

static void write_file(void) {
  char path[64];
  snprintf(path, sizeof path, "%s/events.bin", dir);
  FILE *f = fopen(path, "wb");
  char *b = calloc(1, RECORD);
  for (int r = 0; f && b && r < STEPS * PER_STEP; r++) {
    memset(b, 'a' + r, RECORD);
    fwrite(b, 1, RECORD, f);
  }
  free(b);
  if (f)
    fclose(f);
}

/* Reads step s's records and checks their bytes. */
static void read_step(smr_source *src, int s) {
  for (int k = 0; k < PER_STEP; k++) {
    int r = s * PER_STEP + k;
    smr_range range;
    smr_error e;
    CHECK_EQ_INT(smr_source_read_range(src, "events.bin", (uint64_t)r * RECORD,
                                       RECORD, &range, &e),
                 SMR_OK);
    CHECK(range.len == RECORD && range.data[0] == 'a' + r &&
          range.data[RECORD - 1] == 'a' + r);
    smr_range_release(&range);
  }
}

/* A source sharing records, and the read counts before the test. */
static smr_source *open_shared(uint64_t *reads0, uint64_t *hits0) {
  smr_source *src = NULL;
  smr_error e;
  CHECK_EQ_INT(smr_source_local_open(dir, &src, &e), SMR_OK);
  smr_source_share_records(src, true);
  smr_source_shared_counts(reads0, hits0);
  return src;
}

static void test_look_back_reads_once(void) {
  uint64_t reads0, hits0, reads, hits;
  smr_source *src = open_shared(&reads0, &hits0);
  for (int s = 0; s < STEPS; s++) {
    read_step(src, s); /* one rule */
    read_step(src, s); /* another */
    for (int back = 1; back <= LOOK_BACK && back <= s; back++)
      read_step(src, s - back); /* a look-back rule */
  }
  smr_source_shared_counts(&reads, &hits);
  uint64_t from_disk = (reads - reads0) - (hits - hits0);
  CHECK_EQ_INT(from_disk, STEPS * PER_STEP);
  smr_source_close(src);
}

typedef struct reader_arg {
  smr_source *src;
  pthread_barrier_t *start;
} reader_arg;

/* Runs n threads of fn and, when `also` is set, one of it, all on arg;
 * returns when they have ended. */
static void run_threads(int n, void *(*fn)(void *), void *(*also)(void *),
                        void *arg) {
  pthread_t th[16];
  for (int i = 0; i < n; i++)
    pthread_create(&th[i], NULL, fn, arg);
  if (also)
    pthread_create(&th[n++], NULL, also, arg);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
}

static void *read_all_steps(void *p) {
  reader_arg *a = p;
  pthread_barrier_wait(a->start);
  for (int s = 0; s < 3; s++) /* three steps: within the budget */
    read_step(a->src, s);
  return NULL;
}

static void test_concurrent_readers_read_once(void) {
  enum { THREADS = 4 };
  uint64_t reads0, hits0, reads, hits;
  smr_source *src = open_shared(&reads0, &hits0);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  reader_arg a = {src, &start};
  run_threads(THREADS, read_all_steps, NULL, &a);
  pthread_barrier_destroy(&start);
  smr_source_shared_counts(&reads, &hits);
  CHECK_EQ_INT(reads - reads0, THREADS * 3 * PER_STEP);
  CHECK_EQ_INT((reads - reads0) - (hits - hits0), 3 * PER_STEP);
  smr_source_close(src);
}

static void test_read_lands_aligned_like_the_file(void) {
  static const uint64_t offsets[] = {0, 1, 16, 63, 64, 175, 4096 + 16};
  for (int shared = 0; shared < 2; shared++) {
    smr_source *src;
    smr_error e;
    CHECK_EQ_INT(smr_source_local_open(dir, &src, &e), SMR_OK);
    smr_source_share_records(src, shared);
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
      smr_range range;
      uint64_t off = offsets[k];
      CHECK_EQ_INT(
          smr_source_read_range(src, "events.bin", off, 100000, &range, &e),
          SMR_OK);
      CHECK_EQ_INT(((uintptr_t)range.data - off) % 64, 0);
      CHECK(range.data[0] == 'a' && range.data[99999] == 'a');
      smr_range_release(&range);
    }
    smr_source_close(src);
  }
}

/* Reads the two 64 KiB records of named.bin; false if either fails. */
static bool read_named(smr_source *src) {
  bool ok = true;
  for (int r = 0; r < 2; r++) {
    smr_range range;
    smr_error e;
    if (smr_source_read_range(src, "named.bin", (uint64_t)r << 16, 1 << 16,
                              &range, &e) != SMR_OK) {
      ok = false;
      continue;
    }
    ok = ok && range.data[0] == 'x' + r;
    smr_range_release(&range);
  }
  return ok;
}

/* The file is renamed away after a first read: the kept records are
 * still served by name (no open); another source over the same folder
 * does not see the first one's records by name, and a range never read
 * is an error as before. */
static void test_kept_record_served_by_name(void) {
  char from[64], to[64];
  snprintf(from, sizeof from, "%s/named.bin", dir);
  snprintf(to, sizeof to, "%s/moved.bin", dir);
  FILE *f = fopen(from, "wb");
  for (int r = 0; f && r < 2; r++)
    for (int i = 0; i < 1 << 16; i++)
      fputc('x' + r, f);
  CHECK(f && fclose(f) == 0);
  uint64_t reads0, hits0, reads, hits;
  smr_source *src = open_shared(&reads0, &hits0);
  CHECK(read_named(src));
  CHECK_EQ_INT(rename(from, to), 0);
  CHECK(read_named(src)); /* the file is gone: served by name */
  smr_source_shared_counts(&reads, &hits);
  CHECK_EQ_INT(reads - reads0, 4);
  CHECK_EQ_INT(hits - hits0, 2);
  smr_range range;
  smr_error e;
  CHECK(smr_source_read_range(src, "named.bin", 0, 100, &range, &e) != SMR_OK);
  smr_source *other = open_shared(&reads0, &hits0);
  CHECK(!read_named(other));
  smr_source_close(other);
  smr_source_close(src);
  unlink(to);
}

/* parts.bin: records of odd lengths, each byte a function of its offset
 * in the file, so a part read to the wrong place shows. */
enum { PART_RECORDS = 3, PART_LEN = (1 << 20) + 12345 };

static uint8_t part_byte(uint64_t pos, int round) {
  return (uint8_t)(((pos + (uint64_t)round) * 2654435761u) >> 13);
}

typedef struct parts_arg {
  smr_source *src;
  pthread_barrier_t *start;
  const char *file;
  int round;
} parts_arg;

/* dir/name holding `len` bytes of part_byte(., round); its path in path. */
static void write_parts_file(const char *name, uint64_t len, int round,
                             char *path, size_t size) {
  snprintf(path, size, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  for (uint64_t i = 0; f && i < len; i++)
    fputc(part_byte(i, round), f);
  CHECK(f && fclose(f) == 0);
}

static void *read_parts_thread(void *v) {
  parts_arg *a = v;
  pthread_barrier_wait(a->start);
  for (int r = 0; r < PART_RECORDS; r++) {
    smr_range range;
    smr_error e;
    uint64_t off = (uint64_t)r * PART_LEN;
    if (smr_source_read_range(a->src, a->file, off, PART_LEN, &range, &e) !=
        SMR_OK) {
      CHECK(0);
      continue;
    }
    size_t bad = 0;
    for (size_t i = 0; i < range.len; i++)
      bad += range.data[i] != part_byte(off + i, a->round);
    CHECK_EQ_INT(bad, 0);
    smr_range_release(&range);
  }
  return NULL;
}

/* Four threads read the same new records at once, four times over: a new
 * file each time, with other bytes, which the file system may give the
 * last one's inode number (then only its change time tells them apart). */
static void test_parts_land_in_place(void) {
  enum { THREADS = 4 };
  for (int round = 0; round < 4; round++) {
    char name[32], path[96];
    snprintf(name, sizeof name, "parts%d.bin", round);
    write_parts_file(name, (uint64_t)PART_RECORDS * PART_LEN, round, path,
                     sizeof path);
    uint64_t reads0, hits0, reads, hits;
    smr_source *src = open_shared(&reads0, &hits0);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    parts_arg a = {src, &start, name, round};
    run_threads(THREADS, read_parts_thread, NULL, &a);
    pthread_barrier_destroy(&start);
    smr_source_shared_counts(&reads, &hits);
    CHECK_EQ_INT(reads - reads0, THREADS * PART_RECORDS);
    CHECK_EQ_INT((reads - reads0) - (hits - hits0), PART_RECORDS);
    smr_source_close(src);
    unlink(path);
  }
}

/* A file cut short while four threads read a record of it in parts:
 * each read gives the whole record with the right bytes, or an error;
 * none hangs, none sees another file's bytes. */
typedef struct cut_arg {
  smr_source *src;
  pthread_barrier_t *start;
  const char *name, *path;
  int round, ok, failed;
  pthread_mutex_t mu;
} cut_arg;

static void *read_while_cut(void *v) {
  cut_arg *a = v;
  pthread_barrier_wait(a->start);
  smr_range range;
  smr_error e;
  int rc = smr_source_read_range(a->src, a->name, 0, PART_LEN, &range, &e);
  size_t bad = 0;
  for (size_t i = 0; rc == SMR_OK && i < range.len; i++)
    bad += range.data[i] != part_byte(i, a->round);
  if (rc == SMR_OK)
    smr_range_release(&range);
  pthread_mutex_lock(&a->mu);
  a->ok += rc == SMR_OK && bad == 0;
  a->failed += rc != SMR_OK;
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

static void *cut_file(void *v) {
  cut_arg *a = v;
  pthread_barrier_wait(a->start);
  usleep((useconds_t)(a->round % 7) * 50);
  CHECK_EQ_INT(truncate(a->path, PART_LEN / 3), 0);
  return NULL;
}

static void test_file_cut_while_read_in_parts(void) {
  enum { READERS = 4 };
  int ok = 0, failed = 0;
  for (int round = 0; round < 40; round++) {
    char name[32], path[96];
    snprintf(name, sizeof name, "cut%d.bin", round);
    write_parts_file(name, PART_LEN, round, path, sizeof path);
    uint64_t reads0, hits0;
    cut_arg a = {.src = open_shared(&reads0, &hits0),
                 .name = name,
                 .path = path,
                 .round = round};
    pthread_mutex_init(&a.mu, NULL);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, READERS + 1);
    a.start = &start;
    run_threads(READERS, read_while_cut, cut_file, &a);
    pthread_barrier_destroy(&start);
    pthread_mutex_destroy(&a.mu);
    CHECK_EQ_INT(a.ok + a.failed, READERS); /* no wrong bytes */
    ok += a.ok;
    failed += a.failed;
    smr_source_close(a.src);
    unlink(path);
  }
  fprintf(stderr, "  file cut while read: %d whole reads, %d errors\n", ok,
          failed);
}

/* A range of len bytes of events.bin, read unshared. */
static void read_big(smr_source *src, uint64_t off, uint64_t len,
                     smr_range *r) {
  smr_error e;
  CHECK_EQ_INT(smr_source_read_range(src, "events.bin", off, len, r, &e),
               SMR_OK);
}

/* Keeps 8 MiB records until the budget says no, with `slots` turns side
 * by side; returns how many were kept. */
static int keep_until_refused(smr_source *src, size_t slots) {
  enum { MAX_KEPT = 8 };
  smr_range kept[MAX_KEPT];
  int n = 0;
  size_t extra0 = smr_source_extra_bytes(), budget = smr_source_record_budget();
  smr_source_set_turn_slots(slots);
  for (; n < MAX_KEPT; n++) {
    read_big(src, 0, 2 * RECORD, &kept[n]);
    (void)smr_source_turn_record_bytes();
    size_t before = smr_source_extra_bytes() - extra0;
    size_t largest = smr_source_largest_record();
    /* the one kept, and two of the largest for each turn slot */
    bool fits = before + (1 + 2 * slots) * largest <= budget;
    bool ok = smr_range_keep(&kept[n]);
    CHECK(ok == fits);
    if (!ok) {
      smr_range_release(&kept[n]);
      break;
    }
    size_t cap = smr_source_extra_bytes() - extra0 - before;
    CHECK(cap >= 2 * RECORD && cap <= largest);
    CHECK(smr_range_keep(&kept[n])); /* counted once */
    CHECK(smr_source_extra_bytes() - extra0 == before + cap);
    /* no longer the turn's: the next turn begins with none held */
    (void)smr_source_turn_record_bytes();
    CHECK(smr_source_turn_record_bytes() == 0);
  }
  int got = n;
  while (n > 0)
    smr_range_release(&kept[--n]);
  CHECK(smr_source_extra_bytes() == extra0);
  smr_source_set_turn_slots(1);
  return got;
}

static void test_kept_range_counts_in_the_run(void) {
  smr_source *src = NULL;
  smr_error e;
  CHECK_EQ_INT(smr_source_local_open(dir, &src, &e), SMR_OK);
  size_t extra0 = smr_source_extra_bytes();
  /* a record the rules share (at most 7 MiB): nothing to keep */
  smr_range small;
  read_big(src, 0, RECORD, &small);
  CHECK(!smr_range_keep(&small));
  CHECK(smr_source_extra_bytes() == extra0);
  smr_range_release(&small);
  /* 50 MiB: with one turn at a time, 4 records of 8 MiB are kept beside
   * it; with two side by side, 2; with three, none */
  CHECK_EQ_INT(keep_until_refused(src, 1), 4);
  CHECK_EQ_INT(keep_until_refused(src, 2), 2);
  CHECK_EQ_INT(keep_until_refused(src, 3), 0);
  smr_source_close(src);
}

static long minor_faults(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/* SimilarAcrossRuns reads its reference trial (a source of its own, not
 * sharing records) in pieces of 1 MiB, one after the other, between the
 * rules' reads of the trial's records (shared).  While the record
 * buffers are over the budget, each piece is read into the buffer the
 * one before was read into, also when a small shared record read between
 * two pieces took it and was then dropped: before, each piece mapped and
 * faulted in a buffer anew (141 of 1 MiB on the bench's CNN trial with
 * the twenty rules). */
static void test_pieces_reuse_one_buffer(void) {
  smr_source *other = NULL, *trial = NULL;
  smr_error e;
  CHECK_EQ_INT(smr_source_local_open(dir, &other, &e), SMR_OK);
  CHECK_EQ_INT(smr_source_local_open(dir, &trial, &e), SMR_OK);
  smr_source_share_records(trial, true);
  enum { HELD = 7, PIECES = 16, PIECE = 1 << 20 };
  smr_range held[HELD]; /* 56 MiB: over the budget */
  for (int i = 0; i < HELD; i++)
    read_big(other, 0, 2 * RECORD, &held[i]);
  smr_range r;
  CHECK_EQ_INT(smr_source_read_range(other, "events.bin", 0, PIECE, &r, &e),
               SMR_OK);
  smr_range_release(&r);
  long f0 = minor_faults();
  for (int i = 0; i < PIECES; i++) {
    uint64_t off = (uint64_t)i * PIECE;
    CHECK_EQ_INT(smr_source_read_range(other, "events.bin", off, PIECE, &r, &e),
                 SMR_OK);
    CHECK(r.len == PIECE && r.data[0] == 'a' + (int)(off / RECORD));
    smr_range_release(&r);
    CHECK_EQ_INT(smr_source_read_range(trial, "events.bin", off + 4096,
                                       64 << 10, &r, &e),
                 SMR_OK);
    smr_range_release(&r);
  }
  long faults = minor_faults() - f0;
  /* a fresh 1 MiB buffer is 256 pages */
  CHECK(faults < PIECES * 256 / 4);
  for (int i = 0; i < HELD; i++)
    smr_range_release(&held[i]);
  fprintf(stderr, "  %d pieces over the budget: %ld page faults\n", PIECES,
          faults);
  smr_source_close(trial);
  smr_source_close(other);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  write_file();
  TEST_RUN(test_look_back_reads_once);
  TEST_RUN(test_concurrent_readers_read_once);
  TEST_RUN(test_read_lands_aligned_like_the_file);
  TEST_RUN(test_kept_record_served_by_name);
  TEST_RUN(test_parts_land_in_place);
  TEST_RUN(test_file_cut_while_read_in_parts);
  TEST_RUN(test_kept_range_counts_in_the_run);
  TEST_RUN(test_pieces_reuse_one_buffer);
  char path[64];
  snprintf(path, sizeof path, "%s/events.bin", dir);
  unlink(path);
  rmdir(dir);
  return TEST_REPORT("test_shared_records");
}
