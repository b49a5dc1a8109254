/* config_tb.c - rules.yaml `tensorboard:` (docs/tensorboard.md#settings);
 * the schema (schemas/rules.schema.json) has checked the types. */
#include "config/config_tb.h"

#include <stdlib.h>
#include <string.h>

#include "base/regex.h"
#include "format/mode.h"

/* A list of strings as a NULL-terminated array, or NULL when absent. */
static const char *const *words_of(const smr_node *map, const char *key) {
  const smr_node *n = map ? smr_node_get(map, key) : NULL;
  if (!n || n->type != SMR_NODE_LIST)
    return NULL;
  char **v = smr_xcalloc(n->n + 1, sizeof *v);
  for (size_t i = 0; i < n->n; i++)
    v[i] = smr_xstrdup(n->items[i]->s ? n->items[i]->s : "");
  return (const char *const *)v;
}

int smr_config_tb_settings(const smr_config *c, smr_tb_settings *out,
                           smr_error *err) {
  memset(out, 0, sizeof *out);
  const smr_node *tb = c->tensorboard;
  if (!tb)
    return SMR_OK;
  out->train_words = words_of(tb, "train");
  out->eval_words = words_of(tb, "eval");
  out->predict_words = words_of(tb, "predict");
  const smr_node *n = smr_node_get(tb, "default_mode");
  if (n && n->s)
    out->default_mode = smr_mode_from_name(n->s);
  n = smr_node_get(tb, "strip_mode");
  out->strip_mode = n && n->type == SMR_NODE_BOOL && n->b;
  n = smr_node_get(tb, "losses");
  if (n && n->s) {
    smr_regex *re;
    smr_error e;
    if (smr_regex_compile(n->s, &re, &e) != SMR_OK) {
      smr_config_tb_free(out);
      return smr_error_set(err, SMR_ERR_USAGE, c->path, -1,
                           "line %d column %d: tensorboard.losses: %s", n->line,
                           n->col, e.msg);
    }
    smr_regex_free(re);
    out->losses_regex = n->s;
  }
  return SMR_OK;
}

static void free_words(const char *const *w) {
  for (size_t i = 0; w && w[i]; i++)
    free((char *)w[i]);
  free((void *)w);
}

void smr_config_tb_free(smr_tb_settings *s) {
  free_words(s->train_words);
  free_words(s->eval_words);
  free_words(s->predict_words);
  memset(s, 0, sizeof *s);
}
