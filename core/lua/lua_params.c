/* lua_params.c - "-- @param" declarations of Lua rules. */
#include "lua/lua_params.h"
#include "base/suggest.h"

#include "config/node.h"
#include "config/params.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#define SCRIPT_MAX 16777216
#define SLOT 16 /* bytes of settings per parameter (lists are 2 words) */

static const struct {
  const char *name;
  smrules_param_type type;
} TYPES[] = {
    {"float", SMRULES_PARAM_FLOAT},  {"int", SMRULES_PARAM_INT},
    {"bool", SMRULES_PARAM_BOOL},    {"string", SMRULES_PARAM_STRING},
    {"list", SMRULES_PARAM_STRLIST}, {"numbers", SMRULES_PARAM_NUMLIST}};

static const char *keep(smr_lua_params *p, const char *s, size_t n) {
  char *c = smr_xmalloc(n + 1);
  memcpy(c, s, n);
  c[n] = '\0';
  smr_strv_push(&p->strings, c);
  free(c);
  return p->strings.v[p->strings.n - 1];
}

static bool parse_number(const char *s, double *out) {
  char *end;
  *out = strtod(s, &end);
  return end != s && *end == '\0';
}

/* one_of=A|B|C: a NULL-terminated array owned by p->allowed[i] */
static const char *const *split_allowed(smr_lua_params *p, size_t i,
                                        const char *v) {
  size_t n = 1;
  for (const char *q = v; *q; q++)
    n += *q == '|';
  char **arr = smr_xcalloc(n + 1, sizeof *arr);
  size_t k = 0;
  for (const char *q = v;;) {
    size_t len = strcspn(q, "|");
    arr[k++] = smr_xstrndup(q, len);
    if (!q[len])
      break;
    q += len + 1;
  }
  p->allowed[i] = arr;
  return (const char *const *)arr;
}

/* One attribute token of a declaration; an error message or NULL. */
static const char *attribute(smr_lua_params *p, size_t i, const char *tok) {
  smrules_param *q = &p->table[i];
  double v;
  if (strcmp(tok, "required") == 0) {
    q->flags |= SMRULES_P_REQUIRED;
  } else if (strncmp(tok, "default=", 8) == 0) {
    q->default_value = keep(p, tok + 8, strlen(tok + 8));
  } else if (strncmp(tok, "one_of=", 7) == 0 && tok[7]) {
    q->allowed = split_allowed(p, i, tok + 7);
  } else if ((strncmp(tok, "min=", 4) == 0 || strncmp(tok, "min>", 4) == 0) &&
             parse_number(tok + 4, &v)) {
    q->flags |= SMRULES_P_MIN | (tok[3] == '>' ? SMRULES_P_MIN_OPEN : 0);
    q->min = v;
  } else if ((strncmp(tok, "max=", 4) == 0 || strncmp(tok, "max<", 4) == 0) &&
             parse_number(tok + 4, &v)) {
    q->flags |= SMRULES_P_MAX | (tok[3] == '<' ? SMRULES_P_MAX_OPEN : 0);
    q->max = v;
  } else {
    return "expected default=V, min=N, min>N, max=N, max<N, one_of=A|B or "
           "required";
  }
  return NULL;
}

/* "-- @param NAME TYPE attrs... [-- description]" without the prefix. */
static int declaration(smr_lua_params *p, char *rest, const char *script,
                       int line, smr_error *err) {
  char *desc = strstr(rest, " -- ");
  if (desc) {
    *desc = '\0';
    desc += 4;
  }
  char *save = NULL;
  char *name = strtok_r(rest, " \t", &save);
  char *type = name ? strtok_r(NULL, " \t", &save) : NULL;
  if (!name || !type)
    return smr_error_set(err, SMR_ERR_USAGE, script, -1,
                         "line %d: @param: expected '@param NAME TYPE "
                         "[attributes]'",
                         line);
  size_t i = p->n;
  p->table = smr_xrealloc(p->table, (i + 2) * sizeof *p->table);
  p->allowed = smr_xrealloc(p->allowed, (i + 1) * sizeof *p->allowed);
  p->allowed[i] = NULL;
  memset(&p->table[i], 0, 2 * sizeof *p->table);
  p->n++;
  smrules_param *q = &p->table[i];
  for (size_t k = 0; k < i; k++)
    if (strcmp(p->table[k].name, name) == 0)
      return smr_error_set(err, SMR_ERR_USAGE, script, -1,
                           "line %d: @param %s: declared twice", line, name);
  q->name = keep(p, name, strlen(name));
  q->offset = i * SLOT;
  for (size_t k = 0; k < sizeof TYPES / sizeof *TYPES; k++)
    if (strcmp(type, TYPES[k].name) == 0)
      q->type = TYPES[k].type;
  if (q->type == SMRULES_PARAM_END)
    return smr_error_set(err, SMR_ERR_USAGE, script, -1,
                         "line %d: @param %s: unknown type '%s' (expected "
                         "float, int, bool, string, list or numbers)",
                         line, name, type);
  for (char *tok; (tok = strtok_r(NULL, " \t", &save)) != NULL;) {
    const char *why = attribute(p, i, tok);
    if (why)
      return smr_error_set(err, SMR_ERR_USAGE, script, -1,
                           "line %d: @param %s: '%s': %s", line, name, tok,
                           why);
  }
  if (desc)
    q->description = keep(p, desc, strlen(desc));
  return SMR_OK;
}

int smr_lua_params_parse(const char *text, size_t len, const char *script,
                         smr_lua_params *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  int line = 1, rc = SMR_OK;
  for (size_t at = 0; at < len && rc == SMR_OK; line++) {
    size_t end = at;
    while (end < len && text[end] != '\n')
      end++;
    const char *s = text + at;
    size_t n = end - at;
    while (n && (*s == ' ' || *s == '\t'))
      s++, n--;
    if (n > 2 && s[0] == '-' && s[1] == '-') {
      s += 2, n -= 2;
      while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
      if (n >= 7 && strncmp(s, "@param", 6) == 0 &&
          (s[6] == ' ' || s[6] == '\t')) {
        char *rest = smr_xstrndup(s + 7, n - 7);
        rest[strcspn(rest, "\r")] = '\0';
        rc = declaration(out, rest, script, line, err);
        free(rest);
      }
    }
    at = end + 1;
  }
  out->settings_size = out->n * SLOT;
  if (rc != SMR_OK)
    smr_lua_params_free(out);
  return rc;
}

int smr_lua_params_read(const char *script, smr_lua_params *out,
                        smr_error *err) {
  char *src = NULL;
  size_t len = 0;
  memset(out, 0, sizeof *out);
  int rc = smr_read_file(script, SCRIPT_MAX, &src, &len, err);
  if (rc == SMR_OK)
    rc = smr_lua_params_parse(src, len, script, out, err);
  free(src);
  return rc;
}

/* A default as a Lua value: typed like the declaration. */
static void push_default(lua_State *L, const smrules_param *q) {
  const char *v = q->default_value;
  double d;
  switch (q->type) {
  case SMRULES_PARAM_FLOAT:
  case SMRULES_PARAM_INT:
    if (parse_number(v, &d)) {
      if (q->type == SMRULES_PARAM_INT)
        lua_pushinteger(L, (lua_Integer)d);
      else
        lua_pushnumber(L, d);
      return;
    }
    break;
  case SMRULES_PARAM_BOOL:
    lua_pushboolean(L, strcmp(v, "true") == 0 || strcmp(v, "True") == 0);
    return;
  case SMRULES_PARAM_STRLIST:
  case SMRULES_PARAM_NUMLIST: {
    lua_newtable(L);
    lua_Integer k = 0;
    for (const char *s = v; *s;) {
      size_t len = strcspn(s, ",");
      const char *a = s, *b = s + len;
      while (a < b && *a == ' ')
        a++;
      while (b > a && b[-1] == ' ')
        b--;
      if (b > a) {
        char *item = smr_xstrndup(a, (size_t)(b - a));
        if (q->type == SMRULES_PARAM_NUMLIST && parse_number(item, &d))
          lua_pushnumber(L, d);
        else
          lua_pushstring(L, item);
        free(item);
        lua_rawseti(L, -2, ++k);
      }
      s += len + (s[len] ? 1 : 0);
    }
    return;
  }
  default:
    break;
  }
  lua_pushstring(L, v);
}

/* __index of the params table of a script that declares its parameters:
 * a declared one without a value is nil; any other name is a slip
 * (params.windw for params.window) that would otherwise surface as a
 * nil-compare far from its cause. */
static int undeclared_param(lua_State *L) {
  if (lua_type(L, 2) != LUA_TSTRING)
    return 0;
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL)
    return 0;
  const char *names[64];
  size_t n = 0;
  smr_buf list = {0};
  lua_pushnil(L);
  while (lua_next(L, lua_upvalueindex(1)) != 0) {
    if (n < sizeof names / sizeof *names) {
      names[n] = lua_tostring(L, -2);
      smr_buf_printf(&list, "%s%s", n ? ", " : "", names[n]);
      n++;
    }
    lua_pop(L, 1);
  }
  const char *k = lua_tostring(L, 2);
  const char *near = smr_suggest(k, names, n);
  lua_pushfstring(L,
                  "params.%s is not a parameter of this script%s%s%s "
                  "(it declares: %s)",
                  k, near ? ": did you mean '" : "", near ? near : "",
                  near ? "'?" : "", list.data ? list.data : "");
  smr_buf_free(&list);
  return lua_error(L);
}

static void guard_undeclared(lua_State *L, const smr_lua_params *p) {
  lua_newtable(L); /* the metatable */
  lua_newtable(L); /* the declared names */
  for (size_t i = 0; i < p->n; i++) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, p->table[i].name);
  }
  lua_pushcclosure(L, undeclared_param, 1);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
}

void smr_lua_params_push_defaults(lua_State *L, const smr_lua_params *p) {
  for (size_t i = 0; p && i < p->n; i++) {
    const smrules_param *q = &p->table[i];
    if (!q->default_value)
      continue;
    lua_getfield(L, -1, q->name);
    bool given = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (given)
      continue;
    push_default(L, q);
    lua_setfield(L, -2, q->name);
  }
  if (p && p->n)
    guard_undeclared(L, p);
}

void smr_lua_params_free(smr_lua_params *p) {
  for (size_t i = 0; i < p->n; i++) {
    if (!p->allowed || !p->allowed[i])
      continue;
    for (char **a = p->allowed[i]; *a; a++)
      free(*a);
    free(p->allowed[i]);
  }
  free(p->allowed);
  free(p->table);
  smr_strv_free(&p->strings);
  memset(p, 0, sizeof *p);
}

/* No declarations: every scalar given is a string parameter, listed as
 * given (lists and maps are passed to the script, not listed). */
static int undeclared(const char *rule, const smr_node *given, int line,
                      int col, const char *file, smr_params *out,
                      smr_error *err) {
  size_t n = given && given->type == SMR_NODE_MAP ? given->n : 0;
  smrules_param *t = smr_xcalloc(n + 1, sizeof *t);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    smr_node_type ty = given->items[i]->type;
    if (ty == SMR_NODE_LIST || ty == SMR_NODE_MAP || ty == SMR_NODE_NULL)
      continue;
    t[k].type = SMRULES_PARAM_STRING;
    t[k].name = given->keys[i];
    t[k].offset = k * SLOT;
    k++;
  }
  smr_node only = {0};
  if (given && k < n) { /* a copy of the map without the lists and maps */
    only = *given;
    only.n = 0;
    only.items = smr_xcalloc(n, sizeof *only.items);
    only.keys = smr_xcalloc(n, sizeof *only.keys);
    only.key_lines = smr_xcalloc(n, sizeof *only.key_lines);
    only.key_cols = smr_xcalloc(n, sizeof *only.key_cols);
    for (size_t i = 0; i < n; i++) {
      smr_node_type ty = given->items[i]->type;
      if (ty == SMR_NODE_LIST || ty == SMR_NODE_MAP || ty == SMR_NODE_NULL)
        continue;
      only.items[only.n] = given->items[i];
      only.keys[only.n] = given->keys[i];
      only.key_lines[only.n] = given->key_lines[i];
      only.key_cols[only.n] = given->key_cols[i];
      only.n++;
    }
  }
  void *settings = smr_xcalloc(k + 1, SLOT);
  int rc = smr_params_apply(rule, t, given && k < n ? &only : given, line, col,
                            file, settings, out, err);
  free(settings);
  free(only.items);
  free(only.keys);
  free(only.key_lines);
  free(only.key_cols);
  free(t);
  return rc;
}

int smr_lua_params_apply(const char *rule, const char *script,
                         const smr_node *given, int line, int col,
                         const char *file, smr_params *out, smr_error *err) {
  smr_lua_params p;
  int rc = smr_lua_params_read(script, &p, err);
  if (rc != SMR_OK) {
    memset(out, 0, sizeof *out);
    return rc;
  }
  if (p.n == 0) {
    smr_lua_params_free(&p);
    return undeclared(rule, given, line, col, file, out, err);
  }
  void *settings = smr_xcalloc(1, p.settings_size + SLOT);
  rc = smr_params_apply(rule, p.table, given, line, col, file, settings, out,
                        err);
  free(settings);
  smr_lua_params_free(&p);
  return rc;
}
