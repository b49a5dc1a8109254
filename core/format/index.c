/* index.c - index files, collections files, smdebug file names and
 * reduction tensor names (docs/formats.md#the-trial-directory,
 * docs/formats.md#index-files, docs/formats.md#collections-files,
 * docs/formats.md#reductions).
 *
 * Parsing goes through cJSON; serializing is done by hand so that the bytes
 * are exactly what Python's json.dumps() writes (", " and ": " separators,
 * non-ASCII escaped as \uXXXX), i.e. what smdebug writes. */
#include "format/index.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/path.h"
#include "format/record.h"

/* Largest integer a JSON number (a double) holds exactly. */
#define JSON_INT_MAX 9007199254740992.0 /* 2^53 */

/* ------------------------------------------------------------------ */
/* cJSON helpers                                                        */

/* Parse exactly `len` bytes as one JSON value (trailing whitespace only).
 * `what` names the kind of file in messages. */
static int parse_json(const char *json, size_t len, const char *file,
                      const char *what, cJSON **out, smr_error *err) {
  *out = NULL;
  if (len == 0)
    return smr_error_set(err, SMR_ERR_FORMAT, file, 0,
                         "empty %s: expected a JSON object", what);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  if (!root) {
    int64_t off = end && end >= json ? (int64_t)(end - json) : -1;
    return smr_error_set(err, SMR_ERR_FORMAT, file, off,
                         "%s is not valid JSON (parse error at byte %lld)",
                         what, (long long)off);
  }
  size_t pos = end && end >= json ? (size_t)(end - json) : len;
  while (pos < len && isspace((unsigned char)json[pos]))
    pos++;
  if (pos < len) {
    cJSON_Delete(root);
    return smr_error_set(err, SMR_ERR_FORMAT, file, (int64_t)pos,
                         "%s is not valid JSON: extra data after the value "
                         "at byte %zu",
                         what, pos);
  }
  *out = root;
  return SMR_OK;
}

/* Member `key` of an object; the last one wins on duplicate keys, as in
 * Python's json module.  NULL when absent or `obj` is not an object. */
static const cJSON *member(const cJSON *obj, const char *key) {
  if (!cJSON_IsObject(obj))
    return NULL;
  const cJSON *found = NULL;
  for (const cJSON *c = obj->child; c; c = c->next)
    if (c->string && strcmp(c->string, key) == 0)
      found = c;
  return found;
}

static bool is_absent(const cJSON *v) {
  return !v || cJSON_IsNull(v);
}

/* An integral JSON number in [min, 2^53]. */
static bool json_int(const cJSON *v, int64_t min, int64_t *out) {
  if (!cJSON_IsNumber(v))
    return false;
  double d = v->valuedouble;
  if (!(d >= (double)min && d <= JSON_INT_MAX))
    return false;
  int64_t i = (int64_t)d;
  if ((double)i != d)
    return false;
  *out = i;
  return true;
}

/* ------------------------------------------------------------------ */
/* index files                                                          */

typedef struct parse_ctx {
  const char *file;
  smr_error *err;
} parse_ctx;

static int bad(const parse_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int bad(const parse_ctx *c, const char *fmt, ...) {
  char msg[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return smr_error_set(c->err, SMR_ERR_FORMAT, c->file, -1, "%s", msg);
}

/* An unsafe event_file_name leaves the rest of the index usable (its
 * step, mode and tensor names stay known); only reading its values fails,
 * with the reason kept in ix->event_file_problem. */
static int parse_event_file_name(const parse_ctx *c, const cJSON *v,
                                 smr_index *ix) {
  if (is_absent(v))
    return SMR_OK;
  if (!cJSON_IsString(v))
    return bad(c, "meta.event_file_name: expected a string");
  const char *s = v->valuestring;
  if (s[0] == '/')
    ix->event_file_problem = smr_xasprintf(
        "event_file_name '%.300s' is absolute (outside the trial directory)",
        s);
  else if (!smr_path_is_safe(s))
    ix->event_file_problem = smr_xasprintf(
        "event_file_name '%.300s' escapes the trial directory", s);
  else
    ix->event_file_name = smr_xstrdup(s);
  return SMR_OK;
}

static int parse_meta(const parse_ctx *c, const cJSON *root, smr_index *ix) {
  const cJSON *meta = member(root, "meta");
  if (!cJSON_IsObject(meta) || !meta->child)
    return bad(c, "expected a non-empty object 'meta'");
  const cJSON *mode = member(meta, "mode");
  if (cJSON_IsString(mode))
    ix->mode = smr_mode_from_name(mode->valuestring);
  else if (cJSON_IsNumber(mode) && mode->valuedouble >= 1 &&
           mode->valuedouble <= 4 && mode->valuedouble == mode->valueint)
    ix->mode = mode->valueint;
  if (ix->mode == 0)
    return bad(c, "meta.mode: expected TRAIN, EVAL, PREDICT or GLOBAL");
  if (!json_int(member(meta, "mode_step"), 0, &ix->mode_step))
    return bad(c, "meta.mode_step: expected an integer >= 0");
  return parse_event_file_name(c, member(meta, "event_file_name"), ix);
}

/* One tensor_payload entry.  1: left out (no usable name, so it belongs
 * to no tensor); 0: kept, with t->problem set when its place in the event
 * file is not valid. */
static int parse_tensor_entry(size_t i, const cJSON *e, smr_index_tensor *t) {
  const cJSON *name = member(e, "tensorname");
  if (!cJSON_IsString(name) || !name->valuestring[0])
    return 1;
  t->name = smr_xstrdup(name->valuestring);
  if (!json_int(member(e, "start_idx"), 0, &t->start_idx))
    t->problem = smr_xasprintf(
        "tensor_payload[%zu].start_idx: expected an integer >= 0", i);
  else if (!json_int(member(e, "length"), SMR_RECORD_OVERHEAD, &t->length))
    t->problem = smr_xasprintf(
        "tensor_payload[%zu].length: expected an integer from 16 to 2^53", i);
  if (t->problem)
    t->start_idx = t->length = 0;
  return 0;
}

static int parse_shape_list(const parse_ctx *c, size_t i, const cJSON *v,
                            smr_index_shape *s) {
  if (!cJSON_IsArray(v))
    return bad(c, "shape_payload[%zu].shape: expected a list of integers", i);
  int n = cJSON_GetArraySize(v);
  if (n > SMR_MAX_DIMS)
    return bad(c, "shape_payload[%zu].shape: %d dimensions (at most %d)", i, n,
               SMR_MAX_DIMS);
  int d = 0;
  for (const cJSON *x = v->child; x; x = x->next, d++)
    if (!json_int(x, 0, &s->shape[d]))
      return bad(c, "shape_payload[%zu].shape[%d]: expected an integer >= 0", i,
                 d);
  s->ndim = n;
  return SMR_OK;
}

static int parse_shape_entry(const parse_ctx *c, size_t i, const cJSON *e,
                             smr_index_shape *s) {
  if (!cJSON_IsObject(e))
    return bad(c, "shape_payload[%zu]: expected an object", i);
  const cJSON *name = member(e, "tensorname");
  if (!cJSON_IsString(name) || !name->valuestring[0])
    return bad(c, "shape_payload[%zu].tensorname: expected a non-empty string",
               i);
  const cJSON *orig = member(e, "originalname");
  if (!is_absent(orig) && !cJSON_IsString(orig))
    return bad(c, "shape_payload[%zu].originalname: expected a string", i);
  int rc = parse_shape_list(c, i, member(e, "shape"), s);
  if (rc)
    return rc;
  s->name = smr_xstrdup(name->valuestring);
  s->originalname =
      smr_xstrdup(cJSON_IsString(orig) ? orig->valuestring : s->name);
  return SMR_OK;
}

/* A payload list: absent or null means empty. */
static int payload_list(const parse_ctx *c, const cJSON *root, const char *key,
                        const cJSON **out, bool *present) {
  const cJSON *v = member(root, key);
  *out = NULL;
  *present = cJSON_IsArray(v);
  if (*present)
    *out = v;
  else if (!is_absent(v))
    return bad(c, "%s: expected a list", key);
  return SMR_OK;
}

static int parse_payloads(const parse_ctx *c, const cJSON *root,
                          smr_index *ix) {
  const cJSON *tp, *sp;
  bool has_tp, has_sp;
  int rc = payload_list(c, root, "tensor_payload", &tp, &has_tp);
  if (!rc)
    rc = payload_list(c, root, "shape_payload", &sp, &has_sp);
  if (rc)
    return rc;
  if (!has_tp && !has_sp)
    return bad(c, "expected 'tensor_payload' or 'shape_payload'");
  size_t nt = tp ? (size_t)cJSON_GetArraySize(tp) : 0;
  size_t ns = sp ? (size_t)cJSON_GetArraySize(sp) : 0;
  if (nt > 0 && !ix->event_file_name && !ix->event_file_problem)
    return bad(c, "tensor_payload is not empty but meta.event_file_name is "
                  "missing");
  ix->tensors = smr_xcalloc(nt, sizeof *ix->tensors);
  ix->shapes = smr_xcalloc(ns, sizeof *ix->shapes);
  /* count an entry only once it is complete, so that freeing after an
   * error releases exactly what was allocated */
  size_t k = 0;
  for (const cJSON *e = tp ? tp->child : NULL; e; e = e->next, k++)
    if (parse_tensor_entry(k, e, &ix->tensors[ix->n_tensors]) == 0)
      ix->n_tensors++;
  for (const cJSON *e = sp ? sp->child : NULL; e; e = e->next) {
    if ((rc = parse_shape_entry(c, ix->n_shapes, e, &ix->shapes[ix->n_shapes])))
      return rc;
    ix->n_shapes++;
  }
  return SMR_OK;
}

int smr_index_parse(const char *json, size_t len, const char *file,
                    smr_index *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  cJSON *root;
  int rc = parse_json(json, len, file, "index file", &root, err);
  if (rc)
    return rc;
  parse_ctx c = {file, err};
  if (!cJSON_IsObject(root))
    rc = bad(&c, "index file: expected a JSON object at the top level");
  if (!rc)
    rc = parse_meta(&c, root, out);
  if (!rc)
    rc = parse_payloads(&c, root, out);
  cJSON_Delete(root);
  if (rc)
    smr_index_free(out);
  return rc;
}

void smr_index_free(smr_index *ix) {
  if (!ix)
    return;
  for (size_t i = 0; i < ix->n_tensors; i++) {
    free(ix->tensors[i].name);
    free(ix->tensors[i].problem);
  }
  for (size_t i = 0; i < ix->n_shapes; i++) {
    free(ix->shapes[i].name);
    free(ix->shapes[i].originalname);
  }
  free(ix->tensors);
  free(ix->shapes);
  free(ix->event_file_name);
  free(ix->event_file_problem);
  memset(ix, 0, sizeof *ix);
}

/* ------------------------------------------------------------------ */
/* JSON output as Python's json.dumps (ensure_ascii) writes it          */

/* Decode one UTF-8 sequence at s (NUL-terminated); returns its length, or 0
 * when invalid (overlong, surrogate, out of range, truncated). */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp) {
  size_t n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
  if (n == 0 || s[0] > 0xF4)
    return 0;
  uint32_t v = s[0] & (0x7F >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    v = v << 6 | (s[i] & 0x3F);
  }
  static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < min_cp[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return n;
}

static void json_escape_cp(smr_buf *b, uint32_t cp) {
  if (cp >= 0x10000) {
    cp -= 0x10000;
    smr_buf_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                   0xDC00 + (cp & 0x3FF));
  } else {
    smr_buf_printf(b, "\\u%04x", cp);
  }
}

static void json_str(smr_buf *b, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  smr_buf_puts(b, "\"");
  while (*s) {
    unsigned char ch = *s;
    const char *esc = ch == '"'    ? "\\\""
                      : ch == '\\' ? "\\\\"
                      : ch == '\n' ? "\\n"
                      : ch == '\r' ? "\\r"
                      : ch == '\t' ? "\\t"
                      : ch == '\b' ? "\\b"
                      : ch == '\f' ? "\\f"
                                   : NULL;
    if (esc) {
      smr_buf_puts(b, esc);
      s++;
    } else if (ch >= 0x20 && ch < 0x7F) {
      smr_buf_append(b, s++, 1);
    } else if (ch < 0x80) {
      json_escape_cp(b, ch);
      s++;
    } else {
      uint32_t cp = 0xFFFD; /* invalid bytes: one replacement each */
      size_t n = utf8_decode(s, &cp);
      json_escape_cp(b, cp);
      s += n ? n : 1;
    }
  }
  smr_buf_puts(b, "\"");
}

static void json_key(smr_buf *b, const char *key) {
  json_str(b, key);
  smr_buf_puts(b, ": ");
}

static void json_str_list(smr_buf *b, char *const *items, size_t n) {
  smr_buf_puts(b, "[");
  for (size_t i = 0; i < n; i++) {
    if (i)
      smr_buf_puts(b, ", ");
    json_str(b, items[i]);
  }
  smr_buf_puts(b, "]");
}

static void index_meta_json(smr_buf *b, const smr_index *ix) {
  smr_buf_puts(b, "{");
  json_key(b, "mode");
  json_str(b, smr_mode_name(ix->mode));
  smr_buf_printf(b, ", \"mode_step\": %" PRId64, ix->mode_step);
  if (ix->event_file_name) {
    smr_buf_puts(b, ", ");
    json_key(b, "event_file_name");
    json_str(b, ix->event_file_name);
  }
  smr_buf_puts(b, "}");
}

static void index_tensor_json(smr_buf *b, const smr_index_tensor *t) {
  smr_buf_puts(b, "{");
  json_key(b, "tensorname");
  json_str(b, t->name);
  smr_buf_printf(b, ", \"start_idx\": %" PRId64 ", \"length\": %" PRId64 "}",
                 t->start_idx, t->length);
}

static void index_shape_json(smr_buf *b, const smr_index_shape *s) {
  smr_buf_puts(b, "{");
  json_key(b, "tensorname");
  json_str(b, s->name);
  smr_buf_puts(b, ", ");
  json_key(b, "originalname");
  json_str(b, s->originalname ? s->originalname : s->name);
  smr_buf_puts(b, ", \"shape\": [");
  for (int d = 0; d < s->ndim; d++)
    smr_buf_printf(b, "%s%" PRId64, d ? ", " : "", s->shape[d]);
  smr_buf_puts(b, "]}");
}

char *smr_index_to_json(const smr_index *ix) {
  smr_buf b = {0};
  smr_buf_puts(&b, "{\"meta\": ");
  index_meta_json(&b, ix);
  smr_buf_puts(&b, ", \"tensor_payload\": [");
  for (size_t i = 0; i < ix->n_tensors; i++) {
    if (i)
      smr_buf_puts(&b, ", ");
    index_tensor_json(&b, &ix->tensors[i]);
  }
  smr_buf_puts(&b, "], \"shape_payload\": [");
  for (size_t i = 0; i < ix->n_shapes; i++) {
    if (i)
      smr_buf_puts(&b, ", ");
    index_shape_json(&b, &ix->shapes[i]);
  }
  smr_buf_puts(&b, "]}");
  return b.data;
}

/* ------------------------------------------------------------------ */
/* collections files                                                    */

/* A list of strings; absent, null and false mean empty (smdebug stores a
 * missing include_regex as false). */
static int string_list(const parse_ctx *c, const char *coll, const char *key,
                       const cJSON *v, char ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (is_absent(v) || cJSON_IsFalse(v))
    return SMR_OK;
  if (!cJSON_IsArray(v))
    return bad(c, "collection '%.200s': %s: expected a list of strings", coll,
               key);
  size_t count = (size_t)cJSON_GetArraySize(v);
  *out = smr_xcalloc(count, sizeof **out);
  for (const cJSON *x = v->child; x; x = x->next) {
    if (!cJSON_IsString(x))
      return bad(c, "collection '%.200s': %s[%zu]: expected a string", coll,
                 key, *n);
    (*out)[(*n)++] = smr_xstrdup(x->valuestring);
  }
  return SMR_OK;
}

/* A boolean; absent or null means false. */
static int json_bool(const parse_ctx *c, const char *coll, const char *key,
                     const cJSON *v, bool *out) {
  *out = false;
  if (is_absent(v))
    return SMR_OK;
  if (!cJSON_IsBool(v))
    return bad(c,
               "collection '%.200s': reduction_config.%s: expected true or "
               "false",
               coll, key);
  *out = cJSON_IsTrue(v);
  return SMR_OK;
}

static int parse_reduction_config(const parse_ctx *c, const cJSON *v,
                                  smr_collection *col) {
  if (is_absent(v))
    return SMR_OK;
  if (!cJSON_IsObject(v))
    return bad(c,
               "collection '%.200s': reduction_config: expected an object "
               "or null",
               col->name);
  const cJSON *red = member(v, "reductions");
  if (!is_absent(red) && !cJSON_IsString(red))
    return bad(c,
               "collection '%.200s': reduction_config.reductions: "
               "expected a string",
               col->name);
  int rc = json_bool(c, col->name, "save_raw_tensor",
                     member(v, "save_raw_tensor"), &col->save_raw_tensor);
  if (!rc)
    rc = json_bool(c, col->name, "save_shape", member(v, "save_shape"),
                   &col->save_shape);
  if (rc)
    return rc;
  col->has_reduction_config = true;
  col->reductions = smr_xstrdup(cJSON_IsString(red) ? red->valuestring : "");
  return SMR_OK;
}

static int parse_collection(const parse_ctx *c, const cJSON *v,
                            smr_collection *col) {
  const char *key = v->string ? v->string : "";
  if (!cJSON_IsObject(v))
    return bad(c, "collections.%.200s: expected an object", key);
  const cJSON *name = member(v, "name");
  if (!is_absent(name) && !cJSON_IsString(name))
    return bad(c, "collections.%.200s.name: expected a string", key);
  col->name = smr_xstrdup(cJSON_IsString(name) ? name->valuestring : key);
  int rc =
      string_list(c, col->name, "include_regex", member(v, "include_regex"),
                  &col->include_regex, &col->n_include_regex);
  if (!rc)
    rc = string_list(c, col->name, "tensor_names", member(v, "tensor_names"),
                     &col->tensor_names, &col->n_tensor_names);
  if (!rc)
    rc = parse_reduction_config(c, member(v, "reduction_config"), col);
  return rc;
}

static int parse_num_workers(const parse_ctx *c, const cJSON *root, int *out) {
  const cJSON *meta = member(root, "_meta");
  if (!cJSON_IsObject(meta))
    return bad(c, "expected an object '_meta'");
  int64_t n;
  if (!json_int(member(meta, "num_workers"), 1, &n) || n > 1000000)
    return bad(c, "_meta.num_workers: expected an integer between 1 and "
                  "1000000");
  *out = (int)n;
  return SMR_OK;
}

static int parse_collections_root(const parse_ctx *c, const cJSON *root,
                                  smr_collections *out) {
  if (!cJSON_IsObject(root))
    return bad(c, "collections file: expected a JSON object at the top level");
  const cJSON *cols = member(root, "collections");
  if (!cJSON_IsObject(cols))
    return bad(c, "expected an object 'collections'");
  int rc = parse_num_workers(c, root, &out->num_workers);
  if (rc)
    return rc;
  out->items =
      smr_xcalloc((size_t)cJSON_GetArraySize(cols), sizeof *out->items);
  for (const cJSON *v = cols->child; v && !rc; v = v->next)
    rc = parse_collection(c, v, &out->items[out->n++]);
  return rc;
}

int smr_collections_parse(const char *json, size_t len, const char *file,
                          smr_collections *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  cJSON *root;
  int rc = parse_json(json, len, file, "collections file", &root, err);
  if (rc)
    return rc;
  parse_ctx c = {file, err};
  rc = parse_collections_root(&c, root, out);
  cJSON_Delete(root);
  if (rc)
    smr_collections_free(out);
  return rc;
}

static void free_strings(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

void smr_collections_free(smr_collections *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++) {
    smr_collection *col = &c->items[i];
    free(col->name);
    free_strings(col->include_regex, col->n_include_regex);
    free_strings(col->tensor_names, col->n_tensor_names);
    free(col->reductions);
  }
  free(c->items);
  memset(c, 0, sizeof *c);
}

static void collection_json(smr_buf *b, const smr_collection *col) {
  smr_buf_puts(b, "{");
  json_key(b, "name");
  json_str(b, col->name);
  smr_buf_puts(b, ", \"include_regex\": ");
  json_str_list(b, col->include_regex, col->n_include_regex);
  smr_buf_puts(b, ", \"tensor_names\": ");
  json_str_list(b, col->tensor_names, col->n_tensor_names);
  smr_buf_puts(b, ", \"reduction_config\": ");
  if (col->has_reduction_config) {
    smr_buf_printf(b, "{\"save_raw_tensor\": %s, \"reductions\": ",
                   col->save_raw_tensor ? "true" : "false");
    json_str(b, col->reductions ? col->reductions : "");
    smr_buf_printf(b, ", \"save_shape\": %s}",
                   col->save_shape ? "true" : "false");
  } else {
    smr_buf_puts(b, "null");
  }
  /* save_config is not kept (rules never need it): written as null, which
   * smdebug reads as "use the defaults". */
  smr_buf_puts(b, ", \"save_config\": null, \"save_histogram\": true}");
}

char *smr_collections_to_json(const smr_collections *c) {
  smr_buf b = {0};
  smr_buf_puts(&b, "{\"collections\": {");
  for (size_t i = 0; i < c->n; i++) {
    if (i)
      smr_buf_puts(&b, ", ");
    json_key(&b, c->items[i].name);
    collection_json(&b, &c->items[i]);
  }
  smr_buf_printf(&b, "}, \"_meta\": {\"num_workers\": %d}}", c->num_workers);
  return b.data;
}

/* ------------------------------------------------------------------ */
/* file names                                                           */

/* TF device names: '_' -> '/', then '-' -> ':' (docs/formats.md#workers). */
static char *worker_deserialize(const char *s, size_t n) {
  char *w = smr_xstrndup(s, n);
  for (char *p = w; *p; p++)
    *p = *p == '_' ? '/' : *p == '-' ? ':' : *p;
  return w;
}

static bool ends_with(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

int smr_parse_step_worker(const char *basename, int64_t *step, char **worker) {
  *worker = NULL;
  if (!basename || strchr(basename, '/'))
    return SMR_ERR_FORMAT;
  size_t n = strlen(basename);
  if (ends_with(basename, n, ".json"))
    n -= 5;
  else if (ends_with(basename, n, ".tfevents"))
    n -= 9;
  else
    return SMR_ERR_FORMAT;
  int64_t v = 0;
  size_t i = 0;
  for (; i < n && basename[i] >= '0' && basename[i] <= '9'; i++) {
    if (v > (INT64_MAX - 9) / 10)
      return SMR_ERR_FORMAT;
    v = v * 10 + (basename[i] - '0');
  }
  /* at least one digit, then '_', then a non-empty worker */
  if (i == 0 || i + 1 >= n || basename[i] != '_')
    return SMR_ERR_FORMAT;
  const char *w = basename + i + 1;
  size_t wn = n - i - 1;
  *step = v;
  *worker = w[0] == '_' ? worker_deserialize(w, wn) : smr_xstrndup(w, wn);
  return SMR_OK;
}

char *smr_parse_collections_worker(const char *basename) {
  static const char suffix[] = "_collections.json";
  if (!basename || strchr(basename, '/'))
    return NULL;
  size_t n = strlen(basename);
  if (!ends_with(basename, n, suffix) || n == sizeof suffix - 1)
    return NULL;
  n -= sizeof suffix - 1;
  return basename[0] == '_' ? worker_deserialize(basename, n)
                            : smr_xstrndup(basename, n);
}

char *smr_worker_serialize(const char *worker) {
  char *w = smr_xstrdup(worker);
  for (char *p = w; *p; p++)
    *p = *p == '/' ? '_' : *p == ':' ? '-' : *p;
  return w;
}

char *smr_event_file_relpath(int64_t step, const char *worker) {
  char *w = smr_worker_serialize(worker);
  char *p = smr_xasprintf("events/%012" PRId64 "/%012" PRId64 "_%s.tfevents",
                          step, step, w);
  free(w);
  return p;
}

char *smr_index_file_relpath(int64_t step, const char *worker) {
  char *w = smr_worker_serialize(worker);
  char *p = smr_xasprintf("index/%09" PRId64 "/%012" PRId64 "_%s.json",
                          step / 1000, step, w);
  free(w);
  return p;
}

char *smr_collections_file_relpath(const char *worker) {
  char *w = smr_worker_serialize(worker);
  char *p = smr_xasprintf("collections/000000000/%s_collections.json", w);
  free(w);
  return p;
}

/* ------------------------------------------------------------------ */
/* reduction tensor names                                               */

#define REDUCTION_PREFIX "smdebug/reductions/"

/* The reductions that can appear in a stored name (docs/formats.md#reductions).
 */
static bool reduction_storable(int r) {
  return r >= SMR_RED_MIN && r <= SMR_RED_L2;
}

bool smr_reduction_name_parse(const char *stored, char **base, int *reduction,
                              bool *abs) {
  const size_t plen = sizeof REDUCTION_PREFIX - 1;
  if (!stored || strncmp(stored, REDUCTION_PREFIX, plen) != 0)
    return false;
  const char *red = stored + plen;
  const char *slash = strchr(red, '/');
  if (!slash || !slash[1])
    return false;
  bool is_abs = strncmp(red, "abs_", 4) == 0;
  if (is_abs)
    red += 4;
  char name[32];
  size_t n = (size_t)(slash - red);
  if (n == 0 || n >= sizeof name)
    return false;
  memcpy(name, red, n);
  name[n] = '\0';
  int r = smr_reduction_from_name(name);
  if (!reduction_storable(r))
    return false;
  *base = smr_xstrdup(slash + 1);
  *reduction = r;
  *abs = is_abs;
  return true;
}

char *smr_reduction_tensor_name(const char *base, int reduction, bool abs) {
  if (!base || !reduction_storable(reduction))
    return NULL;
  return smr_xasprintf(REDUCTION_PREFIX "%s%s/%s", abs ? "abs_" : "",
                       smr_reduction_name((smr_reduction)reduction), base);
}
