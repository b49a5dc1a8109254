/* config.c - rules.yaml: read, parse (yaml.c), validate against the
 * embedded schemas/rules.schema.json (schema.c), then build the list of
 * rule instances.  The checks the schema cannot express (unique instance
 * names, step range, script existence) are done here, with positions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/embedded.h"
#include "base/safefs.h"
#include "config/config.h"

#define CONFIG_MAX_BYTES (4u << 20)
#define SCHEMA_PATH "schemas/rules.schema.json"

static int config_error(smr_error *err, const smr_config *c, const smr_node *n,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int config_error(smr_error *err, const smr_config *c, const smr_node *n,
                        const char *fmt, ...) {
  char what[SMR_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return smr_error_set(err, SMR_ERR_USAGE, c->path, -1,
                       "line %d, column %d: %s", n->line, n->col, what);
}

/* ---- paths ------------------------------------------------------------- */

static char *resolve_path(const char *base_dir, const char *p) {
  if (p[0] == '/' || !base_dir || !base_dir[0])
    return smr_xstrdup(p);
  size_t n = strlen(base_dir);
  const char *sep = base_dir[n - 1] == '/' ? "" : "/";
  return smr_xasprintf("%s%s%s", base_dir, sep, p);
}

/* "dir/checks/my_rule.lua" -> "my_rule" */
static char *file_stem(const char *p) {
  const char *base = strrchr(p, '/');
  base = base ? base + 1 : p;
  const char *dot = strrchr(base, '.');
  size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  return smr_xstrndup(base, len);
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return smr_xstrdup(".");
  if (slash == path)
    return smr_xstrdup("/");
  return smr_xstrndup(path, (size_t)(slash - path));
}

/* ---- one rule item ----------------------------------------------------- */

static const char *string_of(const smr_node *item, const char *key) {
  const smr_node *v = smr_node_get(item, key);
  return v && v->type == SMR_NODE_STRING ? v->s : NULL;
}

static int64_t step_of(const smr_node *item, const char *key) {
  const smr_node *v = smr_node_get(item, key);
  return v && v->type == SMR_NODE_INT ? v->i : -1;
}

static int check_script(const smr_config *c, const smr_node *at,
                        const char *what, const char *resolved,
                        smr_error *err) {
  struct stat st;
  if (stat(resolved, &st) != 0)
    return config_error(err, c, at, "%s '%s' not found (looked for %s: %s)",
                        what, at->s, resolved, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return config_error(err, c, at, "%s '%s' is not a regular file (%s)", what,
                        at->s, resolved);
  return SMR_OK;
}

static int check_lua_script(const smr_config *c, const smr_node *at,
                            const char *resolved, smr_error *err) {
  return check_script(c, at, "lua script", resolved, err);
}

static int check_steps(const smr_config *c, const smr_node *item,
                       const smr_rule_config *r, smr_error *err) {
  if (r->start_step < 0 || r->end_step < 0 || r->end_step > r->start_step)
    return SMR_OK;
  return config_error(err, c, smr_node_get(item, "end_step"),
                      "end_step (%lld) must be greater than start_step "
                      "(%lld); end_step is exclusive",
                      (long long)r->end_step, (long long)r->start_step);
}

/* The node naming the instance: `name`, else `rule`/`lua`/`plugin`. */
static const smr_node *name_node(const smr_node *item) {
  const char *keys[] = {"name", "rule", "lua", "plugin", "python"};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    const smr_node *v = smr_node_get(item, keys[k]);
    if (v)
      return v;
  }
  return item;
}

/* Fills everything but checks nothing, so names exist before any check. */
static void build_rule(const smr_config *c, const smr_node *item,
                       smr_rule_config *r) {
  r->line = item->line;
  r->col = item->col;
  const char *rule = string_of(item, "rule");
  const char *lua = string_of(item, "lua");
  const char *plugin = string_of(item, "plugin");
  const char *python = string_of(item, "python");
  const char *pyclass = string_of(item, "class");
  const char *name = string_of(item, "name");
  r->rule = rule ? smr_xstrdup(rule) : NULL;
  r->lua = lua ? resolve_path(c->base_dir, lua) : NULL;
  r->plugin = plugin ? resolve_path(c->base_dir, plugin) : NULL;
  r->python = python ? resolve_path(c->base_dir, python) : NULL;
  r->python_class = pyclass ? smr_xstrdup(pyclass) : NULL;
  if (name)
    r->name = smr_xstrdup(name);
  else if (rule)
    r->name = smr_xstrdup(rule);
  else if (python && pyclass) /* a class names the rule, as in SageMaker */
    r->name = smr_xstrdup(pyclass);
  else
    r->name = file_stem(lua ? lua : plugin ? plugin : python);
  r->parameters = smr_node_value(item, "parameters");
  r->actions = smr_node_value(item, "actions");
  r->start_step = step_of(item, "start_step");
  r->end_step = step_of(item, "end_step");
}

/* The name becomes a folder under rule-output/ and a key of the state:
 * one plain path component. */
static int check_name(const smr_config *c, const smr_node *item,
                      const smr_rule_config *r, smr_error *err) {
  const char *why;
  if (smr_safe_name(r->name, &why))
    return SMR_OK;
  return config_error(err, c, name_node(item),
                      "rule name '%s' %s; a rule name becomes a folder under "
                      "rule-output/, so it must be one plain file name",
                      r->name, why);
}

static int check_rule(const smr_config *c, const smr_node *item,
                      const smr_rule_config *r, smr_error *err) {
  int nrc = check_name(c, item, r, err);
  if (nrc)
    return nrc;
  if (r->lua) {
    int rc = check_lua_script(c, smr_node_get(item, "lua"), r->lua, err);
    if (rc)
      return rc;
  }
  if (r->python) {
    int rc = check_script(c, smr_node_get(item, "python"), "python rule",
                          r->python, err);
    if (rc)
      return rc;
  }
  if (r->python_class && !r->python)
    return config_error(err, c, smr_node_get(item, "class"),
                        "'class' names the class of a 'python' rule; this "
                        "rule has no 'python' file");
  return check_steps(c, item, r, err);
}

typedef struct name_ref {
  const char *name;
  size_t index;
} name_ref;

static int cmp_name_ref(const void *pa, const void *pb) {
  const name_ref *a = pa, *b = pb;
  int d = strcmp(a->name, b->name);
  if (d)
    return d;
  return (a->index > b->index) - (a->index < b->index);
}

/* The rule whose name repeats an earlier one, earliest in the file, and
 * that earlier one; SIZE_MAX when all names are unique.  Sorting keeps this
 * O(n log n) for very long rule lists. */
static size_t first_duplicate_name(const smr_config *c, size_t *earlier) {
  name_ref *refs = smr_xmalloc(c->n_rules * sizeof *refs);
  for (size_t k = 0; k < c->n_rules; k++)
    refs[k] = (name_ref){c->rules[k].name, k};
  qsort(refs, c->n_rules, sizeof *refs, cmp_name_ref);
  size_t second = SIZE_MAX;
  for (size_t k = 1; k < c->n_rules; k++)
    if (strcmp(refs[k].name, refs[k - 1].name) == 0 &&
        (k < 2 || strcmp(refs[k].name, refs[k - 2].name) != 0) &&
        refs[k].index < second) {
      second = refs[k].index;
      *earlier = refs[k - 1].index;
    }
  free(refs);
  return second;
}

static int duplicate_name_error(const smr_config *c, const smr_node *rules,
                                size_t k, size_t earlier, smr_error *err) {
  const smr_node *first = name_node(rules->items[earlier]);
  return config_error(err, c, name_node(rules->items[k]),
                      "duplicate rule name '%s' (first used at line %d, "
                      "column %d); give one of them a different 'name'",
                      c->rules[k].name, first->line, first->col);
}

/* Errors are reported in file order, whichever check finds them. */
static int build_rules(smr_config *c, smr_error *err) {
  const smr_node *rules = smr_node_get(c->root, "rules");
  c->rules = smr_xcalloc(rules->n, sizeof *c->rules);
  c->n_rules = rules->n;
  for (size_t k = 0; k < rules->n; k++)
    build_rule(c, rules->items[k], &c->rules[k]);
  size_t earlier = 0, dup = first_duplicate_name(c, &earlier);
  for (size_t k = 0; k < rules->n; k++) {
    if (k == dup)
      return duplicate_name_error(c, rules, k, earlier, err);
    int rc = check_rule(c, rules->items[k], &c->rules[k], err);
    if (rc)
      return rc;
  }
  return SMR_OK;
}

/* ---- entry points ------------------------------------------------------ */

int smr_config_parse(const char *yaml, size_t len, const char *name,
                     const char *base_dir, smr_config *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  out->path = smr_xstrdup(name ? name : "<string>");
  out->base_dir = smr_xstrdup(base_dir ? base_dir : ".");
  int rc = smr_yaml_parse(yaml, len, out->path, &out->root, err);
  if (!rc && out->root->type == SMR_NODE_NULL)
    rc = config_error(err, out, out->root,
                      "the file is empty (expected a map with a 'rules' "
                      "list)");
  if (!rc) {
    const char *schema = smr_embedded(SCHEMA_PATH, NULL);
    rc = smr_schema_validate(schema, out->root, out->path, err);
  }
  if (!rc)
    rc = build_rules(out, err);
  if (rc) {
    smr_config_free(out);
    return rc;
  }
  out->actions = smr_node_value(out->root, "actions");
  out->lua = smr_node_value(out->root, "lua");
  out->tensorboard = smr_node_value(out->root, "tensorboard");
  return SMR_OK;
}

int smr_config_load(const char *path, smr_config *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  char *text;
  size_t len;
  if (smr_read_file(path, CONFIG_MAX_BYTES, &text, &len, err) != SMR_OK) {
    if (err) /* a configuration problem for the CLI */
      err->status = SMR_ERR_USAGE;
    return SMR_ERR_USAGE;
  }
  char *dir = dir_of(path);
  int rc = smr_config_parse(text, len, path, dir, out, err);
  free(dir);
  free(text);
  return rc;
}

void smr_config_free(smr_config *c) {
  if (!c)
    return;
  for (size_t k = 0; k < c->n_rules; k++) {
    free(c->rules[k].name);
    free(c->rules[k].rule);
    free(c->rules[k].lua);
    free(c->rules[k].plugin);
    free(c->rules[k].python);
    free(c->rules[k].python_class);
  }
  free(c->rules);
  smr_node_free(c->root);
  free(c->path);
  free(c->base_dir);
  memset(c, 0, sizeof *c);
}
