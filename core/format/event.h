/* event.h - decoding of the Event/Summary/TensorProto messages
 * that smdebug writes, one tensor per record
 * (docs/formats.md#inside-a-record-the-event-message,
 * docs/formats.md#data-types). Uses protobuf-c with the messages declared in
 * core/format/proto/.  Encoding is the writer's (writer/event_encode.h). */
#ifndef SMR_EVENT_H
#define SMR_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/tensor.h"

/* Decode one Event payload into `out` (a tensor view that owns the decoded
 * message; release with smr_tensor_release).  The tensor's name is
 * returned in *name (malloc'ed; may be NULL if the caller passes NULL).
 * Every problem is SMR_ERR_FORMAT with `file`/`offset` (of the record) and
 * a message saying what was expected: not a protobuf, wrong wire type for a
 * needed field, no summary value, a value that is not a tensor, unknown or
 * unsupported dtype, tensor_content size not matching shape x element size,
 * string count not matching the shape, negative dimension, too many dims. */
int smr_event_decode(const uint8_t *payload, size_t len, const char *file,
                     uint64_t offset, smr_tensor *out, char **name,
                     smr_error *err);

/* The same, but the elements are not copied: when the payload holds them
 * as one tensor_content (as smdebug writes), out->data points into
 * `payload` itself, which must stay valid and unchanged until
 * smr_tensor_release(out).  Such data has the payload's alignment (any):
 * read elements with memcpy or smr_tensor_get.  Results are identical to
 * smr_event_decode's. */
int smr_event_decode_borrow(const uint8_t *payload, size_t len,
                            const char *file, uint64_t offset, smr_tensor *out,
                            char **name, smr_error *err);

/* Decoding from a record's first bytes without reading the rest of its
 * elements (docs/formats.md#reading-the-first-elements).  A payload of
 * payload_len bytes whose first n bytes are `head`: true when the path to
 * its tensor_content (Event.summary, the first Summary.value, Value.tensor,
 * tensor_content) is found in the head with the field's bytes starting by
 * head byte n at the latest: *data_at where they start, *data_len their
 * count (> 0). */
bool smr_event_head_locate(const uint8_t *head, size_t n, uint64_t payload_len,
                           uint64_t *data_at, uint64_t *data_len);
/* The tensor of that payload from its head and its tail (the tail_len
 * bytes after the tensor_content, to the payload's end): SMR_OK only when
 * smr_event_decode_borrow of the whole payload would succeed with the same
 * tensor and name; out->count is then the number of whole elements the
 * head holds (at most the value's; the shape is the value's) and out->data
 * a copy of them.  Any other answer (strings, typed *_val fields, another
 * layout, a damaged message) means: decode the whole payload instead. */
int smr_event_decode_head(const uint8_t *head, size_t n, const uint8_t *tail,
                          size_t tail_len, uint64_t payload_len,
                          const char *file, uint64_t offset, smr_tensor *out,
                          char **name, smr_error *err);

#endif
