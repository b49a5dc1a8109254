/* smrules/json.h - the one JSON value model of smrules: values built,
 * read, written and parsed.
 *
 * One source, core/base/json.c, compiled into the host and into the rule
 * kit (libsmrules-rulekit.a), so a plugin has the same model: the host's
 * report objects (host/report_json.c, api->json_* in smrules.h) are
 * objects of it, and a rule that runs other rules (ProfilerReport) reads
 * their reports back with it.  A plugin's smr_json values are its own: an
 * smrules_json handle of the host is reached through api->json_* only
 * (its text, api->json_text, parses back with smr_json_parse).
 *
 * Objects keep their members in insertion order (Python dicts do, and the
 * reference reports are Python dicts).  smr_json_add appends a member even
 * when the key is already there (the host's report builders always have);
 * smr_json_set replaces the value of an existing member in place, as a
 * Python dict assignment does.  A lookup finds the last member of a key;
 * an object of many members is looked up by hashing (so one object is not
 * for readers on several threads at once).
 *
 * Numbers are written as Python's repr() writes a float (shortest digits
 * that read back to the same double: "1.0", "0.1", "1e-05", "1e+16"),
 * integers as integers, non-finite doubles as null (JSON has no NaN).
 * Strings are always written as valid JSON and valid UTF-8, whatever their
 * bytes: controls are escaped and a byte that does not begin a valid
 * UTF-8 sequence becomes U+FFFD.  The compact style writes \n, \r and \t
 * as such and escapes DEL; the spaced one writes every control as \u00XX
 * (as ProfilerReport's files always have).
 *
 * Allocation failure aborts: the model holds reports a rule builds, and
 * the parser bounds what untrusted text may make it allocate
 * (smr_json_limits).  Names are smr_json_*: the model is the core's
 * (core/base/json.c) before it is the SDK's. */
#ifndef SMR_JSON_H
#define SMR_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum smr_json_type {
  SMR_JSON_NULL,
  SMR_JSON_BOOL,
  SMR_JSON_INT, /* int64 */
  SMR_JSON_NUM, /* double */
  SMR_JSON_STR,
  SMR_JSON_RAW, /* JSON text written as is (pre-encoded by its producer) */
  SMR_JSON_ARR,
  SMR_JSON_OBJ
} smr_json_type;

typedef struct smr_json smr_json;

/* ---------------------------------------------------------- building */

smr_json *smr_json_obj_new(void);
smr_json *smr_json_arr_new(void);
/* Frees v and everything below it (NULL is fine). */
void smr_json_free(smr_json *v);
/* Removes every member of an object or item of an array. */
void smr_json_clear(smr_json *v);

/* Object members (owned by `o`). */
void smr_json_add_null(smr_json *o, const char *key);
void smr_json_add_bool(smr_json *o, const char *key, bool v);
void smr_json_add_int(smr_json *o, const char *key, int64_t v);
void smr_json_add_num(smr_json *o, const char *key, double v);
/* A NULL string is added as null. */
void smr_json_add_str(smr_json *o, const char *key, const char *v);
/* A NULL or empty text is added as null. */
void smr_json_add_raw(smr_json *o, const char *key, const char *json);
/* Arrays of numbers (non-finite doubles are written as null) and strings. */
void smr_json_add_nums(smr_json *o, const char *key, const double *v, size_t n);
void smr_json_add_ints(smr_json *o, const char *key, const int64_t *v,
                       size_t n);
void smr_json_add_strs(smr_json *o, const char *key, const char *const *v,
                       size_t n);
smr_json *smr_json_add_obj(smr_json *o, const char *key);
smr_json *smr_json_add_arr(smr_json *o, const char *key);
/* Attaches a value built apart (taken over: do not free it). */
void smr_json_add(smr_json *o, const char *key, smr_json *v);
/* Python's o[key] = v: replaces the value of the last member named key,
 * where it stands, or appends; `v` is taken over. */
void smr_json_set(smr_json *o, const char *key, smr_json *v);
/* The object member key of o: the last member of that key when it is an
 * object, else a new empty object set in its place (or appended). */
smr_json *smr_json_obj_at(smr_json *o, const char *key);
/* Detaches the last member named key and hands it over (the caller frees
 * it); NULL when there is none. */
smr_json *smr_json_take(smr_json *o, const char *key);
/* Removes every member named key; whether there was one. */
bool smr_json_del(smr_json *o, const char *key);

/* Scalar values, to attach with smr_json_add/set/push. */
smr_json *smr_json_null(void);
smr_json *smr_json_bool(bool v);
smr_json *smr_json_int(int64_t v);
smr_json *smr_json_num(double v);
smr_json *smr_json_str(const char *v);
smr_json *smr_json_raw(const char *json);
/* Arrays of numbers, held packed (non-finite doubles are written as
 * null). */
smr_json *smr_json_nums(const double *v, size_t n);
smr_json *smr_json_ints(const int64_t *v, size_t n);
/* Appends an item to an array (taken over). */
void smr_json_push(smr_json *a, smr_json *v);

/* ----------------------------------------------------------- reading */

smr_json_type smr_json_type_of(const smr_json *v);
/* The last member named key of an object; NULL when absent or `o` is not
 * an object. */
const smr_json *smr_json_get(const smr_json *o, const char *key);
/* smr_json_path(o, "a", "b", NULL): nested smr_json_get. */
const smr_json *smr_json_path(const smr_json *o, ...);
/* Members of an object, items of an array, 0 for anything else. */
size_t smr_json_len(const smr_json *v);
/* Item or member i (NULL past the end), and a member's key. */
const smr_json *smr_json_at(const smr_json *v, size_t i);
const char *smr_json_key(const smr_json *member);
/* A number as a double: INT, NUM, BOOL (0/1), or RAW text holding one;
 * false otherwise. */
bool smr_json_number(const smr_json *v, double *out);
/* The number member key of o, or dflt. */
double smr_json_num_or(const smr_json *o, const char *key, double dflt);
/* Item i of an array as a double (NaN when it is not a number). */
double smr_json_num_at(const smr_json *a, size_t i);
/* The text of a STR or RAW value, NULL for anything else. */
const char *smr_json_text_of(const smr_json *v);
bool smr_json_is_obj(const smr_json *v);

/* ----------------------------------------------------------- writing */

/* How values are separated: SMR_JSON_COMPACT ("," and ":", the host's
 * report files) or SMR_JSON_SPACED (", " and ": ", Python's json.dumps,
 * ProfilerReport's files). */
typedef enum smr_json_style {
  SMR_JSON_COMPACT,
  SMR_JSON_SPACED
} smr_json_style;

/* A growing text (s is NUL-terminated once anything was written). */
typedef struct smr_json_buf {
  char *s;
  size_t len, cap;
} smr_json_buf;

void smr_json_write(const smr_json *v, smr_json_style style, smr_json_buf *out);
/* The text of v (malloc'ed). */
char *smr_json_text(const smr_json *v, smr_json_style style);
/* Writes a JSON string literal of n bytes (see the top of this file). */
void smr_json_write_string(smr_json_buf *out, const char *s, size_t n,
                           smr_json_style style);
/* Python's repr() of a double (finite ones; "NaN", "Infinity",
 * "-Infinity" otherwise, which callers writing JSON replace by null). */
void smr_json_fmt_double(double v, char *buf, size_t n);
void smr_json_buf_put(smr_json_buf *b, const char *s, size_t n);

/* ----------------------------------------------------------- parsing */

/* What untrusted text may make the parser build. */
typedef struct smr_json_limits {
  size_t max_bytes; /* input length; 0: no limit */
  int max_depth;    /* nesting of arrays and objects; 0: 64 */
  /* A member of the root object whose value, when it is an object that
   * renders back unchanged, is kept as its text (written in `keep_style`)
   * rather than a tree: for a large member no reader looks into.  A
   * member of objects, arrays, plain ASCII strings, integers and
   * literals is checked on its text and never built as a tree. */
  const char *keep_member;
  smr_json_style keep_style;
} smr_json_limits;

typedef struct smr_json_error {
  size_t offset; /* byte offset of the problem in the text */
  char what[96]; /* what was expected or found */
} smr_json_error;

/* Parses `n` bytes of JSON text (RFC 8259: one value, nothing but white
 * space after it) into a tree; NULL with *err set when it is not valid or
 * goes past a limit.  `limits` and `err` may be NULL. */
smr_json *smr_json_parse(const char *text, size_t n,
                         const smr_json_limits *limits, smr_json_error *err);

#endif
