/* params.c - rule parameters: YAML node -> typed value -> settings. */
#include "config/params.h"

#include "base/suggest.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/regex.h"

const char *smr_param_type_name(smrules_param_type t) {
  switch (t) {
  case SMRULES_PARAM_FLOAT:
    return "float";
  case SMRULES_PARAM_INT:
    return "int";
  case SMRULES_PARAM_BOOL:
    return "bool";
  case SMRULES_PARAM_STRING:
    return "string";
  case SMRULES_PARAM_STRLIST:
    return "list";
  case SMRULES_PARAM_NUMLIST:
    return "list of numbers";
  default:
    return "?";
  }
}

/* A value to parse: the node (for positions) or a default string. */
typedef struct pval {
  const smr_node *node; /* NULL for defaults */
  const char *text;
  int line, col;
} pval;

typedef struct pctx {
  const char *rule, *file;
  const smrules_param *p;
  smr_params *out;
  smr_error *err;
} pctx;

static int bad(const pctx *c, const pval *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(const pctx *c, const pval *v, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (v->node || v->line)
    return smr_error_set(c->err, SMR_ERR_USAGE, c->file, -1,
                         "line %d, column %d: parameter '%s' of %s: %s",
                         v->line, v->col, c->p->name, c->rule, what);
  return smr_error_set(c->err, SMR_ERR_USAGE, c->file, -1,
                       "default of parameter '%s' of %s: %s", c->p->name,
                       c->rule, what);
}

static void *keep(smr_params *out, void *p) {
  out->allocs = smr_xrealloc(out->allocs, (out->nallocs + 1) * sizeof(void *));
  out->allocs[out->nallocs++] = p;
  return p;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  return s;
}

/* "None", "" and null mean unset (docs/rule-semantics.md#parameter-values). */
static bool is_unset(const pval *v) {
  if (v->node && v->node->type == SMR_NODE_NULL)
    return true;
  if (!v->text)
    return true;
  char *t = smr_xstrdup(v->text);
  const char *s = trim(t);
  bool u = *s == '\0' || strcmp(s, "None") == 0;
  free(t);
  return u;
}

static bool parse_double(const char *s, double *out) {
  char *t = smr_xstrdup(s), *end;
  char *x = trim(t);
  errno = 0;
  double d = strtod(x, &end);
  bool ok = *x && *end == '\0' && errno != ERANGE;
  free(t);
  if (ok)
    *out = d;
  return ok;
}

static int check_bounds(const pctx *c, const pval *v, double d) {
  unsigned f = c->p->flags;
  if (isnan(d))
    return bad(c, v, "NaN is not allowed");
  if (f & SMRULES_P_MIN) {
    bool open = f & SMRULES_P_MIN_OPEN;
    if (open ? !(d > c->p->min) : !(d >= c->p->min))
      return bad(c, v, "%s is out of range (must be %s %g)", v->text,
                 open ? ">" : ">=", c->p->min);
  }
  if (f & SMRULES_P_MAX) {
    bool open = f & SMRULES_P_MAX_OPEN;
    if (open ? !(d < c->p->max) : !(d <= c->p->max))
      return bad(c, v, "%s is out of range (must be %s %g)", v->text,
                 open ? "<" : "<=", c->p->max);
  }
  return SMR_OK;
}

static int parse_number(const pctx *c, const pval *v, bool integer,
                        double *out) {
  const smr_node *n = v->node;
  if (n && n->type != SMR_NODE_INT && n->type != SMR_NODE_FLOAT &&
      n->type != SMR_NODE_STRING)
    return bad(c, v, "expected %s, got %s", integer ? "an integer" : "a number",
               smr_node_type_name(n->type));
  double d;
  if (!parse_double(v->text, &d))
    return bad(c, v, "expected %s, got '%s'",
               integer ? "an integer" : "a number", v->text);
  if (integer && (d != floor(d) || fabs(d) > 9007199254740992.0))
    return bad(c, v, "expected an integer, got '%s'", v->text);
  *out = d;
  return check_bounds(c, v, d);
}

static int parse_bool(const pctx *c, const pval *v, bool *out) {
  if (v->node && v->node->type == SMR_NODE_BOOL) {
    *out = v->node->b;
    return SMR_OK;
  }
  if (v->node && v->node->type != SMR_NODE_STRING)
    return bad(c, v, "expected true or false, got %s",
               smr_node_type_name(v->node->type));
  const char *s = v->text;
  if (!strcmp(s, "true") || !strcmp(s, "True")) {
    *out = true;
    return SMR_OK;
  }
  if (!strcmp(s, "false") || !strcmp(s, "False")) {
    *out = false;
    return SMR_OK;
  }
  return bad(c, v, "expected true or false, got '%s'", s);
}

static int check_allowed(const pctx *c, const pval *v, const char *s) {
  const char *const *a = c->p->allowed;
  if (!a)
    return SMR_OK;
  for (size_t i = 0; a[i]; i++)
    if (strcmp(a[i], s) == 0)
      return SMR_OK;
  smr_buf list = {0};
  for (size_t i = 0; a[i]; i++)
    smr_buf_printf(&list, "%s%s", i ? ", " : "", a[i]);
  int rc = bad(c, v, "'%s' is not one of: %s", s, list.data);
  smr_buf_free(&list);
  return rc;
}

static int check_regex(const pctx *c, const pval *v, const char *s) {
  if (!(c->p->flags & SMRULES_P_REGEX))
    return SMR_OK;
  smr_regex *re;
  smr_error e;
  if (smr_regex_compile(s, &re, &e) != SMR_OK)
    return bad(c, v, "invalid regular expression '%s': %s", s, e.msg);
  smr_regex_free(re);
  return SMR_OK;
}

/* Items of a list parameter: a YAML list of scalars, or a comma-separated
 * string with items trimmed and empty ones dropped. */
static int list_items(const pctx *c, const pval *v, smr_strv *items) {
  const smr_node *n = v->node;
  if (n && n->type == SMR_NODE_LIST) {
    for (size_t i = 0; i < n->n; i++) {
      const smr_node *it = n->items[i];
      if (it->type == SMR_NODE_LIST || it->type == SMR_NODE_MAP ||
          it->type == SMR_NODE_NULL) {
        pval iv = {it, it->s, it->line, it->col};
        return bad(c, &iv, "list items must be plain values");
      }
      smr_strv_push(items, it->s);
    }
    return SMR_OK;
  }
  if (n && n->type == SMR_NODE_MAP)
    return bad(c, v, "expected a list or a comma-separated string, got a map");
  char *copy = smr_xstrdup(v->text);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    char *t = trim(tok);
    if (*t)
      smr_strv_push(items, t);
  }
  free(copy);
  return SMR_OK;
}

static int store_list(const pctx *c, const pval *v, void *field) {
  smr_strv items = {0};
  int rc = list_items(c, v, &items);
  if (rc == SMR_OK && c->p->type == SMRULES_PARAM_STRLIST) {
    for (size_t i = 0; rc == SMR_OK && i < items.n; i++) {
      rc = check_allowed(c, v, items.v[i]);
      if (rc == SMR_OK)
        rc = check_regex(c, v, items.v[i]);
    }
    smrules_strlist *l = field;
    l->n = items.n;
    l->v = (const char *const *)keep(c->out, items.v);
    for (size_t i = 0; i < items.n; i++)
      keep(c->out, items.v[i]);
    return rc;
  }
  double *nums = keep(c->out, smr_xcalloc(items.n + 1, sizeof(double)));
  for (size_t i = 0; rc == SMR_OK && i < items.n; i++) {
    pval iv = *v;
    iv.text = items.v[i];
    iv.node = NULL;
    if (!parse_double(items.v[i], &nums[i]))
      rc = bad(c, &iv, "list item '%s' is not a number", items.v[i]);
    else
      rc = check_bounds(c, &iv, nums[i]);
  }
  size_t nitems = items.n;
  smr_strv_free(&items);
  smrules_numlist *l = field;
  l->n = rc == SMR_OK ? nitems : 0;
  l->v = nums;
  return rc;
}

/* Parse one value into its settings field. */
static int store(const pctx *c, const pval *v, void *settings) {
  void *field = (char *)settings + c->p->offset;
  double d;
  int rc = SMR_OK;
  switch (c->p->type) {
  case SMRULES_PARAM_FLOAT:
    if ((rc = parse_number(c, v, false, &d)) == SMR_OK)
      *(double *)field = d;
    return rc;
  case SMRULES_PARAM_INT:
    if ((rc = parse_number(c, v, true, &d)) == SMR_OK)
      *(int64_t *)field = (int64_t)d;
    return rc;
  case SMRULES_PARAM_BOOL:
    return parse_bool(c, v, (bool *)field);
  case SMRULES_PARAM_STRING:
    if (v->node &&
        (v->node->type == SMR_NODE_LIST || v->node->type == SMR_NODE_MAP))
      return bad(c, v, "expected a string, got %s",
                 smr_node_type_name(v->node->type));
    if ((rc = check_allowed(c, v, v->text)) ||
        (rc = check_regex(c, v, v->text)))
      return rc;
    *(const char **)field = keep(c->out, smr_xstrdup(v->text));
    return SMR_OK;
  case SMRULES_PARAM_STRLIST:
  case SMRULES_PARAM_NUMLIST:
    return store_list(c, v, field);
  default:
    return bad(c, v, "unsupported parameter type");
  }
}

static bool name_matches(const smrules_param *p, const char *key) {
  if (strcmp(p->name, key) == 0)
    return true;
  if (!p->aliases)
    return false;
  char *copy = smr_xstrdup(p->aliases);
  bool hit = false;
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && !hit;
       tok = strtok_r(NULL, ",", &save))
    hit = strcmp(trim(tok), key) == 0;
  free(copy);
  return hit;
}

static const smrules_param *find_param(const smrules_param *table,
                                       const char *key) {
  for (const smrules_param *p = table; p->type != SMRULES_PARAM_END; p++)
    if (name_matches(p, key))
      return p;
  return NULL;
}

static int unknown_param(const char *rule, const smrules_param *table,
                         const smr_node *given, size_t i, const char *file,
                         smr_error *err) {
  smr_buf known = {0};
  size_t n = 0;
  for (const smrules_param *p = table; p->type != SMRULES_PARAM_END; p++)
    n++;
  const char **names = smr_xcalloc(n ? n : 1, sizeof *names);
  n = 0;
  for (const smrules_param *p = table; p->type != SMRULES_PARAM_END; p++) {
    smr_buf_printf(&known, "%s%s", known.len ? ", " : "", p->name);
    names[n++] = p->name;
  }
  const char *near = smr_suggest(given->keys[i], names, n);
  int rc;
  if (near)
    rc = smr_error_set(err, SMR_ERR_USAGE, file, -1,
                       "line %d, column %d: unknown parameter '%s' for %s: "
                       "did you mean '%s'? (known: %s)",
                       given->key_lines[i], given->key_cols[i], given->keys[i],
                       rule, near, known.len ? known.data : "none");
  else
    rc = smr_error_set(
        err, SMR_ERR_USAGE, file, -1,
        "line %d, column %d: unknown parameter '%s' for %s (known: %s)",
        given->key_lines[i], given->key_cols[i], given->keys[i], rule,
        known.len ? known.data : "none");
  free(names);
  smr_buf_free(&known);
  return rc;
}

static void add_line(smr_params *out, const smrules_param *p,
                     const char *text) {
  smr_buf_printf(&out->lines, "%s%s:%s", out->lines.len ? "\n" : "", p->name,
                 text ? text : "None");
}

static void node_text(const smr_node *n, smr_buf *b) {
  if (n->type != SMR_NODE_LIST) {
    smr_buf_puts(b, n->s ? n->s : "");
    return;
  }
  for (size_t i = 0; i < n->n; i++)
    smr_buf_printf(b, "%s%s", i ? "," : "",
                   n->items[i]->s ? n->items[i]->s : "");
}

int smr_params_apply(const char *rule, const smrules_param *table,
                     const smr_node *given, int rule_line, int rule_col,
                     const char *file, void *settings, smr_params *out,
                     smr_error *err) {
  memset(out, 0, sizeof *out);
  if (given && given->type != SMR_NODE_MAP && given->type != SMR_NODE_NULL)
    return smr_error_set(err, SMR_ERR_USAGE, file, -1,
                         "line %d, column %d: parameters of %s must be a map",
                         given->line, given->col, rule);
  size_t ngiven = given && given->type == SMR_NODE_MAP ? given->n : 0;
  for (size_t i = 0; i < ngiven; i++)
    if (!find_param(table, given->keys[i]))
      return unknown_param(rule, table, given, i, file, err);
  for (const smrules_param *p = table; p->type != SMRULES_PARAM_END; p++) {
    pctx c = {rule, file, p, out, err};
    const smr_node *n = NULL;
    for (size_t i = 0; i < ngiven; i++)
      if (name_matches(p, given->keys[i]))
        n = given->items[i];
    smr_buf text = {0};
    pval v = {NULL, p->default_value, 0, 0};
    if (n) {
      node_text(n, &text);
      v = (pval){n, text.data ? text.data : "", n->line, n->col};
    }
    int rc = SMR_OK;
    if (!is_unset(&v)) {
      rc = store(&c, &v, settings);
      if (rc == SMR_OK)
        smr_strv_push(&out->set, p->name);
      add_line(out, p, v.text);
    } else if (p->flags & SMRULES_P_REQUIRED) {
      rc = smr_error_set(err, SMR_ERR_USAGE, file, -1,
                         "line %d, column %d: %s needs parameter '%s' (%s)",
                         n ? n->line : rule_line, n ? n->col : rule_col, rule,
                         p->name, p->description ? p->description : "");
    } else {
      add_line(out, p, NULL);
    }
    smr_buf_free(&text);
    if (rc != SMR_OK)
      return rc;
  }
  return SMR_OK;
}

bool smr_params_is_set(const smr_params *p, const char *name) {
  return smr_strv_contains(&p->set, name);
}

void smr_params_free(smr_params *p) {
  for (size_t i = 0; i < p->nallocs; i++)
    free(p->allocs[i]);
  free(p->allocs);
  smr_strv_free(&p->set);
  smr_buf_free(&p->lines);
  memset(p, 0, sizeof *p);
}
