/* fuzz_tensorboard.c - libFuzzer target for the TensorBoard event path
 * (docs/tensorboard.md): the input becomes an event file in a folder of
 * its own, which is read as a TensorBoard trial (trial/tb_trial.c: chunks,
 * TFRecord framing, the Event/Summary wire walk of format/tb_event.c, the
 * model); then every tensor's entries and values are asked for, with the
 * step rows and the collections.  The first byte is not file content: it
 * chooses whether a cut end is waited for (a live trial) and where the rest
 * is cut in two, read in two refreshes as a file that grows. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/mode.h"
#include "source/source.h"
#include "trial/catalog.h"
#include "trial/tb_trial.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char path[128];

static void write_file(const uint8_t *p, size_t n, bool append) {
  int fd = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0600);
  if (fd < 0)
    abort();
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0)
      abort();
    p += w;
    n -= (size_t)w;
  }
  close(fd);
}

/* Each entry of a tensor is found again by its global step and by its
 * (mode, step), as that one entry. */
static void query_entry(smr_tb *tb, const char *name, const smr_entry *x) {
  smr_entries one;
  if (smr_tb_entries(tb, name, SMR_MODE_GLOBAL, x->step, &one) != SMR_OK ||
      one.n != 1 || one.v[0].mode != x->mode ||
      one.v[0].mode_step != x->mode_step)
    abort();
  smr_entries_free(&one);
  if (x->mode == SMR_MODE_GLOBAL) /* a step of GLOBAL is a global step */
    return;
  if (smr_tb_entries(tb, name, x->mode, x->mode_step, &one) != SMR_OK ||
      one.n != 1 || one.v[0].step != x->step)
    abort();
  smr_entries_free(&one);
}

static void query(smr_tb *tb) {
  smr_strv names = {0};
  smr_tb_tensor_names(tb, &names);
  for (size_t i = 0; i < names.n; i++) {
    smr_entries es;
    if (smr_tb_entries(tb, names.v[i], 0, -1, &es) != SMR_OK)
      abort(); /* a name the model gave */
    for (size_t k = 0; k < es.n; k++) {
      smr_tensor t;
      smr_error e;
      if (smr_tb_read_value(tb, &es.v[k], &t, &e) != SMR_OK || t.count != 1)
        abort(); /* an entry without its value */
      smr_tensor_release(&t);
      if (k < 64)
        query_entry(tb, names.v[i], &es.v[k]);
    }
    smr_entries_free(&es);
  }
  smr_strv_free(&names);
  smr_step_row *rows;
  size_t n;
  smr_tb_step_rows(tb, &rows, &n);
  for (size_t k = 0; k < n; k++)
    if (rows[k].step != (int64_t)k)
      abort(); /* one row per global step, in order */
  smr_step_rows_free(rows, n);
  smr_collections c = {0};
  smr_tb_collections(tb, &c);
  smr_collections_free(&c);
}

static void count_problem(void *ctx, const char *file, int64_t offset,
                          const char *message) {
  (*(size_t *)ctx)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    strcpy(dir, "/tmp/fuzz-tb-XXXXXX");
    if (!mkdtemp(dir))
      abort();
    snprintf(path, sizeof path, "%s/events.out.tfevents.1.fuzz", dir);
  }
  if (!size)
    return 0;
  bool waiting = data[0] & 1;
  size_t cut = (size_t)data[0] * (size - 1) / 256;
  data++;
  size--;
  write_file(data, cut, false);
  smr_source *src;
  smr_error err;
  if (smr_source_local_open(dir, &src, &err) != SMR_OK)
    abort();
  smr_tb *tb;
  if (smr_tb_new(NULL, &tb, &err) != SMR_OK)
    abort();
  size_t added;
  bool reset;
  smr_tb_sync(tb, src, waiting, &added, &reset, &err);
  query(tb);
  write_file(data + cut, size - cut, true);
  smr_tb_sync(tb, src, false, &added, &reset, &err);
  query(tb);
  size_t problems = 0;
  smr_tb_problems(tb, count_problem, &problems);
  smr_tb_free(tb);
  smr_source_close(src);
  return 0;
}
