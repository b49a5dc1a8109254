/* bench_reader.c - reader throughput against raw read() on a warm page cache.
 *
 *   bench_reader gen  DIR STEPS [ELEMS]   write a trial: STEPS steps of 8
 *                                         float32 tensors of ELEMS elements
 *                                         (default 262144) plus a loss scalar
 *   bench_reader raw  DIR REPEAT          read() every event file into a
 *                                         1 MiB buffer (one warm-up pass, then
 *                                         REPEAT timed passes)
 *   bench_reader read DIR STATE REPEAT    open the trial, then value + mean|x|
 *                                         of every tensor at every step
 *
 * Each timed command runs in its own process so that ru_maxrss belongs to it
 * alone.  Results are printed as "RESULT <key> <value>" lines (run.sh collects
 * them) after human-readable lines. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "format/tensor.h"
#include "trial/trial.h"
#include "writer/writer.h"

#define NUM_BIG 8
#define MAX_REPEAT 50
#define READ_BUF (1u << 20)

/* Realistic PyTorch names: four gradients, four weights, one loss. */
static const char *const big_names[NUM_BIG] = {"gradient/Net_conv1.weight",
                                               "gradient/Net_conv2.weight",
                                               "gradient/Net_fc1.weight",
                                               "gradient/Net_fc2.weight",
                                               "Net_conv1.weight",
                                               "Net_conv2.weight",
                                               "Net_fc1.weight",
                                               "Net_fc2.weight"};
static const char *const loss_name = "CrossEntropyLoss_output_0";

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the process (user + system): less sensitive than wall time to
 * other programs competing for the cores. */
static double cpu_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long max_rss_kb(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return -1;
  return ru.ru_maxrss;
}

static void die_smr(const char *what, const smr_error *err) {
  char buf[2048];
  smr_error_format(err, buf, sizeof buf);
  fprintf(stderr, "bench_reader: %s failed: %s (%s)\n", what, buf,
          smr_status_name(err->status));
  exit(1);
}

static void die_errno(const char *what, const char *path) {
  fprintf(stderr, "bench_reader: %s %s: %s\n", what, path, strerror(errno));
  exit(1);
}

static long parse_count(const char *s, const char *what, long min, long max) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < min || v > max) {
    fprintf(stderr,
            "bench_reader: %s must be an integer in [%ld, %ld], got "
            "'%s'\n",
            what, min, max, s);
    exit(2);
  }
  return v;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- gen ---- */

/* Deterministic pseudo-normal values, gradient-sized (|x| ~ 1e-3). */
static void fill_values(float *v, long n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (long i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double u = (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
    v[i] = (float)((u - 0.5) * 2e-3);
  }
}

static void write_collections(smr_writer *w) {
  static const char *const grad_names[4] = {big_names[0], big_names[1],
                                            big_names[2], big_names[3]};
  static const char *const weight_names[4] = {big_names[4], big_names[5],
                                              big_names[6], big_names[7]};
  static const char *const loss_names[1] = {"CrossEntropyLoss_output_0"};
  static const char *const grad_re[1] = {"^gradient"};
  static const char *const loss_re[1] = {"CrossEntropyLoss_output_0"};
  smr_collection items[3] = {
      {.name = "gradients",
       .include_regex = (char **)grad_re,
       .n_include_regex = 1,
       .tensor_names = (char **)grad_names,
       .n_tensor_names = 4},
      {.name = "weights",
       .tensor_names = (char **)weight_names,
       .n_tensor_names = 4},
      {.name = "losses",
       .include_regex = (char **)loss_re,
       .n_include_regex = 1,
       .tensor_names = (char **)loss_names,
       .n_tensor_names = 1},
  };
  smr_collections c = {.items = items, .n = 3, .num_workers = 1};
  smr_error err;
  if (smr_writer_collections(w, &c, &err))
    die_smr("smr_writer_collections", &err);
}

static void write_step(smr_writer *w, int64_t step, float *const bufs[],
                       long elems) {
  smr_error err;
  if (smr_writer_step_begin(w, step, SMR_MODE_TRAIN, step, &err))
    die_smr("smr_writer_step_begin", &err);
  int64_t shape[2] = {elems / 512, 512};
  int ndim = elems % 512 == 0 ? 2 : 1;
  if (ndim == 1)
    shape[0] = elems;
  double wall = 1.7e9 + (double)step;
  for (int k = 0; k < NUM_BIG; k++) {
    bufs[k][0] = (float)step * 1e-6f; /* every step differs a little */
    if (smr_writer_tensor(w, big_names[k], SMR_DT_FLOAT, ndim, shape, bufs[k],
                          (size_t)elems * sizeof(float), wall, &err))
      die_smr("smr_writer_tensor", &err);
  }
  float loss = 2.3f / (1.0f + (float)step * 0.01f);
  if (smr_writer_tensor(w, loss_name, SMR_DT_FLOAT, 0, NULL, &loss, sizeof loss,
                        wall, &err))
    die_smr("smr_writer_tensor (loss)", &err);
  if (smr_writer_step_end(w, &err))
    die_smr("smr_writer_step_end", &err);
}

static int cmd_gen(const char *dir, long steps, long elems) {
  float *bufs[NUM_BIG];
  for (int k = 0; k < NUM_BIG; k++) {
    bufs[k] = malloc((size_t)elems * sizeof(float));
    if (!bufs[k]) {
      fprintf(stderr, "bench_reader: out of memory for %ld elements\n", elems);
      return 1;
    }
    fill_values(bufs[k], elems, (uint64_t)k + 1);
  }
  smr_error err;
  smr_writer *w;
  double t0 = now_sec();
  if (smr_writer_open(dir, "worker_0", 0, &w, &err))
    die_smr("smr_writer_open", &err);
  write_collections(w);
  for (long s = 0; s < steps; s++)
    write_step(w, s, bufs, elems);
  if (smr_writer_close(w, &err))
    die_smr("smr_writer_close", &err);
  if (smr_write_end_marker(dir, &err))
    die_smr("smr_write_end_marker", &err);
  double dt = now_sec() - t0;
  double gb = (double)steps * NUM_BIG * (double)elems * 4 / 1e9;
  printf("generated %ld steps x %d tensors x %ld float32 (+1 scalar) in %s: "
         "%.2f GB of tensor data in %.2f s\n",
         steps, NUM_BIG, elems, dir, gb, dt);
  printf("RESULT gen_seconds %.3f\n", dt);
  for (int k = 0; k < NUM_BIG; k++)
    free(bufs[k]);
  return 0;
}

/* ---- raw ---- */

typedef struct file_list {
  char **paths;
  size_t n, cap;
  uint64_t bytes;
} file_list;

static file_list *walk_target;

static int collect_event_file(const char *path, const struct stat *st, int type,
                              struct FTW *ftw) {
  (void)ftw;
  size_t len = strlen(path);
  static const char suffix[] = ".tfevents";
  if (type != FTW_F || len < sizeof suffix - 1 ||
      strcmp(path + len - (sizeof suffix - 1), suffix) != 0)
    return 0;
  file_list *l = walk_target;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 256;
    char **p = realloc(l->paths, l->cap * sizeof *p);
    if (!p)
      return -1;
    l->paths = p;
  }
  l->paths[l->n] = strdup(path);
  if (!l->paths[l->n])
    return -1;
  l->n++;
  l->bytes += (uint64_t)st->st_size;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every event file under DIR/events, sorted (the order of steps). */
static void list_event_files(const char *dir, file_list *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/events", dir);
  memset(out, 0, sizeof *out);
  walk_target = out;
  if (nftw(path, collect_event_file, 16, FTW_PHYS) != 0)
    die_errno("cannot walk", path);
  if (out->n == 0) {
    fprintf(stderr, "bench_reader: no .tfevents files under %s\n", path);
    exit(1);
  }
  qsort(out->paths, out->n, sizeof *out->paths, cmp_str);
}

static void file_list_free(file_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->paths[i]);
  free(l->paths);
}

static uint64_t read_file(const char *path, char *buf) {
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    die_errno("cannot open", path);
  uint64_t total = 0;
  for (;;) {
    ssize_t r = read(fd, buf, READ_BUF);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      die_errno("cannot read", path);
    if (r == 0)
      break;
    total += (uint64_t)r;
  }
  close(fd);
  return total;
}

static uint64_t read_all(const file_list *l, char *buf) {
  uint64_t total = 0;
  for (size_t i = 0; i < l->n; i++)
    total += read_file(l->paths[i], buf);
  return total;
}

static int cmd_raw(const char *dir, int repeat) {
  file_list files;
  list_event_files(dir, &files);
  /* Page-aligned, as cat's buffer is: a malloc'd 1 MiB buffer starts 16
   * bytes into a page, and the kernel's copy into a destination 16 bytes
   * off the file's alignment runs several times slower on some CPUs (the
   * baseline would then flatter the reader). */
  char *buf = aligned_alloc(4096, READ_BUF);
  if (!buf) {
    fprintf(stderr, "bench_reader: out of memory\n");
    return 1;
  }
  double t0 = now_sec();
  uint64_t warm = read_all(&files, buf); /* warm the page cache */
  printf("raw: warm-up pass read %zu event files, %.3f GB in %.2f s\n", files.n,
         (double)warm / 1e9, now_sec() - t0);
  double gbps[MAX_REPEAT], cpu_gbps[MAX_REPEAT];
  for (int i = 0; i < repeat; i++) {
    t0 = now_sec();
    double c0 = cpu_sec();
    uint64_t got = read_all(&files, buf);
    double dt = now_sec() - t0, dc = cpu_sec() - c0;
    if (got != files.bytes) {
      fprintf(stderr, "bench_reader: read %llu bytes, files hold %llu\n",
              (unsigned long long)got, (unsigned long long)files.bytes);
      return 1;
    }
    gbps[i] = (double)got / 1e9 / dt;
    cpu_gbps[i] = (double)got / 1e9 / dc;
    printf("raw: pass %d: %.3f GB in %.3f s = %.2f GB/s (cpu %.3f s = %.2f "
           "GB/s)\n",
           i + 1, (double)got / 1e9, dt, gbps[i], dc, cpu_gbps[i]);
  }
  printf("RESULT event_bytes %llu\n", (unsigned long long)files.bytes);
  printf("RESULT event_files %zu\n", files.n);
  printf("RESULT raw_gbps %.3f\n", median(gbps, repeat));
  printf("RESULT raw_cpu_gbps %.3f\n", median(cpu_gbps, repeat));
  printf("RESULT raw_maxrss_kb %ld\n", max_rss_kb());
  free(buf);
  file_list_free(&files);
  return 0;
}

/* ---- read ---- */

typedef struct read_stats {
  uint64_t values;
  uint64_t elements;
  double checksum;
} read_stats;

static void read_one(smr_trial *t, const char *name, int64_t step,
                     read_stats *st) {
  smr_error err;
  smr_tensor v;
  smr_value_loc loc;
  int rc =
      smr_trial_value(t, name, step, SMR_MODE_GLOBAL, NULL, &v, &loc, &err);
  if (rc == SMR_TENSOR_UNAVAILABLE_FOR_STEP)
    return; /* the tensor was not saved at this step */
  if (rc) {
    fprintf(stderr, "bench_reader: value of '%s' at step %lld:\n", name,
            (long long)step);
    die_smr("smr_trial_value", &err);
  }
  double m;
  if (smr_tensor_reduce(&v, SMR_RED_MEAN, true, &m, &err)) {
    smr_tensor_release(&v);
    die_smr("smr_tensor_reduce", &err);
  }
  st->values++;
  st->elements += (uint64_t)v.count;
  st->checksum += m;
  smr_tensor_release(&v);
}

/* One full pass: open, every tensor at every step, close. */
static double read_pass(const char *dir, const char *state, read_stats *st,
                        double *open_sec, double *cpu) {
  smr_trial_opts opts = {.state_path = state};
  smr_error err;
  smr_trial *t;
  double t0 = now_sec(), c0 = cpu_sec();
  if (smr_trial_open(dir, &opts, &t, &err))
    die_smr("smr_trial_open", &err);
  *open_sec = now_sec() - t0;
  smr_strv names = {0};
  if (smr_trial_tensor_names(t, &names, &err))
    die_smr("smr_trial_tensor_names", &err);
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  memset(st, 0, sizeof *st);
  for (size_t s = 0; s < steps.n; s++)
    for (size_t k = 0; k < names.n; k++)
      read_one(t, names.v[k], steps.v[s], st);
  smr_i64v_free(&steps);
  smr_strv_free(&names);
  smr_trial_close(t);
  *cpu = cpu_sec() - c0;
  return now_sec() - t0;
}

static int cmd_read(const char *dir, const char *state, int repeat) {
  file_list files;
  list_event_files(dir, &files);
  uint64_t bytes = files.bytes;
  file_list_free(&files);
  if (unlink(state) != 0 && errno != ENOENT)
    die_errno("cannot remove", state);
  read_stats st;
  double open_sec, cpu, gbps[MAX_REPEAT], cpu_gbps[MAX_REPEAT];
  double opens[MAX_REPEAT];
  /* First pass builds the stored catalog; not timed. */
  double dt = read_pass(dir, state, &st, &open_sec, &cpu);
  printf("read: first pass (builds the catalog): open %.1f ms, total %.3f s\n",
         open_sec * 1e3, dt);
  for (int i = 0; i < repeat; i++) {
    dt = read_pass(dir, state, &st, &opens[i], &cpu);
    gbps[i] = (double)bytes / 1e9 / dt;
    cpu_gbps[i] = (double)bytes / 1e9 / cpu;
    printf("read: pass %d: %llu values, %llu elements, mean|x| sum %.6g, "
           "open %.1f ms, %.3f s = %.2f GB/s of event bytes (cpu %.3f s = "
           "%.2f GB/s)\n",
           i + 1, (unsigned long long)st.values,
           (unsigned long long)st.elements, st.checksum, opens[i] * 1e3, dt,
           gbps[i], cpu, cpu_gbps[i]);
  }
  if (st.values == 0 || !isfinite(st.checksum)) {
    fprintf(stderr, "bench_reader: no values read or bad checksum\n");
    return 1;
  }
  printf("RESULT reader_values %llu\n", (unsigned long long)st.values);
  printf("RESULT reader_open_ms %.2f\n", median(opens, repeat) * 1e3);
  printf("RESULT reader_gbps %.3f\n", median(gbps, repeat));
  printf("RESULT reader_cpu_gbps %.3f\n", median(cpu_gbps, repeat));
  printf("RESULT reader_maxrss_kb %ld\n", max_rss_kb());
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_reader gen DIR STEPS [ELEMS]\n"
                  "       bench_reader raw DIR REPEAT\n"
                  "       bench_reader read DIR STATE REPEAT\n");
  return 2;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 4 && argc <= 5 && strcmp(argv[1], "gen") == 0)
    return cmd_gen(argv[2], parse_count(argv[3], "STEPS", 1, 1000000),
                   argc == 5 ? parse_count(argv[4], "ELEMS", 1, 1L << 28)
                             : 262144);
  if (argc == 4 && strcmp(argv[1], "raw") == 0)
    return cmd_raw(argv[2], (int)parse_count(argv[3], "REPEAT", 1, MAX_REPEAT));
  if (argc == 5 && strcmp(argv[1], "read") == 0)
    return cmd_read(argv[2], argv[3],
                    (int)parse_count(argv[4], "REPEAT", 1, MAX_REPEAT));
  return usage();
}
