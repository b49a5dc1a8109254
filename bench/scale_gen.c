/* scale_gen.c - writes a large trial for the scale benchmark
 * (bench/s3_bench.sh): W workers, S TRAIN steps, each step with T weight
 * and T gradient tensors of E float32 elements plus the loss scalar, the
 * collections `weights`, `gradients`, `losses`, and the end marker.
 * Written with the C writer (core/writer/writer.h), as smdebug writes trials.
 *
 *   scale_gen DIR STEPS TENSORS ELEMENTS [WORKERS [WEIGHTS]]
 *
 * WEIGHTS 0 writes the gradients (and the loss) only: a trial that is all
 * gradients, for benchmark 1b of bench/run.sh.
 *
 * Values are small random numbers that change a little every step, so the
 * built-in rules read everything and find nothing wrong.  Prints the bytes
 * written. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer/writer.h"

static void die(const char *what, const smr_error *e) {
  fprintf(stderr, "scale_gen: %s: %s\n", what, e ? e->msg : "");
  exit(1);
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static float next_float(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)(((double)(rng >> 11) / 9007199254740992.0 - 0.5) * 2e-2);
}

static void write_collections(smr_writer *w, int workers) {
  static char *grad_re[1] = {"^gradient/"};
  static char *weight_re[1] = {"^layer[0-9]+\\.weight$"};
  static char *loss_re[1] = {"loss"};
  smr_collection items[3] = {
      {.name = "gradients", .include_regex = grad_re, .n_include_regex = 1},
      {.name = "weights", .include_regex = weight_re, .n_include_regex = 1},
      {.name = "losses", .include_regex = loss_re, .n_include_regex = 1},
  };
  smr_collections c = {.items = items, .n = 3, .num_workers = workers};
  smr_error err;
  if (smr_writer_collections(w, &c, &err))
    die("collections", &err);
}

static void write_step(smr_writer *w, int64_t step, int tensors, float *buf,
                       int64_t elems, bool weights) {
  smr_error err;
  if (smr_writer_step_begin(w, step, SMR_MODE_TRAIN, step, &err))
    die("step_begin", &err);
  for (int k = weights ? 0 : tensors; k < 2 * tensors; k++) {
    char name[64];
    snprintf(name, sizeof name,
             k < tensors ? "layer%d.weight" : "gradient/layer%d.weight",
             k % tensors);
    for (int i = 0; i < 64; i++) { /* a little change every step */
      float v = next_float();
      buf[rng % (uint64_t)elems] = v;
    }
    if (smr_writer_tensor(w, name, SMR_DT_FLOAT, 1, &elems, buf,
                          (size_t)elems * sizeof(float), 1e9 + step, &err))
      die("tensor", &err);
  }
  float loss = 2.0f / (float)(step + 1) + 0.01f;
  if (smr_writer_tensor(w, "loss", SMR_DT_FLOAT, 0, NULL, &loss, sizeof loss,
                        1e9 + step, &err))
    die("loss", &err);
  if (smr_writer_step_end(w, &err))
    die("step_end", &err);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: scale_gen DIR STEPS TENSORS ELEMENTS [WORKERS "
                    "[WEIGHTS]]\n");
    return 2;
  }
  const char *dir = argv[1];
  int64_t steps = atoll(argv[2]), elems = atoll(argv[4]);
  int tensors = atoi(argv[3]), workers = argc > 5 ? atoi(argv[5]) : 1;
  bool weights = argc > 6 ? atoi(argv[6]) != 0 : true;
  if (steps < 1 || tensors < 1 || elems < 1 || workers < 1)
    return 2;
  float *buf = malloc((size_t)elems * sizeof *buf);
  if (!buf)
    return 1;
  for (int64_t i = 0; i < elems; i++)
    buf[i] = next_float();
  for (int wk = 0; wk < workers; wk++) {
    char worker[32];
    snprintf(worker, sizeof worker, "worker_%d", wk);
    smr_writer *w;
    smr_error err;
    if (smr_writer_open(dir, worker, 0, &w, &err))
      die("open", &err);
    write_collections(w, workers);
    for (int64_t s = 0; s < steps; s++)
      write_step(w, s, tensors, buf, elems, weights);
    if (smr_writer_close(w, &err))
      die("close", &err);
  }
  smr_error err;
  if (smr_write_end_marker(dir, &err))
    die("end marker", &err);
  free(buf);
  double bytes = (double)workers * (double)steps *
                 ((weights ? 2.0 : 1.0) * tensors * (double)elems * 4.0 + 4.0);
  printf("%.0f\n", bytes);
  return 0;
}
