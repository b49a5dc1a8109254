/* json.c - the JSON value model (smrules/json.h): values, building,
 * lookups (hashed for large objects) and reading.  The writer is
 * json_write.c, the parser json_parse.c.  C library only: the rule kit
 * compiles the model too. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_int.h"

/* ------------------------------------------------------------- memory */

void *smr_json_xrealloc(void *p, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size)
    abort();
  size_t bytes = n * size;
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q)
    abort(); /* json.h: allocation failure aborts */
  return q;
}

char *smr_json_xstrndup(const char *s, size_t n) {
  char *d = smr_json_xrealloc(NULL, n + 1, 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

smr_json *smr_json_node(smr_json_type t) {
  smr_json *v = smr_json_xrealloc(NULL, 1, sizeof *v);
  memset(v, 0, sizeof *v);
  v->type = t;
  return v;
}

static void drop_index(smr_json *o) {
  free(o->index);
  o->index = NULL;
  o->index_cap = 0;
}

void smr_json_clear(smr_json *v) {
  if (!v)
    return;
  drop_index(v);
  for (size_t i = 0; i < v->n && v->kids; i++)
    smr_json_free(v->kids[i]);
  free(v->kids);
  free(v->nums);
  free(v->ints);
  v->kids = NULL;
  v->nums = NULL;
  v->ints = NULL;
  v->n = v->cap = 0;
}

void smr_json_free(smr_json *v) {
  if (!v)
    return;
  smr_json_clear(v);
  free(v->s);
  free(v->key);
  free(v);
}

smr_json *smr_json_obj_new(void) {
  return smr_json_node(SMR_JSON_OBJ);
}
smr_json *smr_json_arr_new(void) {
  return smr_json_node(SMR_JSON_ARR);
}

/* ------------------------------------------------------------ scalars */

smr_json *smr_json_null(void) {
  return smr_json_node(SMR_JSON_NULL);
}
smr_json *smr_json_bool(bool b) {
  smr_json *v = smr_json_node(SMR_JSON_BOOL);
  v->b = b;
  return v;
}
smr_json *smr_json_int(int64_t i) {
  smr_json *v = smr_json_node(SMR_JSON_INT);
  v->i = i;
  return v;
}
smr_json *smr_json_num(double d) {
  smr_json *v = smr_json_node(SMR_JSON_NUM);
  v->d = d;
  return v;
}
smr_json *smr_json_str(const char *s) {
  if (!s)
    return smr_json_null();
  smr_json *v = smr_json_node(SMR_JSON_STR);
  v->s = smr_json_xstrndup(s, strlen(s));
  return v;
}
smr_json *smr_json_raw(const char *json) {
  if (!json || !*json)
    return smr_json_null();
  smr_json *v = smr_json_node(SMR_JSON_RAW);
  v->s = smr_json_xstrndup(json, strlen(json));
  return v;
}

/* ---------------------------------------------------- arrays, objects */

static uint64_t hash_key(const char *k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *k; k++)
    h = (h ^ (unsigned char)*k) * 1099511628211ull;
  return h;
}

/* Member i becomes what its key finds (the last of a key wins). */
static void index_put(smr_json *o, size_t i) {
  size_t mask = o->index_cap - 1;
  for (size_t at = hash_key(o->kids[i]->key) & mask;; at = (at + 1) & mask) {
    uint32_t slot = o->index[at];
    if (!slot || strcmp(o->kids[slot - 1]->key, o->kids[i]->key) == 0) {
      o->index[at] = (uint32_t)(i + 1);
      return;
    }
  }
}

static void index_build(smr_json *o) {
  size_t cap = 64;
  while (cap < 2 * o->n + 2)
    cap *= 2;
  free(o->index);
  o->index = smr_json_xrealloc(NULL, cap, sizeof *o->index);
  memset(o->index, 0, cap * sizeof *o->index);
  o->index_cap = cap;
  for (size_t i = 0; i < o->n; i++)
    index_put(o, i);
}

void smr_json_append(smr_json *c, smr_json *v) {
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 8;
    c->kids = smr_json_xrealloc(c->kids, c->cap, sizeof *c->kids);
  }
  c->kids[c->n++] = v;
  if (c->index && c->n > UINT32_MAX - 1)
    drop_index(c); /* more members than the index counts: linear */
  else if (c->index && 2 * c->n + 2 > c->index_cap)
    index_build(c);
  else if (c->index)
    index_put(c, c->n - 1);
}

void smr_json_push(smr_json *a, smr_json *v) {
  smr_json_append(a, v);
}

void smr_json_add(smr_json *o, const char *key, smr_json *v) {
  free(v->key);
  v->key = smr_json_xstrndup(key ? key : "", key ? strlen(key) : 0);
  smr_json_append(o, v); /* the key is set first: the index reads it */
}

/* The index is a cache of the object's own members, built here even for
 * a const object (so one object is not for concurrent readers). */
static ptrdiff_t find(const smr_json *o, const char *key) {
  if (!o || o->type != SMR_JSON_OBJ)
    return -1;
  if (!o->index && o->n >= INDEX_FROM && o->n < UINT32_MAX)
    index_build((smr_json *)(uintptr_t)o);
  if (!o->index) {
    for (size_t i = o->n; i-- > 0;)
      if (strcmp(o->kids[i]->key, key) == 0)
        return (ptrdiff_t)i;
    return -1;
  }
  size_t mask = o->index_cap - 1;
  for (size_t at = hash_key(key) & mask;; at = (at + 1) & mask) {
    uint32_t slot = o->index[at];
    if (!slot)
      return -1;
    if (strcmp(o->kids[slot - 1]->key, key) == 0)
      return (ptrdiff_t)slot - 1;
  }
}

void smr_json_set(smr_json *o, const char *key, smr_json *v) {
  ptrdiff_t at = find(o, key ? key : "");
  if (at < 0) {
    smr_json_add(o, key, v);
    return;
  }
  v->key = o->kids[at]->key;
  o->kids[at]->key = NULL;
  smr_json_free(o->kids[at]);
  o->kids[at] = v;
}

smr_json *smr_json_obj_at(smr_json *o, const char *key) {
  ptrdiff_t at = find(o, key);
  if (at >= 0 && o->kids[at]->type == SMR_JSON_OBJ)
    return o->kids[at];
  smr_json *v = smr_json_obj_new();
  smr_json_set(o, key, v);
  return v;
}

smr_json *smr_json_take(smr_json *o, const char *key) {
  ptrdiff_t at = find(o, key);
  if (at < 0)
    return NULL;
  smr_json *v = o->kids[at];
  memmove(o->kids + at, o->kids + at + 1,
          (o->n - (size_t)at - 1) * sizeof *o->kids);
  o->n--;
  drop_index(o); /* positions moved: rebuilt on the next lookup */
  free(v->key);
  v->key = NULL;
  return v;
}

bool smr_json_del(smr_json *o, const char *key) {
  bool found = false;
  for (ptrdiff_t at; (at = find(o, key)) >= 0; found = true) {
    smr_json_free(o->kids[at]);
    memmove(o->kids + at, o->kids + at + 1,
            (o->n - (size_t)at - 1) * sizeof *o->kids);
    o->n--;
    drop_index(o); /* positions moved: rebuilt on the next lookup */
  }
  return found;
}

void smr_json_add_null(smr_json *o, const char *key) {
  smr_json_add(o, key, smr_json_null());
}
void smr_json_add_bool(smr_json *o, const char *key, bool v) {
  smr_json_add(o, key, smr_json_bool(v));
}
void smr_json_add_int(smr_json *o, const char *key, int64_t v) {
  smr_json_add(o, key, smr_json_int(v));
}
void smr_json_add_num(smr_json *o, const char *key, double v) {
  smr_json_add(o, key, smr_json_num(v));
}
void smr_json_add_str(smr_json *o, const char *key, const char *v) {
  smr_json_add(o, key, smr_json_str(v));
}
void smr_json_add_raw(smr_json *o, const char *key, const char *json) {
  smr_json_add(o, key, smr_json_raw(json));
}

smr_json *smr_json_nums(const double *v, size_t n) {
  smr_json *a = smr_json_arr_new();
  a->nums = smr_json_xrealloc(NULL, n, sizeof *a->nums);
  if (n)
    memcpy(a->nums, v, n * sizeof *v);
  a->n = n;
  return a;
}

smr_json *smr_json_ints(const int64_t *v, size_t n) {
  smr_json *a = smr_json_arr_new();
  a->ints = smr_json_xrealloc(NULL, n, sizeof *a->ints);
  if (n)
    memcpy(a->ints, v, n * sizeof *v);
  a->n = n;
  return a;
}

void smr_json_add_nums(smr_json *o, const char *key, const double *v,
                       size_t n) {
  smr_json_add(o, key, smr_json_nums(v, n));
}

void smr_json_add_ints(smr_json *o, const char *key, const int64_t *v,
                       size_t n) {
  smr_json_add(o, key, smr_json_ints(v, n));
}

void smr_json_add_strs(smr_json *o, const char *key, const char *const *v,
                       size_t n) {
  smr_json *a = smr_json_arr_new();
  for (size_t i = 0; i < n; i++)
    smr_json_append(a, smr_json_str(v[i]));
  smr_json_add(o, key, a);
}

smr_json *smr_json_add_obj(smr_json *o, const char *key) {
  smr_json *v = smr_json_obj_new();
  smr_json_add(o, key, v);
  return v;
}

smr_json *smr_json_add_arr(smr_json *o, const char *key) {
  smr_json *v = smr_json_arr_new();
  smr_json_add(o, key, v);
  return v;
}

/* ------------------------------------------------------------ reading */

smr_json_type smr_json_type_of(const smr_json *v) {
  return v ? v->type : SMR_JSON_NULL;
}

const smr_json *smr_json_get(const smr_json *o, const char *key) {
  ptrdiff_t at = find(o, key);
  return at < 0 ? NULL : o->kids[at];
}

const smr_json *smr_json_path(const smr_json *o, ...) {
  va_list ap;
  va_start(ap, o);
  for (const char *k = va_arg(ap, const char *); k && o;
       k = va_arg(ap, const char *))
    o = smr_json_get(o, k);
  va_end(ap);
  return o;
}

size_t smr_json_len(const smr_json *v) {
  return v && (v->type == SMR_JSON_ARR || v->type == SMR_JSON_OBJ) ? v->n : 0;
}

const smr_json *smr_json_at(const smr_json *v, size_t i) {
  return v && v->kids && i < v->n ? v->kids[i] : NULL;
}

const char *smr_json_key(const smr_json *member) {
  return member ? member->key : NULL;
}

bool smr_json_number(const smr_json *v, double *out) {
  switch (smr_json_type_of(v)) {
  case SMR_JSON_NUM:
    *out = v->d;
    return true;
  case SMR_JSON_INT:
    *out = (double)v->i;
    return true;
  case SMR_JSON_BOOL:
    *out = v->b;
    return true;
  case SMR_JSON_RAW: {
    if (strcmp(v->s, "true") == 0 || strcmp(v->s, "false") == 0) {
      *out = v->s[0] == 't';
      return true;
    }
    char *end;
    double d = strtod(v->s, &end);
    if (end == v->s || *end)
      return false;
    *out = d;
    return true;
  }
  default:
    return false;
  }
}

double smr_json_num_or(const smr_json *o, const char *key, double dflt) {
  double v;
  return smr_json_number(smr_json_get(o, key), &v) ? v : dflt;
}

double smr_json_num_at(const smr_json *a, size_t i) {
  if (!a || a->type != SMR_JSON_ARR || i >= a->n)
    return NAN;
  if (a->nums)
    return a->nums[i];
  if (a->ints)
    return (double)a->ints[i];
  double d;
  return smr_json_number(a->kids[i], &d) ? d : NAN;
}

const char *smr_json_text_of(const smr_json *v) {
  return v && (v->type == SMR_JSON_STR || v->type == SMR_JSON_RAW) ? v->s
                                                                   : NULL;
}

bool smr_json_is_obj(const smr_json *v) {
  return v && v->type == SMR_JSON_OBJ;
}
