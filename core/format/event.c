/* event.c - decoding of smdebug's Event records (see
 * docs/formats.md#inside-a-record-the-event-message,
 * docs/formats.md#data-types).
 *
 * Decoding is two passes over the payload: a small wire-format walk that
 * checks the wire type of every field we declare (so a damaged record gets a
 * message naming the field, which protobuf-c's unpack cannot give), then
 * protobuf_c_message_unpack.  The decoded tensor points into the unpacked
 * message (tensor_content, string_val) or into a buffer built here from the
 * typed *_val fields; the tensor owns both until smr_tensor_release.
 * smr_event_decode_borrow unpacks the payload without its tensor_content
 * (protobuf-c would copy it) and points at the elements in the payload. */
#include "format/event.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/dtype.h"
#include "smdebug_event.pb-c.h"

/* A single typed value may be repeated to fill the shape (TensorFlow's
 * "version 0" rule).  That is the one place where the output size is not
 * bounded by the input size, so it gets a fixed cap. */
#define MAX_BROADCAST_BYTES ((size_t)16 << 20)

enum { MODE_GLOBAL = 4 };

/* ---- wire-format pre-validation ----------------------------------------- */

enum wire_type { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* What a declared field accepts.  PACK_* are repeated scalars: the scalar
 * wire type (unpacked) or length-delimited (packed). */
enum field_kind {
  K_VARINT,
  K_I64,
  K_I32,
  K_LEN,
  K_MSG,
  K_PACK_VARINT,
  K_PACK_I64,
  K_PACK_I32
};

typedef struct msg_schema msg_schema;
typedef struct field_rule {
  uint32_t num;
  unsigned char kind;
  const char *name;
  const msg_schema *sub; /* K_MSG only */
} field_rule;
struct msg_schema {
  const char *name;
  const field_rule *fields;
  size_t n;
};
#define SCHEMA(var, label, rules)                                              \
  static const msg_schema var = {label, rules, sizeof rules / sizeof rules[0]}

/* Mirrors core/format/proto/smdebug_event.proto; keep the two in step. */
static const field_rule dim_rules[] = {{1, K_VARINT, "size", NULL},
                                       {2, K_LEN, "name", NULL}};
SCHEMA(dim_schema, "TensorShapeProto.Dim", dim_rules);

static const field_rule shape_rules[] = {{2, K_MSG, "dim", &dim_schema},
                                         {3, K_VARINT, "unknown_rank", NULL}};
SCHEMA(shape_schema, "TensorShapeProto", shape_rules);

static const field_rule tensor_rules[] = {
    {1, K_VARINT, "dtype", NULL},
    {2, K_MSG, "tensor_shape", &shape_schema},
    {3, K_VARINT, "version_number", NULL},
    {4, K_LEN, "tensor_content", NULL},
    {5, K_PACK_I32, "float_val", NULL},
    {6, K_PACK_I64, "double_val", NULL},
    {7, K_PACK_VARINT, "int_val", NULL},
    {8, K_LEN, "string_val", NULL},
    {9, K_PACK_I32, "scomplex_val", NULL},
    {10, K_PACK_VARINT, "int64_val", NULL},
    {11, K_PACK_VARINT, "bool_val", NULL},
    {12, K_PACK_I64, "dcomplex_val", NULL},
    {13, K_PACK_VARINT, "half_val", NULL},
    {14, K_LEN, "resource_handle_val", NULL},
};
SCHEMA(tensor_schema, "TensorProto", tensor_rules);

static const field_rule plugin_rules[] = {{1, K_LEN, "plugin_name", NULL},
                                          {2, K_LEN, "content", NULL}};
SCHEMA(plugin_schema, "SummaryMetadata.PluginData", plugin_rules);

static const field_rule metadata_rules[] = {
    {1, K_MSG, "plugin_data", &plugin_schema}};
SCHEMA(metadata_schema, "SummaryMetadata", metadata_rules);

static const field_rule value_rules[] = {
    {1, K_LEN, "tag", NULL},
    {2, K_I32, "simple_value", NULL},
    {3, K_LEN, "obsolete_old_style_histogram", NULL},
    {4, K_LEN, "image", NULL},
    {5, K_LEN, "histo", NULL},
    {6, K_LEN, "audio", NULL},
    {7, K_LEN, "node_name", NULL},
    {8, K_MSG, "tensor", &tensor_schema},
    {9, K_MSG, "metadata", &metadata_schema},
};
SCHEMA(value_schema, "Summary.Value", value_rules);

static const field_rule summary_rules[] = {{1, K_MSG, "value", &value_schema}};
SCHEMA(summary_schema, "Summary", summary_rules);

static const field_rule event_rules[] = {
    {1, K_I64, "wall_time", NULL},
    {2, K_VARINT, "step", NULL},
    {3, K_LEN, "file_version", NULL},
    {4, K_LEN, "graph_def", NULL},
    {5, K_MSG, "summary", &summary_schema},
    {6, K_LEN, "log_message", NULL},
    {7, K_LEN, "session_log", NULL},
    {8, K_LEN, "tagged_run_metadata", NULL},
    {9, K_LEN, "meta_graph_def", NULL},
};
SCHEMA(event_schema, "Event", event_rules);

/* Where the walk is: the payload start (to report byte positions) and the
 * error destination. */
typedef struct wire_ctx {
  const uint8_t *start;
  const char *file;
  uint64_t offset;
  smr_error *err;
} wire_ctx;

static const char *wire_name(unsigned wt) {
  switch (wt) {
  case WT_VARINT:
    return "varint";
  case WT_I64:
    return "64-bit";
  case WT_LEN:
    return "length-delimited";
  case WT_I32:
    return "32-bit";
  case 3:
    return "start-group";
  case 4:
    return "end-group";
  default:
    return "invalid";
  }
}

static const char *kind_expectation(unsigned kind) {
  switch (kind) {
  case K_VARINT:
    return "varint";
  case K_I64:
    return "64-bit";
  case K_I32:
    return "32-bit";
  case K_PACK_VARINT:
    return "varint or length-delimited (packed)";
  case K_PACK_I64:
    return "64-bit or length-delimited (packed)";
  case K_PACK_I32:
    return "32-bit or length-delimited (packed)";
  default:
    return "length-delimited";
  }
}

static int wire_fail(const wire_ctx *c, const uint8_t *at, const char *what) {
  return smr_error_set(c->err, SMR_ERR_FORMAT, c->file, (int64_t)c->offset,
                       "not a valid Event protobuf: %s at payload byte %td",
                       what, at - c->start);
}

/* Reads a varint of at most 10 bytes; returns the byte count, 0 if it is
 * truncated or too long. */
static size_t read_varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (size_t i = 0; i < 10 && p + i < end; i++) {
    r |= (uint64_t)(p[i] & 0x7F) << (7 * i);
    if (!(p[i] & 0x80)) {
      *v = r;
      return i + 1;
    }
  }
  return 0;
}

static const field_rule *find_rule(const msg_schema *s, uint64_t num) {
  for (size_t i = 0; i < s->n; i++)
    if (s->fields[i].num == num)
      return &s->fields[i];
  return NULL;
}

static bool kind_accepts(unsigned kind, unsigned wt) {
  switch (kind) {
  case K_VARINT:
    return wt == WT_VARINT;
  case K_I64:
    return wt == WT_I64;
  case K_I32:
    return wt == WT_I32;
  case K_PACK_VARINT:
    return wt == WT_VARINT || wt == WT_LEN;
  case K_PACK_I64:
    return wt == WT_I64 || wt == WT_LEN;
  case K_PACK_I32:
    return wt == WT_I32 || wt == WT_LEN;
  default:
    return wt == WT_LEN;
  }
}

/* A packed run must hold whole values. */
static int check_packed(const wire_ctx *c, const field_rule *r,
                        const msg_schema *s, const uint8_t *p, size_t n) {
  size_t unit = r->kind == K_PACK_I32 ? 4 : r->kind == K_PACK_I64 ? 8 : 0;
  char what[160];
  if (unit && n % unit) {
    snprintf(what, sizeof what,
             "packed %s.%s holds %zu bytes, not a multiple of %zu", s->name,
             r->name, n, unit);
    return wire_fail(c, p, what);
  }
  const uint8_t *end = p + n;
  while (!unit && p < end) {
    uint64_t v;
    size_t k = read_varint(p, end, &v);
    if (!k) {
      snprintf(what, sizeof what, "packed %s.%s ends inside a varint", s->name,
               r->name);
      return wire_fail(c, p, what);
    }
    p += k;
  }
  return SMR_OK;
}

static int walk_message(const wire_ctx *c, const msg_schema *s,
                        const uint8_t *p, const uint8_t *end);

/* Checks one length-delimited value of a declared field. */
static int check_len_field(const wire_ctx *c, const field_rule *r,
                           const msg_schema *s, const uint8_t *p, size_t n) {
  if (r->kind == K_MSG)
    return walk_message(c, r->sub, p, p + n);
  if (r->kind >= K_PACK_VARINT)
    return check_packed(c, r, s, p, n);
  return SMR_OK;
}

/* Skips the value of a field of wire type `wt` at *pp. */
static int skip_value(const wire_ctx *c, unsigned wt, const uint8_t **pp,
                      const uint8_t *end, size_t *len_out) {
  const uint8_t *p = *pp;
  uint64_t v;
  size_t k;
  switch (wt) {
  case WT_VARINT:
    if (!(k = read_varint(p, end, &v)))
      return wire_fail(c, p, "truncated or overlong varint");
    *pp = p + k;
    return SMR_OK;
  case WT_I64:
  case WT_I32:
    k = wt == WT_I64 ? 8 : 4;
    if ((size_t)(end - p) < k)
      return wire_fail(c, p, "truncated fixed-width value");
    *pp = p + k;
    return SMR_OK;
  case WT_LEN:
    if (!(k = read_varint(p, end, &v)))
      return wire_fail(c, p, "truncated length prefix");
    if (v > (uint64_t)(end - p - (ptrdiff_t)k))
      return wire_fail(c, p, "length-delimited field runs past its message");
    *len_out = (size_t)v;
    *pp = p + k;
    return SMR_OK;
  default:
    return wire_fail(c, p,
                     wt == 3 || wt == 4 ? "group wire type (not used by this "
                                          "format)"
                                        : "invalid wire type 6/7");
  }
}

static int walk_field(const wire_ctx *c, const msg_schema *s,
                      const uint8_t **pp, const uint8_t *end) {
  const uint8_t *key_at = *pp;
  uint64_t key;
  size_t k = read_varint(key_at, end, &key);
  if (!k || k > 5 || key > UINT32_MAX || (key >> 3) == 0)
    return wire_fail(c, key_at, "malformed field key");
  unsigned wt = (unsigned)(key & 7);
  const field_rule *r = find_rule(s, key >> 3);
  if (r && !kind_accepts(r->kind, wt))
    return smr_error_set(c->err, SMR_ERR_FORMAT, c->file, (int64_t)c->offset,
                         "wrong wire type for field %u (%s.%s): expected %s, "
                         "found %s (payload byte %td)",
                         (unsigned)r->num, s->name, r->name,
                         kind_expectation(r->kind), wire_name(wt),
                         key_at - c->start);
  const uint8_t *p = key_at + k;
  size_t len = 0;
  int rc = skip_value(c, wt, &p, end, &len);
  if (rc != SMR_OK)
    return rc;
  if (wt == WT_LEN) {
    if (r && (rc = check_len_field(c, r, s, p, len)) != SMR_OK)
      return rc;
    p += len;
  }
  *pp = p;
  return SMR_OK;
}

/* Recursion depth is bounded by the schema (Event -> ... -> Dim: 6). */
static int walk_message(const wire_ctx *c, const msg_schema *s,
                        const uint8_t *p, const uint8_t *end) {
  while (p < end) {
    int rc = walk_field(c, s, &p, end);
    if (rc != SMR_OK)
      return rc;
  }
  return SMR_OK;
}

/* ---- decoding ---------------------------------------------------------- */

/* Everything a decoded tensor keeps alive. */
typedef struct event_owner {
  Smdebug__Event *ev;
  /* a borrowed decode's tensor_content, where it lies in the caller's
   * payload (not copied into ev); len 0 when not borrowed */
  ProtobufCBinaryData content;
  uint8_t *typed;          /* values built from typed fields */
  const uint8_t **strings; /* string tensors */
  size_t *string_lens;
} event_owner;

static void owner_release(void *p) {
  event_owner *o = p;
  if (!o)
    return;
  if (o->ev)
    smdebug__event__free_unpacked(o->ev, NULL);
  free(o->typed);
  free(o->strings);
  free(o->string_lens);
  free(o);
}

/* Where decode errors go: every one is about the same record. */
typedef struct dec_ctx {
  const char *file;
  uint64_t offset;
  const char *tag;
  smr_error *err;
} dec_ctx;

static int dec_fail(const dec_ctx *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int dec_fail(const dec_ctx *d, const char *fmt, ...) {
  char msg[SMR_ERR_MSG_MAX - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (d->tag)
    return smr_error_set(d->err, SMR_ERR_FORMAT, d->file, (int64_t)d->offset,
                         "tensor '%.128s': %s", d->tag, msg);
  return smr_error_set(d->err, SMR_ERR_FORMAT, d->file, (int64_t)d->offset,
                       "%s", msg);
}

static const uint8_t empty_bytes[1];

/* Shape and element count, overflow-checked. */
static int decode_shape(const dec_ctx *d, const Smdebug__TensorProto *tp,
                        smr_tensor *t) {
  const Smdebug__TensorShapeProto *sp = tp->tensor_shape;
  t->ndim = 0;
  t->count = 1;
  if (!sp)
    return SMR_OK;
  if (sp->unknown_rank)
    return dec_fail(d, "tensor shape has unknown rank");
  if (sp->n_dim > SMR_MAX_DIMS)
    return dec_fail(d, "tensor has %zu dimensions, at most %d are supported",
                    sp->n_dim, SMR_MAX_DIMS);
  bool overflow = false, has_zero = false;
  for (size_t i = 0; i < sp->n_dim; i++) {
    int64_t size = sp->dim[i]->size;
    if (size < 0)
      return dec_fail(d, "dimension %zu has negative size %" PRId64, i, size);
    t->shape[i] = size;
    has_zero |= size == 0;
    if (!overflow && __builtin_mul_overflow(t->count, size, &t->count))
      overflow = true;
  }
  t->ndim = (int)sp->n_dim;
  /* A zero dimension makes any overflow in the others irrelevant. */
  if (has_zero)
    t->count = 0;
  else if (overflow)
    return dec_fail(d, "shape has more than 2^63 elements");
  return SMR_OK;
}

static int decode_strings(const dec_ctx *d, const Smdebug__TensorProto *tp,
                          smr_tensor *t, event_owner *o) {
  if (t->ndim != 1)
    return dec_fail(d, "string tensor has %d dimensions, expected 1", t->ndim);
  if ((uint64_t)t->count != tp->n_string_val)
    return dec_fail(d, "string tensor has %zu strings, shape says %" PRId64,
                    tp->n_string_val, t->count);
  size_t n = tp->n_string_val;
  if (n) {
    o->strings = calloc(n, sizeof *o->strings);
    o->string_lens = calloc(n, sizeof *o->string_lens);
    if (!o->strings || !o->string_lens)
      return smr_error_set(d->err, SMR_ERR_NOMEM, d->file, (int64_t)d->offset,
                           "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    const ProtobufCBinaryData *s = &tp->string_val[i];
    o->strings[i] = s->data ? s->data : empty_bytes;
    o->string_lens[i] = s->len;
  }
  t->dtype = SMR_DT_STRING;
  t->strings = o->strings;
  t->string_lens = o->string_lens;
  t->data = empty_bytes;
  t->nbytes = 0;
  return SMR_OK;
}

static int decode_content(const dec_ctx *d, const ProtobufCBinaryData *content,
                          const smr_dtype_info *di, smr_tensor *t) {
  size_t have = content->len;
  uint64_t want;
  if (__builtin_mul_overflow((uint64_t)t->count, (uint64_t)di->size, &want))
    return dec_fail(d,
                    "tensor_content has %zu bytes, expected %" PRId64
                    " elements x %u bytes (more than 2^64)",
                    have, t->count, (unsigned)di->size);
  if (want != have)
    return dec_fail(d,
                    "tensor_content has %zu bytes, expected %" PRIu64
                    " (%" PRId64 " elements x %u bytes of %s)",
                    have, want, t->count, (unsigned)di->size, di->tf);
  t->data = have ? content->data : empty_bytes;
  t->nbytes = have;
  return SMR_OK;
}

/* The typed field that holds a dtype's values: its value count and name.
 * Complex fields hold two values per element. */
static size_t typed_values(const Smdebug__TensorProto *tp, unsigned src,
                           const char **field) {
  static const char *const names[] = {
      [SMR_DF_NONE] = "(none)",           [SMR_DF_FLOAT] = "float_val",
      [SMR_DF_DOUBLE] = "double_val",     [SMR_DF_INT] = "int_val",
      [SMR_DF_INT64] = "int64_val",       [SMR_DF_BOOL] = "bool_val",
      [SMR_DF_SCOMPLEX] = "scomplex_val", [SMR_DF_DCOMPLEX] = "dcomplex_val",
      [SMR_DF_HALF] = "half_val"};
  *field = names[src];
  switch (src) {
  case SMR_DF_FLOAT:
    return tp->n_float_val;
  case SMR_DF_DOUBLE:
    return tp->n_double_val;
  case SMR_DF_INT:
    return tp->n_int_val;
  case SMR_DF_INT64:
    return tp->n_int64_val;
  case SMR_DF_BOOL:
    return tp->n_bool_val;
  case SMR_DF_SCOMPLEX:
    return tp->n_scomplex_val;
  case SMR_DF_DCOMPLEX:
    return tp->n_dcomplex_val;
  case SMR_DF_HALF:
    return tp->n_half_val;
  default:
    return 0;
  }
}

/* Bits of typed value j, to be stored in the dtype's component width. */
static uint64_t typed_bits(const Smdebug__TensorProto *tp, unsigned src,
                           size_t j) {
  uint32_t u32;
  uint64_t u64;
  switch (src) {
  case SMR_DF_FLOAT:
    memcpy(&u32, &tp->float_val[j], 4);
    return u32;
  case SMR_DF_SCOMPLEX:
    memcpy(&u32, &tp->scomplex_val[j], 4);
    return u32;
  case SMR_DF_DOUBLE:
    memcpy(&u64, &tp->double_val[j], 8);
    return u64;
  case SMR_DF_DCOMPLEX:
    memcpy(&u64, &tp->dcomplex_val[j], 8);
    return u64;
  case SMR_DF_INT:
    return (uint64_t)(int64_t)tp->int_val[j];
  case SMR_DF_INT64:
    return (uint64_t)tp->int64_val[j];
  case SMR_DF_BOOL:
    return tp->bool_val[j] ? 1 : 0;
  case SMR_DF_HALF:
    return (uint64_t)(uint32_t)tp->half_val[j] & 0xFFFF;
  default:
    return 0;
  }
}

/* Stores the low `width` bytes of `bits`, little-endian. */
static void store_le(uint8_t *dst, uint64_t bits, size_t width) {
  for (size_t i = 0; i < width; i++)
    dst[i] = (uint8_t)(bits >> (8 * i));
}

/* Elements from typed fields: as many values as elements, or one value
 * repeated (docs/formats.md#data-types Decision). */
static int decode_typed(const dec_ctx *d, const Smdebug__TensorProto *tp,
                        const smr_dtype_info *di, smr_tensor *t,
                        event_owner *o) {
  const char *field;
  size_t nvals = typed_values(tp, di->field, &field);
  size_t per =
      (di->field == SMR_DF_SCOMPLEX || di->field == SMR_DF_DCOMPLEX) ? 2 : 1;
  if (t->count == 0 && nvals == 0) {
    t->data = empty_bytes;
    t->nbytes = 0;
    return SMR_OK;
  }
  if (di->field == SMR_DF_NONE)
    return dec_fail(d,
                    "%s tensor of %" PRId64 " elements has no "
                    "tensor_content",
                    di->tf, t->count);
  if (nvals % per)
    return dec_fail(d, "%s holds %zu values, not whole complex pairs", field,
                    nvals);
  uint64_t m = nvals / per, n = (uint64_t)t->count;
  if (nvals == 0)
    return dec_fail(d,
                    "%s tensor of %" PRIu64 " elements has neither "
                    "tensor_content nor %s values",
                    di->tf, n, field);
  if (m != n && !(m == 1 && n > 1))
    return dec_fail(d, "%s holds %" PRIu64 " elements, shape needs %" PRIu64,
                    field, m, n);
  /* Without broadcast the values are already in memory, so n * size is
   * bounded by the decoded message; only repetition needs the cap. */
  if (m != n && n > MAX_BROADCAST_BYTES / di->size)
    return dec_fail(d,
                    "one %s value repeated to %" PRIu64 " elements "
                    "exceeds the %zu-byte limit",
                    field, n, MAX_BROADCAST_BYTES);
  size_t nbytes = (size_t)n * di->size, width = di->size / per;
  o->typed = malloc(nbytes);
  if (!o->typed)
    return smr_error_set(d->err, SMR_ERR_NOMEM, d->file, (int64_t)d->offset,
                         "out of memory for %zu bytes", nbytes);
  for (size_t j = 0; j < nvals; j++)
    store_le(o->typed + j * width, typed_bits(tp, di->field, j), width);
  for (size_t i = 1; m == 1 && i < n; i++)
    memcpy(o->typed + i * di->size, o->typed, di->size);
  t->data = o->typed;
  t->nbytes = nbytes;
  return SMR_OK;
}

static bool is_string_tensor(const Smdebug__TensorProto *tp,
                             const smr_tensor *t) {
  if (tp->dtype != SMR_DT_INVALID && tp->dtype != SMR_DT_STRING)
    return false;
  /* An empty 1-D string array has no string_val at all. */
  return tp->n_string_val > 0 || (t->ndim == 1 && t->count == 0);
}

static int decode_values(const dec_ctx *d, const Smdebug__TensorProto *tp,
                         smr_tensor *t, event_owner *o) {
  t->stored_dtype = tp->dtype;
  if (is_string_tensor(tp, t))
    return decode_strings(d, tp, t, o);
  const smr_dtype_info *di = smr_dtype_info_of(tp->dtype);
  if (!di || di->size == 0) {
    if (tp->dtype == SMR_DT_INVALID)
      return dec_fail(d, "dtype DT_INVALID (0) without string_val");
    return dec_fail(d, "unsupported dtype %d (%s)", tp->dtype,
                    di ? di->tf : "unknown");
  }
  t->dtype = tp->dtype;
  if (o->content.len > 0)
    return decode_content(d, &o->content, di, t);
  if (tp->tensor_content.len > 0)
    return decode_content(d, &tp->tensor_content, di, t);
  return decode_typed(d, tp, di, t, o);
}

/* Python int() of a short decimal string: blanks, sign, digits. */
static bool parse_int_text(const ProtobufCBinaryData *b, int64_t *out) {
  char buf[32];
  if (b->len == 0 || b->len >= sizeof buf)
    return false;
  memcpy(buf, b->data, b->len);
  buf[b->len] = '\0';
  const char *p = buf;
  while (isspace((unsigned char)*p))
    p++;
  const char *digits = (*p == '+' || *p == '-') ? p + 1 : p;
  if (!isdigit((unsigned char)*digits))
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(p, &end, 10);
  if (errno)
    return false;
  while (isspace((unsigned char)*end))
    end++;
  if (*end)
    return false;
  *out = v;
  return true;
}

static int decode_mode(const dec_ctx *d, const Smdebug__Summary__Value *v,
                       smr_tensor *t) {
  t->mode = MODE_GLOBAL;
  t->mode_step = t->step;
  const Smdebug__SummaryMetadata *md = v->metadata;
  for (size_t i = 0; md && i < md->n_plugin_data; i++) {
    const Smdebug__SummaryMetadata__PluginData *pd = md->plugin_data[i];
    bool is_step = strcmp(pd->plugin_name, "mode_step") == 0;
    if (!is_step && strcmp(pd->plugin_name, "mode") != 0)
      continue;
    int64_t x;
    if (!parse_int_text(&pd->content, &x))
      return dec_fail(d, "metadata %s is not a decimal integer",
                      pd->plugin_name);
    if (is_step) {
      t->mode_step = x;
    } else if (x < 1 || x > MODE_GLOBAL) {
      return dec_fail(d, "metadata mode %" PRId64 " is not 1-4", x);
    } else {
      t->mode = (int)x;
    }
  }
  return SMR_OK;
}

/* The one tensor-carrying Value of the event (F5: anything else is an
 * error for this record). */
static int find_value(const dec_ctx *d, const Smdebug__Event *ev,
                      const Smdebug__Summary__Value **out) {
  if (ev->what_case != SMDEBUG__EVENT__WHAT_SUMMARY)
    return dec_fail(d, "event has no summary");
  const Smdebug__Summary *s = ev->summary;
  if (s->n_value == 0)
    return dec_fail(d, "event summary has no value");
  const Smdebug__Summary__Value *v = s->value[0];
  if (v->value_case != SMDEBUG__SUMMARY__VALUE__VALUE_TENSOR) {
    const char *what = v->value_case == SMDEBUG__SUMMARY__VALUE__VALUE__NOT_SET
                           ? "no value"
                           : "a non-tensor value";
    return smr_error_set(d->err, SMR_ERR_FORMAT, d->file, (int64_t)d->offset,
                         "summary value '%.128s' holds %s (field %d), "
                         "expected a tensor",
                         v->tag, what, (int)v->value_case);
  }
  *out = v;
  return SMR_OK;
}

static int decode_event(const dec_ctx *dc, event_owner *o, smr_tensor *out,
                        char **name) {
  dec_ctx d = *dc;
  const Smdebug__Summary__Value *v = NULL;
  int rc = find_value(&d, o->ev, &v);
  if (rc != SMR_OK)
    return rc;
  d.tag = v->tag;
  out->step = o->ev->step;
  out->wall_time = o->ev->wall_time;
  if ((rc = decode_shape(&d, v->tensor, out)) != SMR_OK ||
      (rc = decode_values(&d, v->tensor, out, o)) != SMR_OK ||
      (rc = decode_mode(&d, v, out)) != SMR_OK)
    return rc;
  if (name)
    *name = smr_xstrdup(v->tag);
  return SMR_OK;
}

/* ---- borrowed tensor_content ------------------------------------------ */

/* The field path to the tensor_content the decoder uses:
 * Event.summary -> Summary.value (the first) -> Value.tensor ->
 * TensorProto.tensor_content. */
enum { PATH_DEPTH = 3 };
static const uint32_t content_path[PATH_DEPTH + 1] = {5, 1, 8, 4};

/* Where the tensor_content field lies in a payload, with the length
 * prefixes of the three messages that enclose it. */
typedef struct content_loc {
  const uint8_t *len_at[PATH_DEPTH]; /* length prefix of each enclosing field */
  const uint8_t *body[PATH_DEPTH];   /* its contents */
  uint64_t body_len[PATH_DEPTH];
  const uint8_t *field, *field_end; /* the tensor_content field, key to end */
  const uint8_t *data;              /* its bytes */
  size_t len;
} content_loc;

/* The length-delimited occurrences of field `num` in [p, end): how many,
 * and where the first (len_at/body/n) and the last (key/next) lie.  false
 * for a malformed message (already refused by the wire walk). */
typedef struct field_hits {
  size_t count;
  const uint8_t *len_at, *body, *key, *next;
  uint64_t n;
} field_hits;

static bool find_len_field(const uint8_t *p, const uint8_t *end, uint32_t num,
                           field_hits *h) {
  memset(h, 0, sizeof *h);
  while (p < end) {
    const uint8_t *key_at = p;
    uint64_t key, v;
    size_t k = read_varint(p, end, &key);
    if (!k)
      return false;
    p += k;
    unsigned wt = (unsigned)(key & 7);
    const uint8_t *len_at = p;
    if (wt == WT_VARINT) {
      if (!(k = read_varint(p, end, &v)))
        return false;
      p += k;
    } else if (wt == WT_I64 || wt == WT_I32) {
      k = wt == WT_I64 ? 8 : 4;
      if ((size_t)(end - p) < k)
        return false;
      p += k;
    } else if (wt == WT_LEN) {
      if (!(k = read_varint(p, end, &v)) || v > (uint64_t)(end - p) - k)
        return false;
      p += k + v;
      if ((key >> 3) == num) {
        if (h->count++ == 0) {
          h->len_at = len_at;
          h->body = len_at + k;
          h->n = v;
        }
        h->key = key_at;
        h->next = p;
      }
    } else {
      return false;
    }
  }
  return true;
}

/* Locates the tensor_content when the layout is the plain one smdebug
 * writes: one summary, one tensor in the first value, one non-empty
 * tensor_content.  Anything else (repeated sub-messages that protobuf
 * merges) is decoded by copying, as before. */
static bool locate_content(const uint8_t *payload, size_t len,
                           content_loc *loc) {
  const uint8_t *p = payload, *end = payload + len;
  for (int level = 0; level <= PATH_DEPTH; level++) {
    field_hits h;
    if (!find_len_field(p, end, content_path[level], &h) || h.count == 0)
      return false;
    if (h.count > 1 && level != 1) /* repeated Summary.value: the first */
      return false;
    if (level == PATH_DEPTH) {
      if (h.n == 0)
        return false;
      loc->field = h.key;
      loc->field_end = h.next;
      loc->data = h.body;
      loc->len = (size_t)h.n;
      return true;
    }
    loc->len_at[level] = h.len_at;
    loc->body[level] = h.body;
    loc->body_len[level] = h.n;
    p = h.body;
    end = h.body + h.n;
  }
  return false;
}

static size_t put_varint(uint8_t *out, uint64_t v) {
  size_t n = 0;
  do {
    out[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return n;
}

/* The payload without the tensor_content field, the enclosing lengths
 * shortened to match: what protobuf-c unpacks (a few hundred bytes for a
 * tensor of any size).  NULL when out of memory. */
static uint8_t *strip_content(const uint8_t *payload, size_t len,
                              const content_loc *loc, size_t *out_len) {
  /* Inside out: each message loses the field and whatever its inner
   * length prefixes lost by getting shorter. */
  uint64_t new_len[PATH_DEPTH];
  size_t shrink = (size_t)(loc->field_end - loc->field);
  uint8_t scratch[10];
  for (int level = PATH_DEPTH - 1; level >= 0; level--) {
    new_len[level] = loc->body_len[level] - shrink;
    shrink += (size_t)(loc->body[level] - loc->len_at[level]) -
              put_varint(scratch, new_len[level]);
  }
  uint8_t *out = malloc(len - shrink + 1);
  if (!out)
    return NULL;
  size_t n = 0;
  const uint8_t *pos = payload;
  for (int level = 0; level < PATH_DEPTH; level++) {
    memcpy(out + n, pos, (size_t)(loc->len_at[level] - pos));
    n += (size_t)(loc->len_at[level] - pos);
    n += put_varint(out + n, new_len[level]);
    pos = loc->body[level];
  }
  memcpy(out + n, pos, (size_t)(loc->field - pos));
  n += (size_t)(loc->field - pos);
  memcpy(out + n, loc->field_end, (size_t)(payload + len - loc->field_end));
  n += (size_t)(payload + len - loc->field_end);
  *out_len = n;
  return out;
}

/* protobuf-c copies every bytes field it unpacks; a borrowed decode
 * unpacks the payload without its tensor_content and keeps a pointer to
 * where the elements lie instead. */
static Smdebug__Event *unpack_event(const uint8_t *payload, size_t len,
                                    bool borrow, event_owner *o) {
  content_loc loc;
  if (!borrow || !locate_content(payload, len, &loc))
    return smdebug__event__unpack(NULL, len, payload);
  size_t slen;
  uint8_t *stripped = strip_content(payload, len, &loc, &slen);
  if (!stripped)
    return NULL;
  Smdebug__Event *ev = smdebug__event__unpack(NULL, slen, stripped);
  free(stripped);
  o->content.data = (uint8_t *)(uintptr_t)loc.data;
  o->content.len = loc.len;
  return ev;
}

static int decode(const uint8_t *payload, size_t len, const char *file,
                  uint64_t offset, bool borrow, smr_tensor *out, char **name,
                  smr_error *err) {
  memset(out, 0, sizeof *out);
  if (name)
    *name = NULL;
  if (!payload)
    payload = empty_bytes;
  wire_ctx wc = {payload, file, offset, err};
  int rc = walk_message(&wc, &event_schema, payload, payload + len);
  if (rc != SMR_OK)
    return rc;
  event_owner *o = calloc(1, sizeof *o);
  if (!o)
    return smr_error_set(err, SMR_ERR_NOMEM, file, (int64_t)offset,
                         "out of memory");
  o->ev = unpack_event(payload, len, borrow, o);
  dec_ctx d = {file, offset, NULL, err};
  rc = o->ev ? decode_event(&d, o, out, name)
             : dec_fail(&d, "not a valid Event protobuf (unpack failed)");
  if (rc != SMR_OK) {
    owner_release(o);
    memset(out, 0, sizeof *out);
    return rc;
  }
  out->owner_ = o;
  out->release_ = owner_release;
  return SMR_OK;
}

int smr_event_decode(const uint8_t *payload, size_t len, const char *file,
                     uint64_t offset, smr_tensor *out, char **name,
                     smr_error *err) {
  return decode(payload, len, file, offset, false, out, name, err);
}

int smr_event_decode_borrow(const uint8_t *payload, size_t len,
                            const char *file, uint64_t offset, smr_tensor *out,
                            char **name, smr_error *err) {
  return decode(payload, len, file, offset, true, out, name, err);
}

/* ---- decoding from a record's first bytes and its last ---------------- */

/* Where the tensor_content lies, as offsets in the payload: the fields
 * that enclose it (Event.summary, the first Summary.value, Value.tensor)
 * and the field itself. */
typedef struct head_loc {
  size_t len_at[PATH_DEPTH], body[PATH_DEPTH];
  uint64_t body_len[PATH_DEPTH];
  size_t field, data; /* the field's key, its bytes */
  uint64_t len;
} head_loc;

/* Skips the value of a field of wire type wt at head[*pos] inside a
 * message ending at `end` (payload offsets; the head holds n bytes): a
 * varint or a length prefix must lie in the head, a length-delimited value
 * may run past it. */
static bool head_skip(const uint8_t *head, size_t n, size_t *pos, uint64_t end,
                      unsigned wt) {
  uint64_t v, lim = end < n ? end : n;
  size_t k, p = *pos;
  switch (wt) {
  case WT_VARINT:
    if (!(k = read_varint(head + p, head + lim, &v)))
      return false;
    *pos = p + k;
    return true;
  case WT_I64:
  case WT_I32:
    k = wt == WT_I64 ? 8 : 4;
    if (end - p < k)
      return false;
    *pos = p + k;
    return true;
  case WT_LEN:
    if (!(k = read_varint(head + p, head + lim, &v)) || v > end - p - k)
      return false;
    *pos = p + k + (size_t)v;
    return true;
  default:
    return false;
  }
}

/* The first length-delimited field `num` of the message [*pos, end):
 * *key_at its key, *pos its contents, *len their length; false when the
 * walk leaves the head first or meets something malformed. */
static bool head_find(const uint8_t *head, size_t n, size_t *pos, uint64_t end,
                      uint32_t num, size_t *key_at, uint64_t *len) {
  size_t p = *pos;
  while (p < end && p < n) {
    uint64_t key, v;
    size_t k = read_varint(head + p, head + (end < n ? end : n), &key);
    if (!k || k > 5 || key > UINT32_MAX || (key >> 3) == 0)
      return false;
    unsigned wt = (unsigned)(key & 7);
    if ((key >> 3) == num && wt == WT_LEN) {
      size_t q = p + k, lim = end < n ? (size_t)end : n;
      size_t kk = read_varint(head + q, head + lim, &v);
      if (!kk || v > end - q - kk)
        return false;
      *key_at = p;
      *pos = q + kk;
      *len = v;
      return true;
    }
    size_t next = p + k;
    if (!head_skip(head, n, &next, end, wt))
      return false;
    p = next;
  }
  return false;
}

static bool head_locate(const uint8_t *head, size_t n, uint64_t payload_len,
                        head_loc *loc) {
  size_t pos = 0, key_at;
  uint64_t end = payload_len, len;
  for (int level = 0; level <= PATH_DEPTH; level++) {
    if (!head_find(head, n, &pos, end, content_path[level], &key_at, &len))
      return false;
    if (level == PATH_DEPTH) {
      loc->field = key_at;
      loc->data = pos;
      loc->len = len;
      return len > 0 && pos <= n;
    }
    loc->len_at[level] = key_at + 1; /* keys on the path are one byte */
    if (head[key_at] != ((content_path[level] << 3) | WT_LEN))
      return false;
    loc->body[level] = pos;
    loc->body_len[level] = len;
    end = pos + len;
  }
  return false;
}

bool smr_event_head_locate(const uint8_t *head, size_t n, uint64_t payload_len,
                           uint64_t *data_at, uint64_t *data_len) {
  head_loc loc;
  if (!head_locate(head, n, payload_len, &loc))
    return false;
  *data_at = loc.data;
  *data_len = loc.len;
  return true;
}

/* The payload without its tensor_content, as strip_content builds it from
 * the whole payload: the head up to the field's key, the enclosing lengths
 * shortened, then the tail. */
static uint8_t *head_strip(const uint8_t *head, const head_loc *loc,
                           const uint8_t *tail, size_t tail_len,
                           size_t *out_len) {
  uint64_t new_len[PATH_DEPTH];
  uint64_t shrink = loc->data + loc->len - loc->field;
  uint8_t scratch[10];
  for (int level = PATH_DEPTH - 1; level >= 0; level--) {
    new_len[level] = loc->body_len[level] - shrink;
    shrink += (loc->body[level] - loc->len_at[level]) -
              put_varint(scratch, new_len[level]);
  }
  uint8_t *out = malloc(loc->field + PATH_DEPTH * 10 + tail_len + 1);
  if (!out)
    return NULL;
  size_t n = 0, pos = 0;
  for (int level = 0; level < PATH_DEPTH; level++) {
    memcpy(out + n, head + pos, loc->len_at[level] - pos);
    n += loc->len_at[level] - pos;
    n += put_varint(out + n, new_len[level]);
    pos = loc->body[level];
  }
  memcpy(out + n, head + pos, loc->field - pos);
  n += loc->field - pos;
  if (tail_len)
    memcpy(out + n, tail, tail_len);
  *out_len = n + tail_len;
  return out;
}

/* Whether the payload without its tensor_content (stripped) has the plain
 * layout locate_content asks of the whole payload: one summary, a first
 * value, one tensor in it and (the removed one aside) no tensor_content. */
static bool stripped_plain(const uint8_t *p, size_t len) {
  const uint8_t *end = p + len;
  for (int level = 0; level <= PATH_DEPTH; level++) {
    field_hits h;
    if (!find_len_field(p, end, content_path[level], &h))
      return false;
    if (level == PATH_DEPTH)
      return h.count == 0;
    if (h.count == 0 || (h.count > 1 && level != 1))
      return false;
    p = h.body;
    end = h.body + h.n;
  }
  return false;
}

int smr_event_decode_head(const uint8_t *head, size_t n, const uint8_t *tail,
                          size_t tail_len, uint64_t payload_len,
                          const char *file, uint64_t offset, smr_tensor *out,
                          char **name, smr_error *err) {
  memset(out, 0, sizeof *out);
  if (name)
    *name = NULL;
  head_loc loc;
  if (!head_locate(head, n, payload_len, &loc) ||
      loc.data + loc.len + tail_len != payload_len)
    return smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                         "not decodable from its first bytes");
  size_t slen;
  uint8_t *skel = head_strip(head, &loc, tail, tail_len, &slen);
  if (!skel)
    return smr_error_set(err, SMR_ERR_NOMEM, file, (int64_t)offset,
                         "out of memory");
  wire_ctx wc = {skel, file, offset, err};
  int rc = walk_message(&wc, &event_schema, skel, skel + slen);
  if (rc == SMR_OK && !stripped_plain(skel, slen))
    rc = smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                       "not decodable from its first bytes");
  event_owner *o = rc == SMR_OK ? calloc(1, sizeof *o) : NULL;
  if (rc == SMR_OK && !o)
    rc = smr_error_set(err, SMR_ERR_NOMEM, file, (int64_t)offset,
                       "out of memory");
  if (rc == SMR_OK) {
    /* the elements in the head, copied: the head is the caller's */
    size_t have = n - loc.data < loc.len ? n - loc.data : (size_t)loc.len;
    o->typed = malloc(have + 1);
    o->ev = o->typed ? smdebug__event__unpack(NULL, slen, skel) : NULL;
    if (o->typed)
      memcpy(o->typed, head + loc.data, have);
    o->content.data = o->typed;
    o->content.len = loc.len;
    dec_ctx d = {file, offset, NULL, err};
    rc = o->ev ? decode_event(&d, o, out, name)
               : dec_fail(&d, "not a valid Event protobuf (unpack failed)");
    if (rc == SMR_OK && out->dtype == SMR_DT_STRING)
      rc = smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                         "string tensor: not decodable from its first bytes");
    if (rc == SMR_OK) { /* the whole elements the head holds */
      size_t size = smr_dtype_size(out->dtype);
      if (size && (uint64_t)out->count > have / size)
        out->count = (int64_t)(have / size);
      out->nbytes = (size_t)out->count * size;
      out->owner_ = o;
      out->release_ = owner_release;
    } else {
      if (name) {
        free(*name);
        *name = NULL;
      }
      owner_release(o);
      memset(out, 0, sizeof *out);
    }
  }
  free(skel);
  return rc;
}
