/* event.h - decoding of the Event/Summary/TensorProto messages
 * that smdebug writes, one tensor per record
 * (docs/formats.md#inside-a-record-the-event-message,
 * docs/formats.md#data-types). Uses protobuf-c with the messages declared in
 * core/format/proto/.  Encoding is the writer's (writer/event_encode.h). */
#ifndef SMR_EVENT_H
#define SMR_EVENT_H

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

#endif
