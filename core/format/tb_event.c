/* tb_event.c - TensorBoard Event records: the wire walk that finds the
 * scalars (docs/tensorboard.md#the-bytes).  See tb_event.h. */
#include "format/tb_event.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format/tensor.h"

/* protobuf wire types */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A cursor over a message's bytes. */
typedef struct pb {
  const uint8_t *p, *end;
} pb;

/* One field: its number, wire type and payload. */
typedef struct field {
  uint32_t num;
  int wt;
  uint64_t u;           /* varint, I64 and I32 values */
  const uint8_t *bytes; /* LEN payload */
  size_t len;
} field;

static bool read_varint(pb *c, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (c->p >= c->end)
      return false;
    uint8_t b = *c->p++;
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false; /* more than 10 bytes */
}

/* The next field, or false with *why set (end of message: *why = NULL). */
static bool next_field(pb *c, field *f, const char **why) {
  *why = NULL;
  if (c->p >= c->end)
    return false;
  uint64_t key;
  if (!read_varint(c, &key)) {
    *why = "a field key that is not a valid varint";
    return false;
  }
  f->num = (uint32_t)(key >> 3);
  f->wt = (int)(key & 7);
  if (key >> 3 == 0 || key >> 32) {
    *why = "a field number out of range";
    return false;
  }
  switch (f->wt) {
  case WT_VARINT:
    if (!read_varint(c, &f->u)) {
      *why = "a varint cut short";
      return false;
    }
    return true;
  case WT_I64:
    if (c->end - c->p < 8) {
      *why = "an 8-byte field cut short";
      return false;
    }
    f->u = smr_le64(c->p);
    c->p += 8;
    return true;
  case WT_I32:
    if (c->end - c->p < 4) {
      *why = "a 4-byte field cut short";
      return false;
    }
    f->u = smr_le32(c->p);
    c->p += 4;
    return true;
  case WT_LEN: {
    uint64_t n;
    if (!read_varint(c, &n) || n > (uint64_t)(c->end - c->p)) {
      *why = "a length-delimited field longer than the bytes left";
      return false;
    }
    f->bytes = c->p;
    f->len = (size_t)n;
    c->p += n;
    return true;
  }
  default:
    *why = "a group or unknown wire type (not written by TensorBoard)";
    return false;
  }
}

static double f32_of(uint32_t bits) {
  float x;
  memcpy(&x, &bits, 4);
  return (double)x;
}

static double f64_of(uint64_t bits) {
  double x;
  memcpy(&x, &bits, 8);
  return x;
}

/* ---- TensorProto -------------------------------------------------------- */

typedef struct tensor_info {
  int dtype;
  int ndim;
  int64_t count; /* product of the dims (1 for rank 0), -1 when huge */
  bool shape_bad;
  const uint8_t *content;
  size_t content_len;
  bool has_content;
  /* the first typed value and how many there are */
  uint64_t n_float, n_double;
  double first_float, first_double;
} tensor_info;

/* TensorShapeProto{dim = 2: Dim{size = 1}, unknown_rank = 3} */
static bool parse_shape(const uint8_t *p, size_t n, tensor_info *ti,
                        const char **why) {
  pb c = {p, p + n};
  field f;
  while (next_field(&c, &f, why)) {
    if (f.num == 3 && f.wt == WT_VARINT && f.u)
      ti->shape_bad = true; /* unknown rank: not a scalar */
    if (f.num != 2)
      continue;
    if (f.wt != WT_LEN) {
      *why = "TensorShapeProto.dim is not a message";
      return false;
    }
    int64_t size = 0;
    pb d = {f.bytes, f.bytes + f.len};
    field g;
    while (next_field(&d, &g, why))
      if (g.num == 1 && g.wt == WT_VARINT)
        size = (int64_t)g.u;
    if (*why)
      return false;
    ti->ndim++;
    if (size < 0)
      ti->shape_bad = true;
    else if (ti->count >= 0 && size && ti->count > INT64_MAX / size)
      ti->count = -1;
    else if (ti->count >= 0)
      ti->count *= size;
  }
  return *why == NULL;
}

/* A repeated float (I32) or double (I64) field, packed or not: count and
 * first element. */
static bool typed_values(const field *f, int elem_wt, uint64_t *n,
                         double *first, const char **why) {
  size_t size = elem_wt == WT_I32 ? 4 : 8;
  if (f->wt == elem_wt) {
    if (!(*n)++)
      *first = size == 4 ? f32_of((uint32_t)f->u) : f64_of(f->u);
    return true;
  }
  if (f->wt != WT_LEN || f->len % size) {
    *why = size == 4 ? "float_val is not a packed list of 4-byte floats"
                     : "double_val is not a packed list of 8-byte doubles";
    return false;
  }
  if (f->len && !*n)
    *first =
        size == 4 ? f32_of(smr_le32(f->bytes)) : f64_of(smr_le64(f->bytes));
  *n += f->len / size;
  return true;
}

static bool parse_tensor(const uint8_t *p, size_t n, tensor_info *ti,
                         const char **why) {
  memset(ti, 0, sizeof *ti);
  ti->count = 1;
  pb c = {p, p + n};
  field f;
  while (next_field(&c, &f, why)) {
    switch (f.num) {
    case 1: /* dtype */
      if (f.wt == WT_VARINT)
        ti->dtype = (int)f.u;
      break;
    case 2: /* tensor_shape */
      if (f.wt != WT_LEN) {
        *why = "TensorProto.tensor_shape is not a message";
        return false;
      }
      if (!parse_shape(f.bytes, f.len, ti, why))
        return false;
      break;
    case 4: /* tensor_content */
      if (f.wt == WT_LEN) {
        ti->content = f.bytes;
        ti->content_len = f.len;
        ti->has_content = true;
      }
      break;
    case 5: /* float_val */
      if (!typed_values(&f, WT_I32, &ti->n_float, &ti->first_float, why))
        return false;
      break;
    case 6: /* double_val */
      if (!typed_values(&f, WT_I64, &ti->n_double, &ti->first_double, why))
        return false;
      break;
    default:
      break;
    }
  }
  return *why == NULL;
}

/* The scalar a tensor holds, or false with v->why saying what it holds. */
static bool tensor_scalar(const tensor_info *ti, smr_tb_value *v) {
  if (ti->dtype != SMR_DT_FLOAT && ti->dtype != SMR_DT_DOUBLE) {
    snprintf(v->why, sizeof v->why,
             "a tensor of dtype %s (a scalar is DT_FLOAT or DT_DOUBLE)",
             smr_dtype_tf_name(ti->dtype));
    return false;
  }
  if (ti->shape_bad || ti->ndim != 0) {
    snprintf(v->why, sizeof v->why,
             "a tensor of rank %d with %lld elements (a scalar has shape ())",
             ti->ndim, (long long)ti->count);
    return false;
  }
  size_t esize = ti->dtype == SMR_DT_FLOAT ? 4 : 8;
  v->dtype = ti->dtype;
  if (ti->has_content) {
    if (ti->content_len != esize) {
      snprintf(v->why, sizeof v->why,
               "tensor_content of %zu bytes for one %s (expected %zu)",
               ti->content_len, smr_dtype_tf_name(ti->dtype), esize);
      return false;
    }
    v->value = esize == 4 ? f32_of(smr_le32(ti->content))
                          : f64_of(smr_le64(ti->content));
    return true;
  }
  uint64_t n = esize == 4 ? ti->n_float : ti->n_double;
  if (n > 1) {
    snprintf(v->why, sizeof v->why,
             "%llu values in a tensor of shape () (expected one)",
             (unsigned long long)n);
    return false;
  }
  /* No value at all: TensorFlow reads a tensor without values as zeros. */
  v->value = n ? (esize == 4 ? ti->first_float : ti->first_double) : 0.0;
  return true;
}

/* ---- Summary.Value ------------------------------------------------------ */

/* SummaryMetadata{plugin_data = 1: PluginData{plugin_name = 1}}.  Upstream
 * declares plugin_data singular, smdebug's copy repeated: on the wire the
 * same; the last one wins, as protobuf merges a singular message. */
static bool parse_metadata(const uint8_t *p, size_t n, smr_tb_value *v,
                           bool *scalars, const char **why) {
  pb c = {p, p + n};
  field f;
  while (next_field(&c, &f, why)) {
    if (f.num != 1 || f.wt != WT_LEN)
      continue;
    pb d = {f.bytes, f.bytes + f.len};
    field g;
    while (next_field(&d, &g, why))
      if (g.num == 1 && g.wt == WT_LEN) {
        v->plugin = true;
        *scalars = g.len == 7 && memcmp(g.bytes, "scalars", 7) == 0;
      }
    if (*why)
      return false;
  }
  return *why == NULL;
}

static bool parse_value(const uint8_t *p, size_t n, smr_tb_value *v,
                        const char **why) {
  memset(v, 0, sizeof *v);
  v->kind = SMR_TB_OTHER;
  pb c = {p, p + n};
  field f;
  bool simple = false, scalars = false;
  const uint8_t *tensor = NULL;
  size_t tensor_len = 0;
  while (next_field(&c, &f, why)) {
    switch (f.num) {
    case 1: /* tag */
      if (f.wt != WT_LEN) {
        *why = "Summary.Value.tag is not a string";
        return false;
      }
      v->tag = (const char *)f.bytes;
      v->tag_len = f.len;
      break;
    case 2: /* simple_value */
      if (f.wt != WT_I32) {
        *why = "Summary.Value.simple_value is not a 4-byte float";
        return false;
      }
      simple = true;
      tensor = NULL; /* a oneof: the last one set wins */
      v->value = f32_of((uint32_t)f.u);
      break;
    case 8: /* tensor */
      if (f.wt != WT_LEN) {
        *why = "Summary.Value.tensor is not a message";
        return false;
      }
      simple = false;
      tensor = f.bytes;
      tensor_len = f.len;
      break;
    case 9: /* metadata */
      if (f.wt != WT_LEN) {
        *why = "Summary.Value.metadata is not a message";
        return false;
      }
      if (!parse_metadata(f.bytes, f.len, v, &scalars, why))
        return false;
      break;
    case 3: /* old histogram, image, histo, audio: other plugins' data */
    case 4:
    case 5:
    case 6:
      simple = false;
      tensor = NULL;
      break;
    default:
      break;
    }
  }
  if (*why)
    return false;
  if (simple) {
    v->kind = SMR_TB_SCALAR;
    v->dtype = SMR_DT_FLOAT;
    return true;
  }
  if (!tensor)
    return true;
  v->tensor = true;
  tensor_info ti;
  if (!parse_tensor(tensor, tensor_len, &ti, why))
    return false;
  bool ok = tensor_scalar(&ti, v);
  if (scalars)
    v->kind = ok ? SMR_TB_SCALAR : SMR_TB_BAD;
  else if (!ok)
    v->dtype = 0; /* not a scalar whatever the tag */
  return true;
}

/* ---- Event -------------------------------------------------------------- */

int smr_tb_event_decode(const uint8_t *payload, size_t len, const char *file,
                        uint64_t offset, smr_tb_event *ev, smr_tb_value_fn fn,
                        void *ctx, smr_error *err) {
  memset(ev, 0, sizeof *ev);
  pb c = {payload, payload + len};
  field f;
  const char *why = NULL;
  const uint8_t *summary = NULL;
  size_t summary_len = 0;
  while (next_field(&c, &f, &why)) {
    if (f.num == 1 && f.wt == WT_I64)
      ev->wall_time = f64_of(f.u);
    else if (f.num == 2 && f.wt == WT_VARINT)
      ev->step = (int64_t)f.u;
    else if (f.num == 3)
      ev->file_version = true;
    else if (f.num == 5) {
      if (f.wt != WT_LEN)
        return smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                             "Event.summary is not a message (wire type %d)",
                             f.wt);
      summary = f.bytes;
      summary_len = f.len;
    } else if (f.num <= 2)
      return smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                           "Event.%s has wire type %d (expected %s)",
                           f.num == 1 ? "wall_time" : "step", f.wt,
                           f.num == 1 ? "an 8-byte double" : "a varint");
  }
  if (why)
    return smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                         "not a protobuf Event: %s", why);
  if (!summary)
    return SMR_OK;
  /* Summary{repeated Value value = 1} */
  pb s = {summary, summary + summary_len};
  while (next_field(&s, &f, &why)) {
    if (f.num != 1)
      continue;
    if (f.wt != WT_LEN)
      return smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                           "Summary.value is not a message (wire type %d)",
                           f.wt);
    smr_tb_value v;
    if (!parse_value(f.bytes, f.len, &v, &why))
      break;
    ev->nvalues++;
    if (fn && fn(ctx, ev, &v))
      return SMR_OK;
  }
  if (why)
    return smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)offset,
                         "Event.summary value %zu: %s", ev->nvalues + 1, why);
  return SMR_OK;
}

bool smr_tb_is_event_file(const char *basename) {
  return strncmp(basename, "events.out.tfevents.", 20) == 0 &&
         basename[20] != '\0';
}
