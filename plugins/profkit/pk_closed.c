/* pk_closed.c - the keys of a dict moved out of memory window by window
 * (see profkit.h). */
#include <math.h>
#include <string.h>

#include "profkit.h"

void pk_closed_init(pk_closed *c) {
  memset(c, 0, sizeof *c);
  c->recent = pk_dict_new(true, NULL);
  c->old_max = -INFINITY;
}

void pk_closed_free(pk_closed *c) {
  pk_hist_free(&c->keys);
  pk_dict_free(c->recent);
  c->recent = NULL;
}

void pk_closed_clear(pk_closed *c) {
  pk_hist_clear(&c->keys);
  pk_dict_clear(c->recent);
  c->old_max = -INFINITY;
}

void pk_closed_begin(pk_closed *c) {
  for (size_t i = 0; i < pk_dict_len(c->recent); i++) {
    double k = pk_dict_at(c->recent, i)->nkey;
    if (k > c->old_max)
      c->old_max = k;
  }
  pk_dict_clear(c->recent);
}

size_t pk_closed_push(pk_closed *c, double key) {
  size_t pos = c->keys.n;
  pk_hist_push(&c->keys, key);
  pk_dict_nput(c->recent, key, false, NULL)->num = (double)pos;
  return pos;
}

size_t pk_closed_find(const pk_closed *c, double key) {
  pk_entry *e = pk_dict_nget(c->recent, key);
  if (e)
    return (size_t)e->num + 1;
  if (!(key <= c->old_max)) /* above every older key (or NaN): new */
    return 0;
  return pk_hist_rfind(&c->keys, key);
}
