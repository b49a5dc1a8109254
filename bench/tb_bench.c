/* tb_bench.c - reading a TensorBoard log directory (docs/tensorboard.md)
 * against a raw read of the same bytes.
 *
 *   tb_bench gen  DIR TAGS STEPS   one event file of TAGS x STEPS scalars,
 *                                  one add_scalar Event (a simple_value)
 *                                  per record, as PyTorch's SummaryWriter
 *                                  writes them (real masked CRC32C)
 *   tb_bench raw  DIR REPEAT       read() the file into a 1 MiB buffer
 *   tb_bench read DIR REPEAT       smr_trial_open (fresh catalog): every
 *                                  scalar into the model; then a refresh of
 *                                  the unchanged folder, then one after
 *                                  1,000 more records were appended
 *
 * The median of REPEAT passes (after one untimed pass that warms the page
 * cache); peak RSS is the process's after that first pass (one open, as a
 * `smrules run` does), and after all of them (each mode in its own
 * process).
 * Results are "RESULT <key> <value>" lines for run.sh. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "tb_encode.h"
#include "trial/trial.h"

#define FILE_NAME "events.out.tfevents.1700000000.bench.1.0"
#define MAX_REPEAT 50

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long max_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- writing ------------------------------------------------------------ */

static const char *const tags[] = {
    "train/loss",        "train/grad_norm",  "train/learning_rate",
    "train/epoch",       "eval/loss",        "eval/accuracy",
    "train/tokens",      "train/perplexity", "system/gpu_mem",
    "system/throughput", "train/aux_loss",   "train/z_loss"};

static void write_steps(FILE *f, int ntags, long from, long to) {
  uint8_t buf[512];
  for (long s = from; s < to; s++)
    for (int k = 0; k < ntags; k++) {
      size_t n = scalar_event(buf, 1.7e9 + (double)s, s, tags[k],
                              (float)(1.0 / (double)(s + k + 1)));
      put_record(f, buf, n);
    }
}

static int gen(const char *dir, int ntags, long steps) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, FILE_NAME);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "tb_bench: %s: %s\n", path, strerror(errno));
    return 1;
  }
  put_version_record(f);
  write_steps(f, ntags, 0, steps);
  fclose(f);
  printf("RESULT tb_scalars %ld\n", (long)ntags * steps);
  return 0;
}

/* ---- reading ------------------------------------------------------------ */

static int raw(const char *dir, int repeat) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, FILE_NAME);
  static char buf[1 << 20] __attribute__((aligned(4096)));
  double t[MAX_REPEAT];
  long long bytes = 0;
  for (int r = -1; r < repeat; r++) {
    double t0 = now_sec();
    int fd = open(path, O_RDONLY);
    if (fd < 0)
      return 1;
    bytes = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
      bytes += n;
    close(fd);
    if (r >= 0)
      t[r] = now_sec() - t0;
  }
  printf("RESULT tb_bytes %lld\n", bytes);
  printf("RESULT tb_raw_s %.4f\n", median(t, repeat));
  printf("RESULT tb_raw_rss_mb %.1f\n", max_rss_kb() / 1024.0);
  return 0;
}

static int read_trial(const char *dir, int repeat) {
  smr_trial_opts o = {
      .fresh = true, .live = true, .format = SMR_TRIAL_TENSORBOARD};
  double t[MAX_REPEAT];
  smr_error err;
  size_t tensors = 0;
  long first_rss_kb = 0;
  for (int r = -1; r < repeat; r++) {
    double t0 = now_sec();
    smr_trial *tr;
    if (smr_trial_open(dir, &o, &tr, &err) != SMR_OK) {
      fprintf(stderr, "tb_bench: open: %s\n", err.msg);
      return 1;
    }
    if (r >= 0)
      t[r] = now_sec() - t0;
    smr_strv names = {0};
    smr_trial_tensor_names(tr, &names, &err);
    tensors = names.n;
    smr_strv_free(&names);
    smr_trial_close(tr);
    if (r < 0) /* the peak of one open, as a `smrules run` has */
      first_rss_kb = max_rss_kb();
  }
  printf("RESULT tb_read_s %.4f\n", median(t, repeat));
  printf("RESULT tb_read_rss_mb %.1f\n", first_rss_kb / 1024.0);
  /* after every pass: the heap of the closed ones is reused, not all
   * given back, so repeated opens in one process peak higher */
  printf("RESULT tb_read_rss_all_mb %.1f\n", max_rss_kb() / 1024.0);
  printf("  %zu tensors\n", tensors);
  /* incremental: an unchanged folder, then 1,000 records appended */
  smr_trial *tr;
  if (smr_trial_open(dir, &o, &tr, &err) != SMR_OK)
    return 1;
  size_t added = 0;
  double t0 = now_sec();
  smr_trial_refresh(tr, &added, &err);
  double unchanged = now_sec() - t0;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, FILE_NAME);
  FILE *f = fopen(path, "ab");
  if (!f)
    return 1;
  write_steps(f, 10, 2000000, 2000100);
  fclose(f);
  size_t added2 = 0;
  t0 = now_sec();
  smr_trial_refresh(tr, &added2, &err);
  double grown = now_sec() - t0;
  smr_trial_close(tr);
  printf("RESULT tb_refresh_unchanged_ms %.3f\n", unchanged * 1e3);
  printf("RESULT tb_refresh_unchanged_added %zu\n", added);
  printf("RESULT tb_refresh_1000_ms %.3f\n", grown * 1e3);
  printf("RESULT tb_refresh_1000_added %zu\n", added2);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "gen") == 0)
    return gen(argv[2], atoi(argv[3]), atol(argv[4]));
  int repeat = argc >= 4 ? atoi(argv[3]) : 5;
  if (repeat < 1 || repeat > MAX_REPEAT)
    repeat = 5;
  if (argc >= 3 && strcmp(argv[1], "raw") == 0)
    return raw(argv[2], repeat);
  if (argc >= 3 && strcmp(argv[1], "read") == 0)
    return read_trial(argv[2], repeat);
  fprintf(stderr, "usage: tb_bench gen DIR TAGS STEPS | raw DIR [REPEAT] | "
                  "read DIR [REPEAT]\n");
  return 2;
}
