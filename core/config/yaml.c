/* yaml.c - YAML text to an smr_node tree (libyaml event API), with the
 * position of every value and key, and the node helpers of node.h.
 *
 * Only the part of YAML a configuration file needs is accepted: one
 * document, no anchors/aliases, no custom tags, scalar keys, bounded depth
 * and size.  Plain scalars are typed as in the YAML 1.2 core schema so that
 * `10` is an integer and `"10"` a string. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/node.h"

#define YAML_MAX_BYTES (4u << 20)
#define YAML_MAX_DEPTH 64
/* A rules file has a few hundred values; this keeps memory bounded
 * (~40 MiB of nodes) even for a 4 MiB file made of tiny values. */
#define YAML_MAX_NODES 250000

/* ---- node helpers ------------------------------------------------------ */

const smr_node *smr_node_get(const smr_node *map, const char *key) {
  if (!map || map->type != SMR_NODE_MAP || !key)
    return NULL;
  for (size_t k = 0; k < map->n; k++)
    if (strcmp(map->keys[k], key) == 0)
      return map->items[k];
  return NULL;
}

const smr_node *smr_node_value(const smr_node *map, const char *key) {
  const smr_node *v = smr_node_get(map, key);
  return v && v->type != SMR_NODE_NULL ? v : NULL;
}

const char *smr_node_type_name(smr_node_type t) {
  switch (t) {
  case SMR_NODE_NULL:
    return "null";
  case SMR_NODE_BOOL:
    return "boolean";
  case SMR_NODE_INT:
    return "integer";
  case SMR_NODE_FLOAT:
    return "number";
  case SMR_NODE_STRING:
    return "string";
  case SMR_NODE_LIST:
    return "list";
  case SMR_NODE_MAP:
    return "map";
  }
  return "unknown";
}

/* Recursion is bounded by YAML_MAX_DEPTH for parsed trees. */
void smr_node_free(smr_node *n) {
  if (!n)
    return;
  for (size_t k = 0; k < n->n; k++) {
    smr_node_free(n->items[k]);
    if (n->keys)
      free(n->keys[k]);
  }
  free(n->items);
  free(n->keys);
  free(n->key_lines);
  free(n->key_cols);
  free(n->s);
  free(n);
}

/* ---- plain scalar typing (YAML 1.2 core schema) ------------------------ */

static bool is_one_of(const char *s, const char *const *words) {
  for (; *words; words++)
    if (strcmp(s, *words) == 0)
      return true;
  return false;
}

static bool is_digits(const char **p) {
  const char *s = *p;
  while (**p >= '0' && **p <= '9')
    (*p)++;
  return *p > s;
}

/* [-+]?[0-9]+ */
static bool is_decimal_int(const char *s) {
  if (*s == '-' || *s == '+')
    s++;
  return is_digits(&s) && *s == '\0';
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool is_decimal_float(const char *s) {
  if (*s == '-' || *s == '+')
    s++;
  if (*s == '.') {
    s++;
    if (!is_digits(&s))
      return false;
  } else {
    if (!is_digits(&s))
      return false;
    if (*s == '.') {
      s++;
      is_digits(&s);
    }
  }
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '-' || *s == '+')
      s++;
    if (!is_digits(&s))
      return false;
  }
  return *s == '\0';
}

static bool special_float(const char *s, double *out) {
  static const char *const inf[] = {".inf", ".Inf", ".INF", NULL};
  static const char *const nan_words[] = {".nan", ".NaN", ".NAN", NULL};
  const char *t = (*s == '-' || *s == '+') ? s + 1 : s;
  if (is_one_of(t, inf)) {
    *out = *s == '-' ? -INFINITY : INFINITY;
    return true;
  }
  if (is_one_of(s, nan_words)) {
    *out = NAN;
    return true;
  }
  return false;
}

/* Sets the type of a plain scalar from its text; 0, or -1 when an integer
 * does not fit in 64 bits. */
static int type_plain_scalar(smr_node *n) {
  static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
  static const char *const trues[] = {"true", "True", "TRUE", NULL};
  static const char *const falses[] = {"false", "False", "FALSE", NULL};
  const char *s = n->s;
  if (is_one_of(s, nulls)) {
    n->type = SMR_NODE_NULL;
  } else if (is_one_of(s, trues) || is_one_of(s, falses)) {
    n->type = SMR_NODE_BOOL;
    n->b = is_one_of(s, trues);
  } else if (is_decimal_int(s)) {
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE)
      return -1;
    n->type = SMR_NODE_INT;
    n->i = v;
    n->f = (double)v;
  } else if (is_decimal_float(s)) {
    n->type = SMR_NODE_FLOAT;
    n->f = strtod(s, NULL);
  } else if (special_float(s, &n->f)) {
    n->type = SMR_NODE_FLOAT;
  } else {
    n->type = SMR_NODE_STRING;
  }
  return 0;
}

/* ---- the builder ------------------------------------------------------- */

typedef struct frame {
  smr_node *node;
  size_t cap;
  char *key; /* a map key waiting for its value */
  int key_line, key_col;
} frame;

typedef struct builder {
  const char *name;
  smr_error *err;
  frame stack[YAML_MAX_DEPTH];
  int depth;
  size_t n_nodes;
  int n_documents;
  smr_node *root;
} builder;

static int fail_at(builder *b, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(builder *b, yaml_mark_t m, const char *fmt, ...) {
  char what[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return smr_error_set(b->err, SMR_ERR_USAGE, b->name, -1,
                       "line %zu, column %zu: %s", m.line + 1, m.column + 1,
                       what);
}

static smr_node *new_node(builder *b, smr_node_type t, yaml_mark_t m) {
  if (b->n_nodes >= YAML_MAX_NODES)
    return NULL;
  b->n_nodes++;
  smr_node *n = smr_xcalloc(1, sizeof *n);
  n->type = t;
  n->line = (int)m.line + 1;
  n->col = (int)m.column + 1;
  return n;
}

static void map_append(frame *f, smr_node *value) {
  smr_node *m = f->node;
  if (m->n == f->cap) {
    f->cap = f->cap ? f->cap * 2 : 4;
    m->items = smr_xrealloc(m->items, f->cap * sizeof *m->items);
    if (m->type == SMR_NODE_MAP) {
      m->keys = smr_xrealloc(m->keys, f->cap * sizeof *m->keys);
      m->key_lines = smr_xrealloc(m->key_lines, f->cap * sizeof(int));
      m->key_cols = smr_xrealloc(m->key_cols, f->cap * sizeof(int));
    }
  }
  if (m->type == SMR_NODE_MAP) {
    m->keys[m->n] = f->key;
    m->key_lines[m->n] = f->key_line;
    m->key_cols[m->n] = f->key_col;
    f->key = NULL;
  }
  m->items[m->n++] = value;
}

/* Attach a finished value to its parent (or make it the root). */
static void attach(builder *b, smr_node *n) {
  if (b->depth == 0) {
    b->root = n;
    return;
  }
  map_append(&b->stack[b->depth - 1], n);
}

/* True when the next scalar of the innermost map is a key. */
static bool expecting_key(const builder *b) {
  if (b->depth == 0)
    return false;
  const frame *f = &b->stack[b->depth - 1];
  return f->node->type == SMR_NODE_MAP && !f->key;
}

static int check_anchor_tag(builder *b, const yaml_event_t *ev,
                            const yaml_char_t *anchor, const yaml_char_t *tag,
                            bool scalar) {
  if (anchor)
    return fail_at(b, ev->start_mark,
                   "aliases are not supported (anchor '&%s'); repeat the "
                   "value instead",
                   (const char *)anchor);
  if (!tag)
    return SMR_OK;
  const char *t = (const char *)tag;
  bool ok = strcmp(t, "!") == 0 || (scalar && strcmp(t, YAML_STR_TAG) == 0) ||
            (!scalar &&
             (strcmp(t, YAML_MAP_TAG) == 0 || strcmp(t, YAML_SEQ_TAG) == 0));
  if (!ok)
    return fail_at(b, ev->start_mark,
                   "YAML tags are not supported ('%s'); quote the value to "
                   "make it a string",
                   t);
  return SMR_OK;
}

static int on_scalar(builder *b, const yaml_event_t *ev) {
  const yaml_char_t *anchor = ev->data.scalar.anchor;
  const yaml_char_t *tag = ev->data.scalar.tag;
  int rc = check_anchor_tag(b, ev, anchor, tag, true);
  if (rc)
    return rc;
  const char *text = (const char *)ev->data.scalar.value;
  size_t len = ev->data.scalar.length;
  if (memchr(text, '\0', len))
    return fail_at(b, ev->start_mark,
                   "a NUL character in a value is not "
                   "supported");
  if (expecting_key(b)) {
    frame *f = &b->stack[b->depth - 1];
    f->key = smr_xstrndup(text, len);
    f->key_line = (int)ev->start_mark.line + 1;
    f->key_col = (int)ev->start_mark.column + 1;
    return SMR_OK;
  }
  smr_node *n = new_node(b, SMR_NODE_STRING, ev->start_mark);
  if (!n)
    return fail_at(b, ev->start_mark, "too many values (the limit is %d)",
                   YAML_MAX_NODES);
  n->s = smr_xstrndup(text, len);
  bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !tag;
  n->quoted = !plain;
  if (plain && type_plain_scalar(n) != 0) {
    smr_node_free(n);
    return fail_at(b, ev->start_mark, "integer %s does not fit in 64 bits",
                   text);
  }
  attach(b, n);
  return SMR_OK;
}

static int on_start(builder *b, const yaml_event_t *ev, smr_node_type t) {
  bool is_map = t == SMR_NODE_MAP;
  const yaml_char_t *anchor =
      is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
  const yaml_char_t *tag =
      is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag;
  int rc = check_anchor_tag(b, ev, anchor, tag, false);
  if (rc)
    return rc;
  if (expecting_key(b))
    return fail_at(b, ev->start_mark,
                   "a map key must be a plain value, not a %s",
                   is_map ? "map" : "list");
  if (b->depth >= YAML_MAX_DEPTH)
    return fail_at(b, ev->start_mark,
                   "values are nested too deeply (more than %d levels)",
                   YAML_MAX_DEPTH);
  smr_node *n = new_node(b, t, ev->start_mark);
  if (!n)
    return fail_at(b, ev->start_mark, "too many values (the limit is %d)",
                   YAML_MAX_NODES);
  frame *f = &b->stack[b->depth++];
  memset(f, 0, sizeof *f);
  f->node = n;
  return SMR_OK;
}

typedef struct key_ref {
  const char *key;
  size_t index;
} key_ref;

static int cmp_key_ref(const void *pa, const void *pb) {
  const key_ref *a = pa, *b = pb;
  int c = strcmp(a->key, b->key);
  if (c)
    return c;
  return (a->index > b->index) - (a->index < b->index);
}

/* Finds the duplicate key whose second occurrence comes first; sorting keeps
 * this O(n log n) for maps with many keys. */
static int check_duplicate_keys(builder *b, const smr_node *m) {
  if (m->n < 2)
    return SMR_OK;
  key_ref *refs = smr_xmalloc(m->n * sizeof *refs);
  for (size_t k = 0; k < m->n; k++)
    refs[k] = (key_ref){m->keys[k], k};
  qsort(refs, m->n, sizeof *refs, cmp_key_ref);
  size_t first = 0, second = SIZE_MAX;
  for (size_t k = 1; k < m->n; k++)
    if (strcmp(refs[k].key, refs[k - 1].key) == 0 &&
        (k < 2 || strcmp(refs[k].key, refs[k - 2].key) != 0) &&
        refs[k].index < second) {
      first = refs[k - 1].index;
      second = refs[k].index;
    }
  free(refs);
  if (second == SIZE_MAX)
    return SMR_OK;
  return smr_error_set(b->err, SMR_ERR_USAGE, b->name, -1,
                       "line %d, column %d: duplicate key '%s' (first at "
                       "line %d, column %d)",
                       m->key_lines[second], m->key_cols[second],
                       m->keys[second], m->key_lines[first],
                       m->key_cols[first]);
}

static int on_end(builder *b) {
  frame *f = &b->stack[--b->depth];
  smr_node *n = f->node;
  free(f->key); /* only set on malformed input libyaml already rejects */
  f->key = NULL;
  int rc = n->type == SMR_NODE_MAP ? check_duplicate_keys(b, n) : SMR_OK;
  attach(b, n);
  return rc;
}

static int on_event(builder *b, const yaml_event_t *ev) {
  switch (ev->type) {
  case YAML_DOCUMENT_START_EVENT:
    if (++b->n_documents > 1)
      return fail_at(b, ev->start_mark,
                     "more than one YAML document (expected exactly one)");
    return SMR_OK;
  case YAML_ALIAS_EVENT:
    return fail_at(b, ev->start_mark,
                   "aliases are not supported ('*%s'); repeat the value "
                   "instead",
                   (const char *)ev->data.alias.anchor);
  case YAML_SCALAR_EVENT:
    return on_scalar(b, ev);
  case YAML_SEQUENCE_START_EVENT:
    return on_start(b, ev, SMR_NODE_LIST);
  case YAML_MAPPING_START_EVENT:
    return on_start(b, ev, SMR_NODE_MAP);
  case YAML_SEQUENCE_END_EVENT:
  case YAML_MAPPING_END_EVENT:
    return on_end(b);
  default:
    return SMR_OK;
  }
}

/* libyaml reader errors carry a byte offset instead of a mark. */
static yaml_mark_t mark_of_offset(const char *text, size_t len, size_t off) {
  yaml_mark_t m = {0, 0, 0};
  for (size_t k = 0; k < off && k < len; k++) {
    if (text[k] == '\n') {
      m.line++;
      m.column = 0;
    } else if (((unsigned char)text[k] & 0xC0) != 0x80) {
      m.column++;
    }
  }
  return m;
}

static int syntax_error(builder *b, const yaml_parser_t *p, const char *text,
                        size_t len) {
  if (p->error == YAML_MEMORY_ERROR)
    return smr_error_set(b->err, SMR_ERR_NOMEM, b->name, -1,
                         "out of memory while parsing YAML");
  yaml_mark_t m = p->error == YAML_READER_ERROR
                      ? mark_of_offset(text, len, p->problem_offset)
                      : p->problem_mark;
  const char *problem = p->problem ? p->problem : "syntax error";
  if (p->problem_mark.index < len && text[p->problem_mark.index] == '\t' &&
      p->error != YAML_READER_ERROR)
    return smr_error_set(b->err, SMR_ERR_USAGE, b->name, -1,
                         "line %zu, column %zu: a tab: YAML indents with "
                         "spaces only (replace the tab by spaces)",
                         m.line + 1, m.column + 1);
  if (p->context && p->error != YAML_READER_ERROR)
    return smr_error_set(b->err, SMR_ERR_USAGE, b->name, -1,
                         "line %zu, column %zu: invalid YAML: %s (%s "
                         "at line %zu, column %zu)",
                         m.line + 1, m.column + 1, problem, p->context,
                         p->context_mark.line + 1, p->context_mark.column + 1);
  return smr_error_set(b->err, SMR_ERR_USAGE, b->name, -1,
                       "line %zu, column %zu: invalid YAML: %s", m.line + 1,
                       m.column + 1, problem);
}

static void builder_discard(builder *b) {
  while (b->depth > 0) {
    frame *f = &b->stack[--b->depth];
    free(f->key);
    smr_node_free(f->node);
  }
  smr_node_free(b->root);
  b->root = NULL;
}

static int run_parser(builder *b, yaml_parser_t *p, const char *yaml,
                      size_t len) {
  for (;;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(p, &ev))
      return syntax_error(b, p, yaml, len);
    int rc = on_event(b, &ev);
    bool done = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
    if (rc)
      return rc;
    if (done)
      return SMR_OK;
  }
}

int smr_yaml_parse(const char *yaml, size_t len, const char *name,
                   smr_node **out, smr_error *err) {
  *out = NULL;
  if (!name)
    name = "<string>";
  if (len > YAML_MAX_BYTES)
    return smr_error_set(err, SMR_ERR_USAGE, name, -1,
                         "the file is %zu bytes, more than the %u allowed", len,
                         YAML_MAX_BYTES);
  builder *b = smr_xcalloc(1, sizeof *b);
  b->name = name;
  b->err = err;
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) {
    free(b);
    return smr_error_set(err, SMR_ERR_NOMEM, name, -1, "out of memory");
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)yaml, len);
  int rc = run_parser(b, &p, yaml, len);
  yaml_parser_delete(&p);
  if (rc == SMR_OK && !b->root) /* an empty file is an empty document */
    b->root = new_node(b, SMR_NODE_NULL, (yaml_mark_t){0, 0, 0});
  if (rc != SMR_OK)
    builder_discard(b);
  else
    *out = b->root;
  free(b);
  return rc;
}
