/* schema.c - validate an smr_node tree against a JSON Schema subset.
 *
 * Keywords: $ref (#/definitions/... or #), type (string or list), enum,
 * const, properties, required, additionalProperties (bool or schema),
 * minProperties, maxProperties, items, minItems, maxItems, pattern,
 * minLength, maxLength, minimum, maximum, allOf, anyOf, oneOf.  Also
 * `title` (how a map is named in messages) and `errorMessage` (ajv-errors
 * style: {"<keyword>": "text"}) so the schema can carry user-facing wording.
 *
 * The first violation in document order wins; a message always says where
 * (line/column of the node) and what was expected. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/regex.h"
#include "base/suggest.h"
#include "config/config.h"

#define LABEL_MAX 128
#define MAX_SCHEMA_RECURSION 512

typedef struct verr {
  int line, col;
  int depth;       /* node depth of the offending node */
  bool type_error; /* the node has the wrong type */
  bool schema_bug; /* the schema itself is broken */
  char msg[SMR_ERR_MSG_MAX];
} verr;

#define REGEX_CACHE 16

typedef struct vctx {
  const cJSON *root;
  int recursion;
  /* compiled patterns, keyed by the schema string they came from */
  const char *patterns[REGEX_CACHE];
  smr_regex *compiled[REGEX_CACHE];
  int n_compiled;
} vctx;

static bool validate(vctx *c, const cJSON *s, const smr_node *n,
                     const char *label, int depth, verr *e);

/* ---- messages ---------------------------------------------------------- */

static bool fail(verr *e, int line, int col, int depth, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static bool fail(verr *e, int line, int col, int depth, const char *fmt, ...) {
  e->line = line;
  e->col = col;
  e->depth = depth;
  e->type_error = false;
  e->schema_bug = false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return false;
}

#define FAIL_AT(n, ...) fail(e, (n)->line, (n)->col, depth, __VA_ARGS__)

static bool schema_bug(verr *e, const smr_node *n, const char *what) {
  fail(e, n->line, n->col, 0, "internal error: the schema is invalid (%s)",
       what);
  e->schema_bug = true;
  return false;
}

/* A scalar's text, shortened for messages. */
static void short_text(const smr_node *n, char *buf, size_t size) {
  const char *s = n->s ? n->s : "";
  if (strlen(s) < 48)
    snprintf(buf, size, "%s", s);
  else
    snprintf(buf, size, "%.44s...", s);
}

/* "a string ('ten')", "an integer (5)", "a list", ... */
static void describe(const smr_node *n, char *buf, size_t size) {
  char text[64];
  short_text(n, text, sizeof text);
  switch (n->type) {
  case SMR_NODE_NULL:
    snprintf(buf, size, "nothing (null)");
    break;
  case SMR_NODE_BOOL:
    snprintf(buf, size, "a boolean (%s)", text);
    break;
  case SMR_NODE_INT:
    snprintf(buf, size, "an integer (%s)", text);
    break;
  case SMR_NODE_FLOAT:
    snprintf(buf, size, "a number (%s)", text);
    break;
  case SMR_NODE_STRING:
    snprintf(buf, size, "a string ('%s')", text);
    break;
  case SMR_NODE_LIST:
    snprintf(buf, size, "a list");
    break;
  case SMR_NODE_MAP:
    snprintf(buf, size, "a map");
    break;
  }
}

static const char *type_phrase(const char *t) {
  if (strcmp(t, "object") == 0)
    return "a map";
  if (strcmp(t, "array") == 0)
    return "a list";
  if (strcmp(t, "string") == 0)
    return "a string";
  if (strcmp(t, "integer") == 0)
    return "an integer";
  if (strcmp(t, "number") == 0)
    return "a number";
  if (strcmp(t, "boolean") == 0)
    return "true or false";
  if (strcmp(t, "null") == 0)
    return "nothing (null)";
  return t;
}

/* The text of errorMessage.<keyword>, or NULL. */
static const char *custom_message(const cJSON *s, const char *keyword) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "errorMessage");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, keyword);
  return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* How a map is named in messages: its title, else its key. */
static void map_name(const cJSON *s, const char *label, char *buf,
                     size_t size) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "title");
  if (cJSON_IsString(t))
    snprintf(buf, size, "%s", t->valuestring);
  else
    snprintf(buf, size, "'%s'", label);
}

/* ---- type, enum, const ------------------------------------------------- */

static bool type_matches(const char *t, const smr_node *n) {
  switch (n->type) {
  case SMR_NODE_NULL:
    return strcmp(t, "null") == 0;
  case SMR_NODE_BOOL:
    return strcmp(t, "boolean") == 0;
  case SMR_NODE_INT:
    return strcmp(t, "integer") == 0 || strcmp(t, "number") == 0;
  case SMR_NODE_FLOAT:
    return strcmp(t, "number") == 0;
  case SMR_NODE_STRING:
    return strcmp(t, "string") == 0;
  case SMR_NODE_LIST:
    return strcmp(t, "array") == 0;
  case SMR_NODE_MAP:
    return strcmp(t, "object") == 0;
  }
  return false;
}

static void expected_types(const cJSON *type, char *buf, size_t size) {
  if (cJSON_IsString(type)) {
    snprintf(buf, size, "%s", type_phrase(type->valuestring));
    return;
  }
  buf[0] = '\0';
  int count = cJSON_GetArraySize(type), k = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, type) {
    if (!cJSON_IsString(t))
      continue;
    size_t used = strlen(buf);
    const char *sep = k == 0 ? "" : (k == count - 1 ? " or " : ", ");
    snprintf(buf + used, size - used, "%s%s", sep, type_phrase(t->valuestring));
    k++;
  }
}

static bool check_type(const cJSON *s, const smr_node *n, const char *label,
                       int depth, verr *e) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
  if (!type)
    return true;
  const cJSON *t;
  if (cJSON_IsString(type) && type_matches(type->valuestring, n))
    return true;
  cJSON_ArrayForEach(t, type) {
    if (cJSON_IsString(t) && type_matches(t->valuestring, n))
      return true;
  }
  char want[160], got[96];
  expected_types(type, want, sizeof want);
  describe(n, got, sizeof got);
  bool hint = n->type != SMR_NODE_NULL && n->type != SMR_NODE_LIST &&
              n->type != SMR_NODE_MAP && strstr(want, "a string");
  FAIL_AT(n, "%s: expected %s, got %s%s", label, want, got,
          hint ? "; quote it to make it a string" : "");
  e->type_error = true;
  return false;
}

static bool json_equals_node(const cJSON *v, const smr_node *n) {
  if (cJSON_IsString(v))
    return n->type == SMR_NODE_STRING && strcmp(v->valuestring, n->s) == 0;
  if (cJSON_IsNumber(v))
    return (n->type == SMR_NODE_INT || n->type == SMR_NODE_FLOAT) &&
           n->f == v->valuedouble;
  if (cJSON_IsBool(v))
    return n->type == SMR_NODE_BOOL && n->b == cJSON_IsTrue(v);
  if (cJSON_IsNull(v))
    return n->type == SMR_NODE_NULL;
  return false;
}

static void json_text(const cJSON *v, char *buf, size_t size) {
  if (cJSON_IsString(v))
    snprintf(buf, size, "%s", v->valuestring);
  else if (cJSON_IsNumber(v))
    snprintf(buf, size, "%g", v->valuedouble);
  else if (cJSON_IsBool(v))
    snprintf(buf, size, "%s", cJSON_IsTrue(v) ? "true" : "false");
  else
    snprintf(buf, size, "null");
}

static bool check_enum_const(const cJSON *s, const smr_node *n,
                             const char *label, int depth, verr *e) {
  char got[96], want[256] = "";
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(s, "const");
  if (c && !json_equals_node(c, n)) {
    json_text(c, want, sizeof want);
    describe(n, got, sizeof got);
    return FAIL_AT(n, "%s: expected %s, got %s", label, want, got);
  }
  const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
  if (!cJSON_IsArray(en))
    return true;
  const cJSON *v;
  cJSON_ArrayForEach(v, en) {
    if (json_equals_node(v, n))
      return true;
  }
  cJSON_ArrayForEach(v, en) {
    char one[64];
    json_text(v, one, sizeof one);
    size_t used = strlen(want);
    snprintf(want + used, sizeof want - used, "%s%s", used ? ", " : "", one);
  }
  describe(n, got, sizeof got);
  return FAIL_AT(n, "%s: expected one of: %s; got %s", label, want, got);
}

/* ---- scalars ----------------------------------------------------------- */

/* Patterns are compiled once per validation: a long list of strings must
 * not compile the same pattern for each item. */
static smr_regex *compiled_pattern(vctx *c, const char *pattern) {
  for (int k = 0; k < c->n_compiled; k++)
    if (c->patterns[k] == pattern)
      return c->compiled[k];
  smr_regex *re;
  smr_error rerr;
  if (smr_regex_compile(pattern, &re, &rerr) != SMR_OK)
    return NULL;
  if (c->n_compiled == REGEX_CACHE) { /* our schema has far fewer */
    for (int k = 0; k < c->n_compiled; k++)
      smr_regex_free(c->compiled[k]);
    c->n_compiled = 0;
  }
  c->patterns[c->n_compiled] = pattern;
  c->compiled[c->n_compiled++] = re;
  return re;
}

static bool check_string(vctx *c, const cJSON *s, const smr_node *n,
                         const char *label, int depth, verr *e) {
  size_t len = strlen(n->s);
  const cJSON *min = cJSON_GetObjectItemCaseSensitive(s, "minLength");
  const cJSON *max = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
  if (cJSON_IsNumber(min) && (double)len < min->valuedouble)
    return len == 0 ? FAIL_AT(n, "%s: expected a non-empty string", label)
                    : FAIL_AT(n, "%s: expected at least %d characters", label,
                              min->valueint);
  if (cJSON_IsNumber(max) && (double)len > max->valuedouble)
    return FAIL_AT(n, "%s: expected at most %d characters", label,
                   max->valueint);
  const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
  if (!cJSON_IsString(pat))
    return true;
  smr_regex *re = compiled_pattern(c, pat->valuestring);
  if (!re)
    return schema_bug(e, n, "bad pattern");
  if (smr_regex_search(re, n->s))
    return true;
  char text[64];
  short_text(n, text, sizeof text);
  const char *why = custom_message(s, "pattern");
  if (why)
    return FAIL_AT(n, "%s: '%s' is not valid (%s)", label, text, why);
  return FAIL_AT(n, "%s: '%s' does not match the pattern %s", label, text,
                 pat->valuestring);
}

static bool check_number(const cJSON *s, const smr_node *n, const char *label,
                         int depth, verr *e) {
  double v = n->type == SMR_NODE_INT ? (double)n->i : n->f;
  const cJSON *min = cJSON_GetObjectItemCaseSensitive(s, "minimum");
  const cJSON *max = cJSON_GetObjectItemCaseSensitive(s, "maximum");
  bool is_int = n->type == SMR_NODE_INT;
  if (cJSON_IsNumber(min) && !(v >= min->valuedouble))
    return FAIL_AT(n, "%s: expected %s >= %g, got %s", label,
                   is_int ? "an integer" : "a number", min->valuedouble, n->s);
  if (cJSON_IsNumber(max) && !(v <= max->valuedouble))
    return FAIL_AT(n, "%s: expected %s <= %g, got %s", label,
                   is_int ? "an integer" : "a number", max->valuedouble, n->s);
  return true;
}

/* ---- lists ------------------------------------------------------------- */

static bool check_list(vctx *c, const cJSON *s, const smr_node *n,
                       const char *label, int depth, verr *e) {
  const cJSON *min = cJSON_GetObjectItemCaseSensitive(s, "minItems");
  const cJSON *max = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
  if (cJSON_IsNumber(min) && (double)n->n < min->valuedouble) {
    const char *why = custom_message(s, "minItems");
    if (why)
      return FAIL_AT(n, "%s: %s", label, why);
    return FAIL_AT(n, "%s: expected at least %d item%s, got %zu", label,
                   min->valueint, min->valueint == 1 ? "" : "s", n->n);
  }
  if (cJSON_IsNumber(max) && (double)n->n > max->valuedouble)
    return FAIL_AT(n, "%s: expected at most %d item%s, got %zu", label,
                   max->valueint, max->valueint == 1 ? "" : "s", n->n);
  const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
  if (!items)
    return true;
  char item_label[LABEL_MAX];
  snprintf(item_label, sizeof item_label, "%s item", label);
  for (size_t k = 0; k < n->n; k++)
    if (!validate(c, items, n->items[k], item_label, depth + 1, e))
      return false;
  return true;
}

/* ---- maps -------------------------------------------------------------- */

static void property_names(const cJSON *props, char *buf, size_t size) {
  buf[0] = '\0';
  const cJSON *p;
  cJSON_ArrayForEach(p, props) {
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%s%s", used ? ", " : "", p->string);
  }
}

/* ": did you mean 'rules'?" for a misspelt key; for a key where a map
 * has `parameters` (a rule), the likely slip of a parameter written one
 * level too high. */
static void unknown_key_hint(const cJSON *props, const char *key, char *buf,
                             size_t size) {
  const char *names[64];
  size_t n = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, props) {
    if (n < sizeof names / sizeof *names)
      names[n++] = p->string;
  }
  const char *near = smr_suggest(key, names, n);
  buf[0] = '\0';
  if (near)
    snprintf(buf, size, ": did you mean '%s'?", near);
  else if (cJSON_GetObjectItemCaseSensitive(props, "parameters"))
    snprintf(buf, size,
             ": a rule's parameters go under 'parameters:' (parameters: "
             "{%s: ...})",
             key);
}

static bool check_map_entry(vctx *c, const cJSON *s, const smr_node *n,
                            size_t k, const char *label, int depth, verr *e) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  const cJSON *extra =
      cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  const cJSON *sub = cJSON_GetObjectItemCaseSensitive(props, n->keys[k]);
  if (!sub && cJSON_IsFalse(extra)) {
    char where[LABEL_MAX], names[256], hint[320];
    map_name(s, label, where, sizeof where);
    property_names(props, names, sizeof names);
    unknown_key_hint(props, n->keys[k], hint, sizeof hint);
    return fail(e, n->key_lines[k], n->key_cols[k], depth,
                "unknown key '%s' in %s%s (expected one of: %s)", n->keys[k],
                where, hint, names);
  }
  if (!sub && cJSON_IsObject(extra))
    sub = extra;
  if (!sub)
    return true;
  return validate(c, sub, n->items[k], n->keys[k], depth + 1, e);
}

static bool check_map_size(const cJSON *s, const smr_node *n, const char *label,
                           int depth, verr *e) {
  const cJSON *min = cJSON_GetObjectItemCaseSensitive(s, "minProperties");
  const cJSON *max = cJSON_GetObjectItemCaseSensitive(s, "maxProperties");
  bool too_few = cJSON_IsNumber(min) && (double)n->n < min->valuedouble;
  bool too_many = cJSON_IsNumber(max) && (double)n->n > max->valuedouble;
  if (!too_few && !too_many)
    return true;
  if (cJSON_IsNumber(min) && cJSON_IsNumber(max) &&
      min->valuedouble == max->valuedouble)
    return FAIL_AT(n, "%s: expected a map with exactly %d key%s, got %zu",
                   label, min->valueint, min->valueint == 1 ? "" : "s", n->n);
  if (too_few)
    return FAIL_AT(n, "%s: expected a map with at least %d key%s, got %zu",
                   label, min->valueint, min->valueint == 1 ? "" : "s", n->n);
  return FAIL_AT(n, "%s: expected a map with at most %d key%s, got %zu", label,
                 max->valueint, max->valueint == 1 ? "" : "s", n->n);
}

static bool check_map(vctx *c, const cJSON *s, const smr_node *n,
                      const char *label, int depth, verr *e) {
  for (size_t k = 0; k < n->n; k++)
    if (!check_map_entry(c, s, n, k, label, depth, e))
      return false;
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
  const cJSON *r;
  cJSON_ArrayForEach(r, req) {
    if (cJSON_IsString(r) && !smr_node_get(n, r->valuestring)) {
      char where[LABEL_MAX];
      map_name(s, label, where, sizeof where);
      return FAIL_AT(n, "missing required key '%s' in %s", r->valuestring,
                     where);
    }
  }
  return check_map_size(s, n, label, depth, e);
}

/* ---- combinators ------------------------------------------------------- */

/* How useful a failed branch's error is: an error deeper in the value means
 * the branch recognised the value's shape; a wrong type means it did not. */
static int branch_score(const verr *b, int depth) {
  if (b->depth > depth)
    return 1 + (b->depth - depth);
  return b->type_error ? 0 : 1;
}

static bool check_branches(vctx *c, const cJSON *s, const char *keyword,
                           const smr_node *n, const char *label, int depth,
                           verr *e) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(s, keyword);
  if (!cJSON_IsArray(list))
    return true;
  bool one_of = strcmp(keyword, "oneOf") == 0;
  int passed = 0, best_score = -1;
  verr best, tmp;
  memset(&best, 0, sizeof best);
  const cJSON *branch;
  cJSON_ArrayForEach(branch, list) {
    if (validate(c, branch, n, label, depth, &tmp)) {
      passed++;
      continue;
    }
    if (tmp.schema_bug) {
      *e = tmp;
      return false;
    }
    int score = branch_score(&tmp, depth);
    if (score > best_score) {
      best_score = score;
      best = tmp;
    }
  }
  const char *why = custom_message(s, keyword);
  if (passed == 1 || (passed > 1 && !one_of))
    return true;
  if (passed > 1)
    return why ? FAIL_AT(n, "%s", why)
               : FAIL_AT(n, "%s: matches more than one allowed form", label);
  if (best_score < 0)
    return FAIL_AT(n, "%s: no allowed form", label);
  if (why && best_score <= 1)
    return FAIL_AT(n, "%s", why);
  *e = best;
  return false;
}

static bool check_all_of(vctx *c, const cJSON *s, const smr_node *n,
                         const char *label, int depth, verr *e) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(s, "allOf");
  const cJSON *branch;
  cJSON_ArrayForEach(branch, list) {
    if (!validate(c, branch, n, label, depth, e))
      return false;
  }
  return true;
}

/* ---- dispatch ---------------------------------------------------------- */

static const cJSON *resolve_ref(vctx *c, const char *ref) {
  if (strcmp(ref, "#") == 0)
    return c->root;
  const char *prefix = "#/definitions/";
  if (strncmp(ref, prefix, strlen(prefix)) != 0)
    return NULL;
  const cJSON *defs = cJSON_GetObjectItemCaseSensitive(c->root, "definitions");
  return cJSON_GetObjectItemCaseSensitive(defs, ref + strlen(prefix));
}

static bool check_by_type(vctx *c, const cJSON *s, const smr_node *n,
                          const char *label, int depth, verr *e) {
  switch (n->type) {
  case SMR_NODE_MAP:
    return check_map(c, s, n, label, depth, e);
  case SMR_NODE_LIST:
    return check_list(c, s, n, label, depth, e);
  case SMR_NODE_STRING:
    return check_string(c, s, n, label, depth, e);
  case SMR_NODE_INT:
  case SMR_NODE_FLOAT:
    return check_number(s, n, label, depth, e);
  default:
    return true;
  }
}

static bool validate_schema(vctx *c, const cJSON *s, const smr_node *n,
                            const char *label, int depth, verr *e) {
  if (cJSON_IsTrue(s))
    return true;
  if (cJSON_IsFalse(s))
    return FAIL_AT(n, "%s: no value is allowed here", label);
  if (!cJSON_IsObject(s))
    return schema_bug(e, n, "a schema must be an object");
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  if (cJSON_IsString(ref)) {
    const cJSON *target = resolve_ref(c, ref->valuestring);
    if (!target)
      return schema_bug(e, n, "unresolved $ref");
    return validate(c, target, n, label, depth, e);
  }
  return check_type(s, n, label, depth, e) &&
         check_enum_const(s, n, label, depth, e) &&
         check_by_type(c, s, n, label, depth, e) &&
         check_all_of(c, s, n, label, depth, e) &&
         check_branches(c, s, "oneOf", n, label, depth, e) &&
         check_branches(c, s, "anyOf", n, label, depth, e);
}

/* Guards against $ref cycles that do not descend into the value. */
static bool validate(vctx *c, const cJSON *s, const smr_node *n,
                     const char *label, int depth, verr *e) {
  if (++c->recursion > MAX_SCHEMA_RECURSION) {
    c->recursion--;
    return schema_bug(e, n, "$ref recursion too deep");
  }
  bool ok = validate_schema(c, s, n, label, depth, e);
  c->recursion--;
  return ok;
}

int smr_schema_validate(const char *schema_json, const smr_node *root,
                        const char *name, smr_error *err) {
  if (!name)
    name = "<string>";
  cJSON *schema = schema_json ? cJSON_Parse(schema_json) : NULL;
  if (!schema)
    return smr_error_set(err, SMR_ERR_USAGE, name, -1,
                         "internal error: the schema is not valid JSON");
  vctx c;
  memset(&c, 0, sizeof c);
  c.root = schema;
  verr e;
  memset(&e, 0, sizeof e);
  bool ok = validate(&c, schema, root, "configuration", 0, &e);
  for (int k = 0; k < c.n_compiled; k++)
    smr_regex_free(c.compiled[k]);
  cJSON_Delete(schema);
  if (ok)
    return SMR_OK;
  if (e.schema_bug)
    return smr_error_set(err, SMR_ERR_USAGE, name, -1, "%s", e.msg);
  return smr_error_set(err, SMR_ERR_USAGE, name, -1, "line %d, column %d: %s",
                       e.line, e.col, e.msg);
}
