/* rpt_json.h - a small ordered JSON tree.  ProfilerReport hands one to each
 * sub-rule as its report Details (the sub-rule builds it through the usual
 * api->json_* calls, see rpt_shim.c), writes it out as the sub-rule's JSON
 * report, and reads it back to draw the HTML report.  Objects keep their
 * members in insertion order, as Python dicts do in the reference. */
#ifndef RPT_JSON_H
#define RPT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smrules/rulekit.h"

typedef enum pj_type {
  PJ_NULL,
  PJ_BOOL,
  PJ_NUM, /* double */
  PJ_INT, /* int64 */
  PJ_STR,
  PJ_RAW, /* pre-encoded JSON text */
  PJ_OBJ,
  PJ_NUMS, /* array of doubles */
  PJ_INTS, /* array of int64 */
  PJ_STRS  /* array of strings */
} pj_type;

typedef struct pj pj;
struct pj {
  pj_type t;
  char *key; /* member name (NULL for the root) */
  bool b;
  double num;
  int64_t i;
  char *s;   /* STR, RAW */
  pj **kids; /* OBJ members */
  size_t n, cap;
  double *nums;  /* NUMS */
  int64_t *ints; /* INTS */
  char **strs;   /* STRS */
  size_t len;    /* NUMS/INTS/STRS length */
};

pj *pj_new_obj(void);
void pj_free(pj *j);
/* Remove every member of an object. */
void pj_clear(pj *j);

/* Builders: append a member (a later member with the same key is appended
 * too, as the host does; sub-rules rebuild Details from scratch). */
void pj_set_num(pj *o, const char *key, double v);
void pj_set_int(pj *o, const char *key, int64_t v);
void pj_set_bool(pj *o, const char *key, bool v);
void pj_set_str(pj *o, const char *key, const char *v);
void pj_set_null(pj *o, const char *key);
void pj_set_raw(pj *o, const char *key, const char *json);
void pj_set_nums(pj *o, const char *key, const double *v, size_t n);
void pj_set_ints(pj *o, const char *key, const int64_t *v, size_t n);
void pj_set_strs(pj *o, const char *key, const char *const *v, size_t n);
pj *pj_set_obj(pj *o, const char *key);

/* Readers.  pj_get: the last member named key, or NULL. */
const pj *pj_get(const pj *o, const char *key);
/* pj_path(o, "a", "b", NULL): nested lookup. */
const pj *pj_path(const pj *o, ...);
/* A number member (NUM, INT, or RAW/BOOL holding a number/bool) as a
 * double; false when absent or not a number. */
bool pj_number(const pj *v, double *out);
/* Convenience: number of key in o, or `dflt`. */
double pj_num_or(const pj *o, const char *key, double dflt);
/* Array length and element i as a double (NUMS/INTS). */
size_t pj_array_len(const pj *v);
double pj_array_at(const pj *v, size_t i);
bool pj_is_obj(const pj *v);

/* Append the JSON text of `j` (numbers as Python writes them, non-finite
 * as null). */
void pj_render(const pj *j, rk_text *out);
/* Append a JSON string literal. */
void pj_render_string(const char *s, rk_text *out);
/* Parse JSON text holding an object into a tree (NULL when invalid). */
pj *pj_parse(const char *text);
/* The same, but the member `key` of the root, when it is an object that
 * renders back unchanged, stays text (a RAW member rendered as pj_render
 * would render its tree): for a large member no reader looks into. */
pj *pj_parse_keep(const char *text, const char *key);
/* Python repr-like shortest round-trip text of a double ("1.0", "0.1"). */
void pj_fmt_double(double v, char *buf, size_t n);

#endif
