/* config.h - rules.yaml: parsed with libyaml into a smr_node tree,
 * validated against schemas/rules.schema.json (compiled into the binary),
 * then turned into a list of rule instances.  Every error names the file,
 * line and column.  Nothing here runs a rule or checks rule parameters
 * against a rule's own table (the rule host does that, with the node
 * positions kept here). */
#ifndef SMR_CONFIG_H
#define SMR_CONFIG_H

#include <stdint.h>

#include "base/common.h"
#include "config/node.h"

typedef struct smr_rule_config {
  char *name;   /* instance name (default: the rule's name / script stem) */
  char *rule;   /* built-in rule name, or NULL */
  char *lua;    /* script path resolved against the YAML's directory */
  char *plugin; /* .so path resolved against the YAML's directory */
  char *python; /* a Python rule's file, resolved likewise */
  char *python_class; /* its `class:` (NULL: the one Rule class it has) */
  const smr_node *parameters;   /* map, or NULL */
  const smr_node *actions;      /* list, or NULL (interpreted by actions) */
  int64_t start_step, end_step; /* -1 when unset; end is exclusive */
  int line, col;                /* of the list item */
} smr_rule_config;

typedef struct smr_config {
  char *path;     /* the YAML file ("<string>" when parsed from memory) */
  char *base_dir; /* directory relative paths are resolved against */
  smr_node *root;
  smr_rule_config *rules;
  size_t n_rules;
  const smr_node *actions;     /* top-level `actions:` map, or NULL */
  const smr_node *lua;         /* top-level `lua:` settings map, or NULL */
  const smr_node *tensorboard; /* `tensorboard:` (config/config_tb.h) */
} smr_config;

/* Load and validate.  On error: SMR_ERR_USAGE, err->file = path and
 * err->msg = "line L, column C: what is wrong (what was expected)". */
int smr_config_load(const char *path, smr_config *out, smr_error *err);
int smr_config_parse(const char *yaml, size_t len, const char *name,
                     const char *base_dir, smr_config *out, smr_error *err);
void smr_config_free(smr_config *c);

/* Parse YAML text into a node tree (no schema). */
int smr_yaml_parse(const char *yaml, size_t len, const char *name,
                   smr_node **out, smr_error *err);

/* Validate a node tree against a JSON Schema given as JSON text (the
 * subset: type, properties, required, additionalProperties, items, enum,
 * const, oneOf, anyOf, minimum, maximum, minItems, pattern, $ref to
 * #/definitions/...).  The first violation is reported with the node's
 * line and column. */
int smr_schema_validate(const char *schema_json, const smr_node *root,
                        const char *name, smr_error *err);

#endif
