/* writer.h - writes smdebug-compatible trials (docs/formats.md): event
 * files of TFRecord-framed Events, index files, collections files and the
 * end-of-training marker.  Every file is written as <name>.tmp and renamed
 * when complete, as smdebug does, so a live reader never sees half a file.
 * Records are streamed to disk as they are added: memory stays bounded by
 * the largest single tensor. */
#ifndef SMR_WRITER_H
#define SMR_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/index.h"
#include "format/tensor.h"

typedef struct smr_writer smr_writer;

/* Open a writer for one worker ("worker_0") of the trial in `trial_dir`
 * (created if missing).  `real_crc` != 0 writes the true masked CRC32C of
 * each payload instead of smdebug's constant footer. */
int smr_writer_open(const char *trial_dir, const char *worker, int real_crc,
                    smr_writer **out, smr_error *err);

/* Start global step `step` in `mode` (SMR_MODE_*) with its mode step. */
int smr_writer_step_begin(smr_writer *w, int64_t step, int mode,
                          int64_t mode_step, smr_error *err);
/* Add a numeric/bool tensor: `nbytes` raw LE bytes of `dtype` elements in C
 * order, matching the shape.  wall_time in seconds since the epoch. */
int smr_writer_tensor(smr_writer *w, const char *name, int dtype, int ndim,
                      const int64_t *shape, const void *data, size_t nbytes,
                      double wall_time, smr_error *err);
/* Add a 1-D string tensor of n UTF-8 strings (stored as smdebug does). */
int smr_writer_strings(smr_writer *w, const char *name, size_t n,
                       const char *const *strs, double wall_time,
                       smr_error *err);
/* Record only the shape of a tensor (index shape_payload). */
int smr_writer_shape(smr_writer *w, const char *name, int ndim,
                     const int64_t *shape, smr_error *err);
/* Close the step: the event file is completed and renamed first, then the
 * index file is written and renamed (the order smdebug uses). */
int smr_writer_step_end(smr_writer *w, smr_error *err);

/* Write collections/000000000/<worker>_collections.json. */
int smr_writer_collections(smr_writer *w, const smr_collections *c,
                           smr_error *err);
/* Write the collections file from JSON text kept as given (smdebug's
 * whole file, save_config included), after checking that
 * smr_collections_parse reads it: a file this library would refuse is not
 * written. */
int smr_writer_collections_json(smr_writer *w, const char *json, size_t len,
                                smr_error *err);
/* Finish (ends an open step) and free.  Does not write the end marker. */
int smr_writer_close(smr_writer *w, smr_error *err);
/* Create <trial_dir>/training_job_end.ts. */
int smr_write_end_marker(const char *trial_dir, smr_error *err);

/* With `on`, the large pieces of a step's records (tensors' contents of 64
 * KiB and more) wait in the caller's memory beside the buffered small ones
 * and go to the event file together, in writev() calls of up to 1 MiB (as
 * every write of the event files), instead of one writev() per large
 * tensor.  The
 * caller must then leave every tensor's data in place and unchanged until
 * smr_writer_flush, the step's end or smr_writer_close has returned.  A
 * write that fails while pieces were held is reported by the call that
 * wrote them (a later tensor, the flush or the step's end), and the step is
 * discarded as with any failed write.  Turning it off writes what is held. */
void smr_writer_hold_pieces(smr_writer *w, int on);
/* Write the pieces held so far (nothing to do without hold_pieces). */
int smr_writer_flush(smr_writer *w, smr_error *err);
/* The write() and writev() calls made to event files so far. */
uint64_t smr_writer_event_writes(const smr_writer *w);

#endif
