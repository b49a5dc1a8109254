/* event_encode.h - a tensor as smdebug's Event record: the inverse of
 * format/event.h, for the writer (writer.h) and the tests. */
#ifndef SMR_EVENT_ENCODE_H
#define SMR_EVENT_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/tensor.h"

/* Encode a tensor the way smdebug does (fields in number order, metadata
 * entries mode_step then mode).  `t` supplies dtype, shape, data/strings,
 * step (global), wall_time, mode and mode_step.  *out is malloc'ed. */
int smr_event_encode(const smr_tensor *t, const char *name, uint8_t **out,
                     size_t *len, smr_error *err);

/* The same bytes handed over in order, in pieces, without a copy of the
 * tensor: protobuf-c appends a bytes field's data with one call that points
 * into the caller's memory, so a numeric tensor's content arrives as one
 * piece pointing into t->data, and everything around it (names, shape,
 * metadata) in small pieces valid only during the call.  begin() is called
 * first with the total length (a record's header needs it); a non-zero
 * return stops the encoding and is returned.  piece() cannot fail: a sink
 * that fails keeps its error and ignores later pieces. */
typedef struct smr_event_sink {
  int (*begin)(struct smr_event_sink *sink, size_t len, smr_error *err);
  void (*piece)(struct smr_event_sink *sink, const uint8_t *data, size_t len);
} smr_event_sink;
int smr_event_encode_to(const smr_tensor *t, const char *name,
                        smr_event_sink *sink, smr_error *err);

#endif
