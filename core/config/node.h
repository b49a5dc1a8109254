/* node.h - a parsed configuration tree (from YAML) with source positions,
 * so every configuration error can name line and column. */
#ifndef SMR_NODE_H
#define SMR_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum smr_node_type {
  SMR_NODE_NULL,
  SMR_NODE_BOOL,
  SMR_NODE_INT,
  SMR_NODE_FLOAT,
  SMR_NODE_STRING,
  SMR_NODE_LIST,
  SMR_NODE_MAP
} smr_node_type;

typedef struct smr_node {
  smr_node_type type;
  int line, col; /* 1-based position of the value in the source */
  bool b;
  int64_t i;
  double f;
  char *s;     /* scalars: the text as written (also for numbers and bools) */
  bool quoted; /* scalar was quoted in YAML: always a string */
  /* lists and maps: n children; maps also have keys (and key positions) */
  size_t n;
  struct smr_node **items;
  char **keys;
  int *key_lines, *key_cols;
} smr_node;

/* Child of a map by key, or NULL. */
const smr_node *smr_node_get(const smr_node *map, const char *key);
/* ... NULL also when written empty (`key:` or `key: null`): a setting or a
 * container given without a value counts as absent. */
const smr_node *smr_node_value(const smr_node *map, const char *key);
const char *smr_node_type_name(smr_node_type t);
void smr_node_free(smr_node *n);

#endif
