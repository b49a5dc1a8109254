/* tb_event.h - the scalars of a TensorBoard event record
 * (docs/tensorboard.md#the-bytes).
 *
 * A TensorBoard event file is TFRecord framing (format/record.h) around
 * Event messages: Event{wall_time = 1, step = 2, file_version = 3,
 * summary = 5, ...}, Summary{repeated Value value = 1},
 * Value{tag = 1, simple_value = 2, histo = 5, image = 4, audio = 6,
 * tensor = 8, metadata = 9}, SummaryMetadata{plugin_data = 1} with
 * PluginData{plugin_name = 1, content = 2}.  A scalar is either a
 * `simple_value` (float32) or a rank-0 `tensor` under the "scalars"
 * plugin holding DT_FLOAT (float_val or 4 bytes of tensor_content) or
 * DT_DOUBLE (double_val or 8 bytes of tensor_content).
 *
 * This is a hand-written protobuf wire walk, not protobuf-c: it allocates
 * nothing and points into the payload, so a million scalars decode in a
 * few tens of milliseconds, and a damaged record gets a message naming
 * the field.  It knows nothing about files, modes or tags' meanings. */
#ifndef SMR_TB_EVENT_H
#define SMR_TB_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* What one Summary.Value holds. */
enum {
  SMR_TB_SCALAR = 1, /* a scalar: value/dtype are set */
  SMR_TB_OTHER = 2,  /* histogram, image, audio, another plugin: skipped */
  SMR_TB_BAD = 3     /* under the scalars plugin but not a scalar: `why` */
};

typedef struct smr_tb_event {
  double wall_time;
  int64_t step;
  bool file_version; /* the first record of a file: no summary */
  size_t nvalues;    /* Summary.Value count */
} smr_tb_event;

typedef struct smr_tb_value {
  const char *tag; /* points into the payload, not NUL-terminated */
  size_t tag_len;
  int kind;      /* SMR_TB_* */
  bool tensor;   /* the value was a TensorProto (else simple_value, ...) */
  bool plugin;   /* metadata names a plugin (scalars or another) */
  int dtype;     /* SMR_DT_FLOAT or SMR_DT_DOUBLE for scalars */
  double value;  /* exact: a float32 widened, or the double */
  char why[160]; /* SMR_TB_BAD: what was found instead of a scalar */
} smr_tb_value;

/* Called for each Summary.Value of the event, in record order.  A value
 * whose tensor has no metadata (TensorFlow 1's writer keeps the metadata
 * only on a tag's first value) comes as SMR_TB_OTHER with tensor = true,
 * plugin = false, and, when its tensor is a float or double scalar, its
 * value and dtype set: the caller knows whether the tag is a scalar.
 * Return non-zero to stop. */
typedef int (*smr_tb_value_fn)(void *ctx, const smr_tb_event *ev,
                               const smr_tb_value *v);

/* Decode one Event payload.  Fields may come in any order; unknown fields
 * are skipped.  SMR_ERR_FORMAT (file, offset = of the record) when the
 * bytes are not a protobuf Event: a bad varint, a length past the end, a
 * wire type that does not fit a field we read, group wire types. */
int smr_tb_event_decode(const uint8_t *payload, size_t len, const char *file,
                        uint64_t offset, smr_tb_event *ev, smr_tb_value_fn fn,
                        void *ctx, smr_error *err);

/* "events.out.tfevents.*": the name TensorBoard's writers give event
 * files (basename only). */
bool smr_tb_is_event_file(const char *basename);

#endif
