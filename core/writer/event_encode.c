/* event_encode.c - encoding a tensor as smdebug's Event record, the
 * inverse of format/event.c's decoding
 * (docs/formats.md#inside-a-record-the-event-message): only the writer and the
 * tests need it. */
#include "writer/event_encode.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/dtype.h"
#include "smdebug_event.pb-c.h"

/* Storage for the messages of one encoded event (all on the stack). */
typedef struct enc_msgs {
  Smdebug__Event ev;
  Smdebug__Summary sum;
  Smdebug__Summary__Value val;
  Smdebug__Summary__Value *valp;
  Smdebug__TensorProto tp;
  Smdebug__TensorShapeProto shape;
  Smdebug__TensorShapeProto__Dim dims[SMR_MAX_DIMS];
  Smdebug__TensorShapeProto__Dim *dimp[SMR_MAX_DIMS];
  char *dim_names[SMR_MAX_DIMS];
  Smdebug__SummaryMetadata md;
  Smdebug__SummaryMetadata__PluginData pd[2];
  Smdebug__SummaryMetadata__PluginData *pdp[2];
  char mode_step_txt[24], mode_txt[16];
  ProtobufCBinaryData *strings;
} enc_msgs;

static int enc_fail(smr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int enc_fail(smr_error *err, const char *fmt, ...) {
  char msg[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return smr_error_set(err, SMR_ERR_USAGE, NULL, -1, "%s", msg);
}

/* Element count of the caller's shape; -1 when invalid. */
static int64_t enc_count(const smr_tensor *t) {
  if (t->ndim < 0 || t->ndim > SMR_MAX_DIMS)
    return -1;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0 || __builtin_mul_overflow(n, t->shape[i], &n))
      return -1;
  return n;
}

static void enc_shape(enc_msgs *m, const smr_tensor *t, const char *name) {
  smdebug__tensor_shape_proto__init(&m->shape);
  for (int i = 0; i < t->ndim; i++) {
    smdebug__tensor_shape_proto__dim__init(&m->dims[i]);
    m->dims[i].size = t->shape[i];
    /* smdebug names each dimension "<tensor>_<size>". */
    m->dim_names[i] = smr_xasprintf("%s_%" PRId64, name, t->shape[i]);
    m->dims[i].name = m->dim_names[i];
    m->dimp[i] = &m->dims[i];
  }
  m->shape.n_dim = (size_t)t->ndim;
  m->shape.dim = t->ndim ? m->dimp : NULL;
}

static int enc_strings(enc_msgs *m, const smr_tensor *t, int64_t n,
                       smr_error *err) {
  if (t->ndim != 1)
    return enc_fail(err, "string tensor must be 1-D, has %d dimensions",
                    t->ndim);
  if (n > 0 && (!t->strings || !t->string_lens))
    return enc_fail(err, "string tensor without strings");
  m->tp.dtype = SMR_DT_INVALID; /* smdebug leaves strings at DT_INVALID */
  if (n == 0)
    return SMR_OK;
  m->strings = calloc((size_t)n, sizeof *m->strings);
  if (!m->strings)
    return smr_error_set(err, SMR_ERR_NOMEM, NULL, -1, "out of memory");
  for (int64_t i = 0; i < n; i++) {
    m->strings[i].len = t->string_lens[i];
    m->strings[i].data = (uint8_t *)(uintptr_t)t->strings[i];
  }
  m->tp.n_string_val = (size_t)n;
  m->tp.string_val = m->strings;
  return SMR_OK;
}

static int enc_numeric(enc_msgs *m, const smr_tensor *t, int64_t n,
                       smr_error *err) {
  const smr_dtype_info *di = smr_dtype_info_of(t->dtype);
  if (!di || di->size == 0)
    return enc_fail(err, "cannot encode dtype %d", t->dtype);
  uint64_t want;
  if (__builtin_mul_overflow((uint64_t)n, (uint64_t)di->size, &want) ||
      want != t->nbytes)
    return enc_fail(err,
                    "tensor has %zu bytes, shape and %s need %" PRId64 " x %u",
                    t->nbytes, di->tf, n, (unsigned)di->size);
  if (t->nbytes && !t->data)
    return enc_fail(err, "tensor without data");
  m->tp.dtype = t->dtype;
  m->tp.tensor_content.len = t->nbytes;
  m->tp.tensor_content.data = (uint8_t *)(uintptr_t)t->data;
  return SMR_OK;
}

static void enc_metadata(enc_msgs *m, const smr_tensor *t) {
  snprintf(m->mode_step_txt, sizeof m->mode_step_txt, "%" PRId64, t->mode_step);
  snprintf(m->mode_txt, sizeof m->mode_txt, "%d", t->mode);
  smdebug__summary_metadata__init(&m->md);
  const char *names[2] = {"mode_step", "mode"};
  char *texts[2] = {m->mode_step_txt, m->mode_txt};
  for (int i = 0; i < 2; i++) {
    smdebug__summary_metadata__plugin_data__init(&m->pd[i]);
    m->pd[i].plugin_name = (char *)(uintptr_t)names[i];
    m->pd[i].content.data = (uint8_t *)texts[i];
    m->pd[i].content.len = strlen(texts[i]);
    m->pdp[i] = &m->pd[i];
  }
  m->md.n_plugin_data = 2;
  m->md.plugin_data = m->pdp;
}

static void enc_envelope(enc_msgs *m, const smr_tensor *t, const char *name) {
  smdebug__summary__value__init(&m->val);
  m->val.tag = (char *)(uintptr_t)name;
  m->val.value_case = SMDEBUG__SUMMARY__VALUE__VALUE_TENSOR;
  m->val.tensor = &m->tp;
  m->val.metadata = &m->md;
  m->tp.tensor_shape = &m->shape;
  smdebug__summary__init(&m->sum);
  m->valp = &m->val;
  m->sum.n_value = 1;
  m->sum.value = &m->valp;
  smdebug__event__init(&m->ev);
  m->ev.wall_time = t->wall_time;
  m->ev.step = t->step;
  m->ev.what_case = SMDEBUG__EVENT__WHAT_SUMMARY;
  m->ev.summary = &m->sum;
}

static int enc_pack(enc_msgs *m, uint8_t **out, size_t *len, smr_error *err) {
  size_t size = smdebug__event__get_packed_size(&m->ev);
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf)
    return smr_error_set(err, SMR_ERR_NOMEM, NULL, -1,
                         "out of memory for a %zu-byte event", size);
  *len = smdebug__event__pack(&m->ev, buf);
  *out = buf;
  return SMR_OK;
}

/* protobuf-c's streaming output, forwarding each append to the sink. */
typedef struct enc_stream {
  ProtobufCBuffer base; /* first: protobuf-c passes &base */
  smr_event_sink *sink;
} enc_stream;

static void enc_stream_append(ProtobufCBuffer *b, size_t len,
                              const uint8_t *data) {
  enc_stream *s = (enc_stream *)b;
  if (len)
    s->sink->piece(s->sink, data, len);
}

static int enc_stream_out(enc_msgs *m, smr_event_sink *sink, smr_error *err) {
  int rc = sink->begin(sink, smdebug__event__get_packed_size(&m->ev), err);
  if (rc)
    return rc;
  enc_stream s = {.base = {.append = enc_stream_append}, .sink = sink};
  smdebug__event__pack_to_buffer(&m->ev, &s.base);
  return SMR_OK;
}

/* Build the messages of `t` in a fresh enc_msgs; *out is NULL on error. */
static int enc_build(const smr_tensor *t, const char *name, enc_msgs **out,
                     smr_error *err) {
  *out = NULL;
  if (!name)
    return enc_fail(err, "tensor without a name");
  int64_t n = enc_count(t);
  if (n < 0)
    return enc_fail(err, "invalid shape (%d dimensions)", t->ndim);
  enc_msgs *m = smr_xcalloc(1, sizeof *m);
  smdebug__tensor_proto__init(&m->tp);
  int rc = t->dtype == SMR_DT_STRING ? enc_strings(m, t, n, err)
                                     : enc_numeric(m, t, n, err);
  if (rc == SMR_OK) {
    enc_shape(m, t, name);
    enc_metadata(m, t);
    enc_envelope(m, t, name);
  }
  *out = m;
  return rc;
}

static void enc_free(enc_msgs *m) {
  for (int i = 0; i < SMR_MAX_DIMS; i++)
    free(m->dim_names[i]);
  free(m->strings);
  free(m);
}

int smr_event_encode(const smr_tensor *t, const char *name, uint8_t **out,
                     size_t *len, smr_error *err) {
  *out = NULL;
  *len = 0;
  enc_msgs *m;
  int rc = enc_build(t, name, &m, err);
  if (rc == SMR_OK)
    rc = enc_pack(m, out, len, err);
  if (m)
    enc_free(m);
  return rc;
}

int smr_event_encode_to(const smr_tensor *t, const char *name,
                        smr_event_sink *sink, smr_error *err) {
  enc_msgs *m;
  int rc = enc_build(t, name, &m, err);
  if (rc == SMR_OK)
    rc = enc_stream_out(m, sink, err);
  if (m)
    enc_free(m);
  return rc;
}
