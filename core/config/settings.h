/* settings.h - a declarative settings table (nginx's ngx_command_t, Fluent
 * Bit's config_map): one row per key of a rules.yaml map with its type,
 * range, allowed values, default, flags, description and the offset of its
 * field in the owner's struct.  One reader fills any struct from its table,
 * every error with the line and column of the offending value; the same
 * table gives the JSON Schema of the map (smr_settings_schema), so the
 * schema and the code cannot hold two different limits.
 *
 * Used by the action kinds (core/action/action_<kind>.c); rule parameters
 * have the plugin SDK's own table (smrules_param, config/params.c). */
#ifndef SMR_SETTINGS_H
#define SMR_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/common.h"
#include "config/node.h"

typedef enum smr_setting_type {
  SMR_SETTING_END,     /* ends a table */
  SMR_SETTING_STRING,  /* char *: a non-empty string */
  SMR_SETTING_PATH,    /* char *: a string resolved against the file's folder */
  SMR_SETTING_STRLIST, /* smr_strv: a string or a non-empty list of strings */
  SMR_SETTING_NUMBER,  /* double, min..max */
  SMR_SETTING_INT,     /* int64_t, min..max */
  SMR_SETTING_BOOL,    /* bool */
  SMR_SETTING_ENUM,    /* int: the index of the value in `choices` */
  SMR_SETTING_CUSTOM   /* read by `read`; its schema is `schema` */
} smr_setting_type;

/* Flags of a setting. */
enum {
  /* PATH: a file holding secrets: a regular file (no symbolic link) owned by
   * the user running smrules, without group or other permission bits. */
  SMR_SETTING_SECRET_FILE = 1u << 0,
  /* STRLIST: only the list form (an argv, where one string would hide
   * the difference between a program and a command line) */
  SMR_SETTING_LIST_ONLY = 1u << 2
};

typedef struct smr_settings_ctx smr_settings_ctx;
typedef struct smr_setting smr_setting;

/* Reads one value of a CUSTOM setting into its field; errors through
 * smr_settings_error. */
typedef int (*smr_setting_read_fn)(const smr_settings_ctx *c,
                                   const smr_setting *s, const smr_node *v,
                                   void *field);

struct smr_setting {
  const char *name;
  smr_setting_type type;
  size_t offset; /* of the field in the owner's struct */
  double min, max;
  const char *const *choices; /* ENUM: NULL-terminated */
  const char *def;            /* default as YAML would spell it, or NULL */
  unsigned flags;
  const char *description;  /* one line, for the schema and the docs */
  smr_setting_read_fn read; /* CUSTOM */
  const char *schema;       /* CUSTOM: its JSON Schema (JSON text) */
};

/* Where values come from (for messages and relative paths). */
struct smr_settings_ctx {
  const char *file;     /* the rules.yaml path named in errors */
  const char *base_dir; /* relative PATH values are resolved against it */
  smr_error *err;
  void *user; /* for CUSTOM readers */
};

/* Applies every default of `table` to `out`, then the values given in `map`
 * (a map node or NULL).  Keys not in the table are left to the schema. */
int smr_settings_read(const smr_settings_ctx *c, const smr_setting *table,
                      const smr_node *map, void *out);
/* Frees what smr_settings_read allocated in `out` (strings, lists). */
void smr_settings_free(const smr_setting *table, void *out);
/* The row of `name`, or NULL. */
const smr_setting *smr_setting_find(const smr_setting *table, const char *name);

/* SMR_ERR_USAGE with "line L, column C: <what>" (control characters in the
 * text become spaces: values quoted come from the file). */
int smr_settings_error(const smr_settings_ctx *c, const smr_node *at,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same text as a warning on stderr. */
void smr_settings_warn(const smr_settings_ctx *c, const smr_node *at,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* `p` resolved against `base_dir` unless absolute (owned). */
char *smr_settings_resolve(const char *base_dir, const char *p);
/* SMR_SETTING_SECRET_FILE's check.  SMR_OK or SMR_ERR_USAGE with why. */
int smr_settings_check_private_file(const char *path, smr_error *err);

/* The JSON Schema of a map read by `table` (JSON text, owned):
 * {"title", "type": "object" or ["object","null"], "properties": {...},
 *  "required": [...], "additionalProperties": false}.  `required`
 * (NULL-terminated names) may be NULL. */
char *smr_settings_schema(const smr_setting *table, const char *title,
                          bool nullable, const char *const *required);

#endif
