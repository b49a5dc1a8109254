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

#endif
