/* settings.c - one reader for every settings table (settings.h): defaults,
 * then the given values, each checked against its row; and the JSON Schema
 * the same rows describe. */
#include "config/settings.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ messages */

static void printable(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      *s = ' ';
}

int smr_settings_error(const smr_settings_ctx *c, const smr_node *at,
                       const char *fmt, ...) {
  char what[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  printable(what);
  return smr_error_set(c->err, SMR_ERR_USAGE, c->file, -1,
                       "line %d, column %d: %s", at ? at->line : 0,
                       at ? at->col : 0, what);
}

void smr_settings_warn(const smr_settings_ctx *c, const smr_node *at,
                       const char *fmt, ...) {
  char what[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  printable(what);
  fprintf(stderr, "smrules: warning: %s: line %d, column %d: %s\n", c->file,
          at ? at->line : 0, at ? at->col : 0, what);
}

/* ------------------------------------------------------------- helpers */

char *smr_settings_resolve(const char *base_dir, const char *p) {
  if (p[0] == '/' || !base_dir || !base_dir[0])
    return smr_xstrdup(p);
  return smr_xasprintf("%s/%s", base_dir, p);
}

int smr_settings_check_private_file(const char *path, smr_error *err) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return smr_error_set(
        err, SMR_ERR_USAGE, path, -1, "cannot open the credentials file: %s%s",
        strerror(errno), errno == ELOOP ? " (symbolic links are refused)" : "");
  struct stat st;
  int rc = fstat(fd, &st);
  close(fd);
  if (rc != 0 || !S_ISREG(st.st_mode))
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "the credentials file is not a regular file");
  if (st.st_uid != geteuid())
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "the credentials file must be owned by the user "
                         "running smrules (uid %u), not uid %u",
                         (unsigned)geteuid(), (unsigned)st.st_uid);
  if (st.st_mode & 077)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "the credentials file is readable or writable by "
                         "others (mode %03o); make it private: chmod 600",
                         (unsigned)(st.st_mode & 0777));
  return SMR_OK;
}

const smr_setting *smr_setting_find(const smr_setting *table,
                                    const char *name) {
  for (const smr_setting *s = table; s && s->type != SMR_SETTING_END; s++)
    if (strcmp(s->name, name) == 0)
      return s;
  return NULL;
}

/* ------------------------------------------------------------- reading */

static int read_string(const smr_settings_ctx *c, const smr_setting *s,
                       const smr_node *v, char **field) {
  if (v->type != SMR_NODE_STRING || !v->s[0])
    return smr_settings_error(c, v, "%s: expected a non-empty string", s->name);
  char *val = s->type == SMR_SETTING_PATH
                  ? smr_settings_resolve(c->base_dir, v->s)
                  : smr_xstrdup(v->s);
  free(*field);
  *field = val;
  if (s->flags & SMR_SETTING_SECRET_FILE) {
    smr_error why;
    if (smr_settings_check_private_file(val, &why) != SMR_OK)
      return smr_settings_error(c, v, "%s %s: %s", s->name, val, why.msg);
  }
  return SMR_OK;
}

static int read_strlist(const smr_settings_ctx *c, const smr_setting *s,
                        const smr_node *v, smr_strv *out) {
  smr_strv_free(out);
  if (v->type == SMR_NODE_STRING && !(s->flags & SMR_SETTING_LIST_ONLY)) {
    smr_strv_push(out, v->s);
    return SMR_OK;
  }
  if (v->type != SMR_NODE_LIST || v->n == 0)
    return smr_settings_error(
        c, v, "%s: expected %sa non-empty list of strings", s->name,
        s->flags & SMR_SETTING_LIST_ONLY ? "" : "a string or ");
  for (size_t i = 0; i < v->n; i++) {
    if (v->items[i]->type != SMR_NODE_STRING)
      return smr_settings_error(c, v->items[i], "%s: expected a string",
                                s->name);
    smr_strv_push(out, v->items[i]->s);
  }
  return SMR_OK;
}

static int read_number(const smr_settings_ctx *c, const smr_setting *s,
                       const smr_node *v, void *field) {
  double x = v->type == SMR_NODE_INT     ? (double)v->i
             : v->type == SMR_NODE_FLOAT ? v->f
                                         : NAN;
  if (!(x >= s->min && x <= s->max))
    return smr_settings_error(c, v, "%s: expected a number from %g to %g",
                              s->name, s->min, s->max);
  if (s->type == SMR_SETTING_NUMBER) {
    *(double *)field = x;
    return SMR_OK;
  }
  if (v->type != SMR_NODE_INT)
    return smr_settings_error(c, v, "%s: expected an integer", s->name);
  *(int64_t *)field = v->i;
  return SMR_OK;
}

static void or_list(smr_buf *b, const char *const *choices) {
  size_t n = 0;
  while (choices[n])
    n++;
  for (size_t i = 0; i < n; i++)
    smr_buf_printf(b, "%s%s",
                   i == 0       ? ""
                   : i + 1 == n ? " or "
                                : ", ",
                   choices[i]);
}

static int read_enum(const smr_settings_ctx *c, const smr_setting *s,
                     const smr_node *v, int *field) {
  for (int i = 0; v->type == SMR_NODE_STRING && s->choices[i]; i++)
    if (strcmp(v->s, s->choices[i]) == 0) {
      *field = i;
      return SMR_OK;
    }
  smr_buf b = {0};
  or_list(&b, s->choices);
  int rc = smr_settings_error(c, v, "%s: expected %s", s->name, b.data);
  smr_buf_free(&b);
  return rc;
}

static int read_one(const smr_settings_ctx *c, const smr_setting *s,
                    const smr_node *v, void *out) {
  void *field = (char *)out + s->offset;
  switch (s->type) {
  case SMR_SETTING_STRING:
  case SMR_SETTING_PATH:
    return read_string(c, s, v, field);
  case SMR_SETTING_STRLIST:
    return read_strlist(c, s, v, field);
  case SMR_SETTING_NUMBER:
  case SMR_SETTING_INT:
    return read_number(c, s, v, field);
  case SMR_SETTING_BOOL:
    if (v->type != SMR_NODE_BOOL)
      return smr_settings_error(c, v, "%s: expected true or false", s->name);
    *(bool *)field = v->b;
    return SMR_OK;
  case SMR_SETTING_ENUM:
    return read_enum(c, s, v, field);
  case SMR_SETTING_CUSTOM:
    return s->read(c, s, v, field);
  default:
    return smr_settings_error(c, v, "%s: unsupported setting", s->name);
  }
}

/* A default is read like a value written in the file, so a table with a
 * default its own checks reject fails the first time it is used. */
static int read_default(const smr_settings_ctx *c, const smr_setting *s,
                        void *out) {
  smr_node n = {.type = SMR_NODE_STRING, .s = (char *)s->def};
  char *end;
  if (s->type == SMR_SETTING_BOOL) {
    n.type = SMR_NODE_BOOL;
    n.b = strcmp(s->def, "true") == 0;
  } else if (s->type == SMR_SETTING_NUMBER || s->type == SMR_SETTING_INT) {
    n.f = strtod(s->def, &end);
    n.i = (int64_t)n.f;
    n.type = (double)n.i == n.f ? SMR_NODE_INT : SMR_NODE_FLOAT;
  }
  return read_one(c, s, &n, out);
}

int smr_settings_read(const smr_settings_ctx *c, const smr_setting *table,
                      const smr_node *map, void *out) {
  for (const smr_setting *s = table; s->type != SMR_SETTING_END; s++) {
    if (s->def) {
      int rc = read_default(c, s, out);
      if (rc)
        return rc;
    }
  }
  for (const smr_setting *s = table; s->type != SMR_SETTING_END; s++) {
    const smr_node *v = smr_node_value(map, s->name);
    int rc = v ? read_one(c, s, v, out) : SMR_OK;
    if (rc)
      return rc;
  }
  return SMR_OK;
}

void smr_settings_free(const smr_setting *table, void *out) {
  for (const smr_setting *s = table; s->type != SMR_SETTING_END; s++) {
    void *field = (char *)out + s->offset;
    if (s->type == SMR_SETTING_STRING || s->type == SMR_SETTING_PATH) {
      free(*(char **)field);
      *(char **)field = NULL;
    } else if (s->type == SMR_SETTING_STRLIST) {
      smr_strv_free(field);
    }
  }
}

/* -------------------------------------------------------------- schema */

static cJSON *types(const char *a, const char *b) {
  if (!b)
    return cJSON_CreateString(a);
  const char *both[] = {a, b};
  return cJSON_CreateStringArray(both, 2);
}

static cJSON *setting_schema(const smr_setting *s) {
  cJSON *o = s->type == SMR_SETTING_CUSTOM ? cJSON_Parse(s->schema)
                                           : cJSON_CreateObject();
  if (!o)
    return cJSON_CreateObject();
  switch (s->type) {
  case SMR_SETTING_STRING:
  case SMR_SETTING_PATH:
    cJSON_AddItemToObject(o, "type", types("string", NULL));
    cJSON_AddNumberToObject(o, "minLength", 1);
    break;
  case SMR_SETTING_STRLIST:
    if (s->flags & SMR_SETTING_LIST_ONLY) {
      cJSON_AddItemToObject(o, "type", types("array", NULL));
    } else {
      cJSON_AddItemToObject(o, "type", types("string", "array"));
      cJSON_AddNumberToObject(o, "minLength", 1);
    }
    cJSON_AddNumberToObject(o, "minItems", 1);
    cJSON_AddItemToObject(o, "items", cJSON_Parse("{\"type\":\"string\"}"));
    break;
  case SMR_SETTING_NUMBER:
  case SMR_SETTING_INT:
    cJSON_AddItemToObject(
        o, "type",
        types(s->type == SMR_SETTING_INT ? "integer" : "number", NULL));
    cJSON_AddNumberToObject(o, "minimum", s->min);
    cJSON_AddNumberToObject(o, "maximum", s->max);
    break;
  case SMR_SETTING_BOOL:
    cJSON_AddItemToObject(o, "type", types("boolean", NULL));
    break;
  case SMR_SETTING_ENUM: {
    size_t n = 0;
    while (s->choices[n])
      n++;
    cJSON_AddItemToObject(o, "type", types("string", NULL));
    cJSON_AddItemToObject(o, "enum",
                          cJSON_CreateStringArray(s->choices, (int)n));
    break;
  }
  default:
    break;
  }
  if (s->description)
    cJSON_AddStringToObject(o, "description", s->description);
  return o;
}

char *smr_settings_schema(const smr_setting *table, const char *title,
                          bool nullable, const char *const *required) {
  cJSON *o = cJSON_CreateObject(), *props = cJSON_CreateObject();
  if (title)
    cJSON_AddStringToObject(o, "title", title);
  cJSON_AddItemToObject(o, "type", types("object", nullable ? "null" : NULL));
  for (const smr_setting *s = table; s->type != SMR_SETTING_END; s++)
    cJSON_AddItemToObject(props, s->name, setting_schema(s));
  cJSON_AddItemToObject(o, "properties", props);
  if (required) {
    size_t n = 0;
    while (required[n])
      n++;
    cJSON_AddItemToObject(o, "required",
                          cJSON_CreateStringArray(required, (int)n));
  }
  cJSON_AddFalseToObject(o, "additionalProperties");
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  char *owned = smr_xstrdup(text ? text : "{}");
  cJSON_free(text);
  return owned;
}
