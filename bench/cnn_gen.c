/* cnn_gen.c - writes a trial shaped like one smdebug's PyTorch hook saves
 * while a small CNN trains (benchmark 1c of bench/run.sh, issue: speed on
 * real training trials).  Written with the C writer (core/writer/writer.h).
 *
 *   cnn_gen DIR TRAIN_STEPS [EVAL_EVERY [EVAL_STEPS]]
 *
 * The model (3.2 M parameters, batch 32, input 3x64x64):
 *   layer1: conv 3->24 3x3 + ReLU   output [32, 24, 64, 64] (12.6 MB)
 *   layer2: conv 24->48 3x3 + ReLU  output [32, 48, 32, 32] ( 6.3 MB)
 *   layer3: conv 48->64 3x3 + ReLU  output [32, 64, 32, 32] ( 8.4 MB)
 *   fc1: dense 64*8*8 -> 768 after a pooling (one large layer: 3.1 M
 *        weights, 12.6 MB)
 *   fc2: dense 768 -> 10
 * Each TRAIN step saves, as the hook names them, every weight and bias
 * (`CNN_layer1.0.weight`, `CNN_fc1.bias`, ...), every gradient
 * (`gradient/CNN_...`), the three ReLU outputs (`layer1.relu_output_0`
 * ...) and the loss (`CrossEntropyLoss_output_0`); after every EVAL_EVERY
 * (default 10) TRAIN steps comes an EVAL pass of EVAL_STEPS (default 2)
 * steps saving the weights, biases, ReLU outputs and the loss (no
 * backward pass: no gradients).  Global steps count on across modes, as the
 * hook counts them.  About 53 MB per TRAIN step, 40 MB per EVAL step.
 *
 * Values change as in training: every weight a little each step, the
 * gradients and ReLU outputs are those of a new batch (ReLU outputs
 * max(0, x) with x uniform, a fifth of each layer's channels mostly
 * inactive, as a real network has some), so the rules read everything
 * and the default thresholds do not fire.  Prints the
 * bytes of tensor data written. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "writer/writer.h"

static void die(const char *what, const smr_error *e) {
  fprintf(stderr, "cnn_gen: %s: %s\n", what, e ? e->msg : "");
  exit(1);
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint64_t next_u64(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Uniform in [-scale, scale). */
static float next_float(float scale) {
  return (float)(((double)(next_u64() >> 11) / 9007199254740992.0 - 0.5) * 2.0 *
                 scale);
}

typedef struct tensor {
  char name[64];
  int ndim;
  int64_t shape[4];
  int64_t count;
  float *v;
} tensor;

static tensor *make(const char *name, int ndim, const int64_t *shape,
                    float scale) {
  tensor *t = calloc(1, sizeof *t);
  if (!t)
    die("out of memory", NULL);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = ndim;
  t->count = 1;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->count *= shape[i];
  }
  t->v = malloc((size_t)t->count * sizeof *t->v);
  if (!t->v)
    die("out of memory", NULL);
  for (int64_t i = 0; i < t->count; i++)
    t->v[i] = next_float(scale);
  return t;
}

/* A ReLU output [B, C, H, W] of a new batch: max(0, x) with x uniform;
 * channels c % 5 == 0 are active in about one sample in 200 (below
 * DeadRelu's default 1 %). */
static void fill_relu(tensor *t) {
  int64_t c = t->shape[1], plane = t->shape[2] * t->shape[3];
  for (int64_t i = 0; i < t->count; i++) {
    int64_t ch = (i / plane) % c;
    float v = next_float(1.0f);
    bool weak = ch % 5 == 0 && next_u64() % 200 != 0;
    t->v[i] = v < 0 || weak ? 0 : v;
  }
}

static tensor *make_relu(const char *name, int64_t b, int64_t c, int64_t h,
                         int64_t w) {
  int64_t shape[4] = {b, c, h, w};
  tensor *t = make(name, 4, shape, 1.0f);
  fill_relu(t);
  return t;
}

/* One step of training: every weight moves a little (a relative change
 * of about 1e-3, far beyond allclose's default tolerance), the gradients
 * are those of a new batch. */
static void train_step(tensor *weight, tensor *grad) {
  for (int64_t i = 0; i < weight->count; i++) {
    float g = next_float(1e-3f);
    grad->v[i] = g;
    weight->v[i] -= 0.05f * g;
  }
}

static double bytes_written;

static void put(smr_writer *w, const tensor *t, int64_t step) {
  smr_error err;
  if (smr_writer_tensor(w, t->name, SMR_DT_FLOAT, t->ndim, t->shape, t->v,
                        (size_t)t->count * sizeof(float), 1e9 + step, &err))
    die(t->name, &err);
  bytes_written += (double)t->count * sizeof(float);
}

static void write_collections(smr_writer *w) {
  static char *weight_re[1] = {"^CNN_.*weight$"};
  static char *bias_re[1] = {"^CNN_.*bias$"};
  static char *grad_re[1] = {"^gradient/"};
  static char *loss_re[1] = {"[Ll]oss_output"};
  static char *relu_re[1] = {".*relu_output"};
  smr_collection items[5] = {
      {.name = "weights", .include_regex = weight_re, .n_include_regex = 1},
      {.name = "biases", .include_regex = bias_re, .n_include_regex = 1},
      {.name = "gradients", .include_regex = grad_re, .n_include_regex = 1},
      {.name = "losses", .include_regex = loss_re, .n_include_regex = 1},
      {.name = "relu_output", .include_regex = relu_re, .n_include_regex = 1},
  };
  smr_collections c = {.items = items, .n = 5, .num_workers = 1};
  smr_error err;
  if (smr_writer_collections(w, &c, &err))
    die("collections", &err);
}

enum { NPARAM = 10, NRELU = 3 };

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: cnn_gen DIR TRAIN_STEPS [EVAL_EVERY [EVAL_STEPS]]\n");
    return 2;
  }
  const char *dir = argv[1];
  int64_t train = atoll(argv[2]);
  int64_t every = argc > 3 ? atoll(argv[3]) : 10;
  int64_t evals = argc > 4 ? atoll(argv[4]) : 2;
  if (train < 1 || every < 1 || evals < 0)
    return 2;
  static const struct {
    const char *name;
    int ndim;
    int64_t shape[4];
  } params[NPARAM] = {
      {"layer1.0.weight", 4, {24, 3, 3, 3}},  {"layer1.0.bias", 1, {24}},
      {"layer2.0.weight", 4, {48, 24, 3, 3}}, {"layer2.0.bias", 1, {48}},
      {"layer3.0.weight", 4, {64, 48, 3, 3}}, {"layer3.0.bias", 1, {64}},
      {"fc1.weight", 2, {768, 64 * 8 * 8}},   {"fc1.bias", 1, {768}},
      {"fc2.weight", 2, {10, 768}},           {"fc2.bias", 1, {10}},
  };
  tensor *weight[NPARAM], *grad[NPARAM], *relu[NRELU];
  for (int i = 0; i < NPARAM; i++) {
    char name[64];
    snprintf(name, sizeof name, "CNN_%s", params[i].name);
    weight[i] = make(name, params[i].ndim, params[i].shape, 0.05f);
    snprintf(name, sizeof name, "gradient/CNN_%s", params[i].name);
    grad[i] = make(name, params[i].ndim, params[i].shape, 1e-3f);
  }
  relu[0] = make_relu("layer1.relu_output_0", 32, 24, 64, 64);
  relu[1] = make_relu("layer2.relu_output_0", 32, 48, 32, 32);
  relu[2] = make_relu("layer3.relu_output_0", 32, 64, 32, 32);

  smr_writer *w;
  smr_error err;
  if (smr_writer_open(dir, "worker_0", 0, &w, &err))
    die("open", &err);
  write_collections(w);
  int64_t step = 0, eval_step = 0;
  for (int64_t s = 0; s < train; s++) {
    if (smr_writer_step_begin(w, step, SMR_MODE_TRAIN, s, &err))
      die("step_begin", &err);
    for (int i = 0; i < NRELU; i++) {
      fill_relu(relu[i]);
      put(w, relu[i], step);
    }
    float loss = 2.3f / (float)(s + 1) + 0.05f;
    tensor l = {.name = "CrossEntropyLoss_output_0", .count = 1, .v = &loss};
    put(w, &l, step);
    for (int i = 0; i < NPARAM; i++) {
      train_step(weight[i], grad[i]);
      put(w, weight[i], step);
      put(w, grad[i], step);
    }
    if (smr_writer_step_end(w, &err))
      die("step_end", &err);
    step++;
    for (int64_t e = 0; (s + 1) % every == 0 && e < evals; e++) {
      if (smr_writer_step_begin(w, step, SMR_MODE_EVAL, eval_step++, &err))
        die("step_begin", &err);
      for (int i = 0; i < NRELU; i++) {
        fill_relu(relu[i]);
        put(w, relu[i], step);
      }
      float eloss = loss * 1.1f;
      tensor el = {
          .name = "CrossEntropyLoss_output_0", .count = 1, .v = &eloss};
      put(w, &el, step);
      for (int i = 0; i < NPARAM; i++)
        put(w, weight[i], step);
      if (smr_writer_step_end(w, &err))
        die("step_end", &err);
      step++;
    }
  }
  if (smr_writer_close(w, &err))
    die("close", &err);
  if (smr_write_end_marker(dir, &err))
    die("end marker", &err);
  for (int i = 0; i < NPARAM; i++) {
    free(weight[i]->v);
    free(weight[i]);
    free(grad[i]->v);
    free(grad[i]);
  }
  for (int i = 0; i < NRELU; i++) {
    free(relu[i]->v);
    free(relu[i]);
  }
  printf("%.0f\n", bytes_written);
  return 0;
}
