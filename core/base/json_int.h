/* json_int.h - what the files of the JSON model share (json.c: values,
 * building and reading; json_write.c: the writer; json_parse.c: the
 * parser).  Private to them; everyone else uses smrules/json.h.  Like
 * them, it includes nothing but the C library: the rule kit compiles the
 * model too. */
#ifndef SMR_JSON_INT_H
#define SMR_JSON_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smrules/json.h"

struct smr_json {
  smr_json_type type;
  bool b;
  char *key; /* member name inside an object, else NULL */
  int64_t i;
  double d;
  char *s;         /* STR, RAW */
  smr_json **kids; /* ARR items, OBJ members */
  size_t n, cap;
  /* An array built from smr_json_add_nums/ints (or parsed as all doubles
   * or all integers) holds its numbers packed, without a node each: a
   * report's series can be long. */
  double *nums;
  int64_t *ints;
  /* An object's members by key (member index + 1, 0: empty slot), built
   * on the first lookup once it has INDEX_FROM members, so that building
   * a large object member by member with smr_json_set stays linear. */
  uint32_t *index;
  size_t index_cap; /* a power of two, at least twice the members */
};

#define INDEX_FROM 16

/* Allocation that aborts on failure (smrules/json.h). */
void *smr_json_xrealloc(void *p, size_t n, size_t size);
char *smr_json_xstrndup(const char *s, size_t n);
/* A value of type t, empty. */
smr_json *smr_json_node(smr_json_type t);
/* Appends v to an array or object (an object's key set first). */
void smr_json_append(smr_json *c, smr_json *v);

#endif
