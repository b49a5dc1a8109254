/* trial_names.c - tensor names and selection: the names kept in memory
 * until the catalog changes, compiled patterns kept until the trial is
 * closed, selection by pattern and by collection. */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/regex.h"
#include "trial/catalog.h"
#include "trial/trial_int.h"

bool smr_trial_sorted_contains(const smr_strv *v, const char *s) {
  size_t lo = 0, hi = v->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(v->v[mid], s);
    if (c == 0)
      return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* ---------------------------------------------------------- collections */

void smr_trial_collection_names(const smr_trial *t, smr_strv *out) {
  for (size_t i = 0; i < t->colls.n; i++)
    smr_strv_push(out, t->colls.items[i].name);
  smr_strv_sort_unique(out);
}

const char *smr_trial_collections_error(const smr_trial *t) {
  return t->collections_error;
}

static int cached_names(smr_trial *t, smr_error *err) {
  if (t->names_valid)
    return SMR_OK;
  smr_strv_free(&t->names);
  int rc = SMR_OK;
  if (t->tb) /* TensorBoard */
    smr_tb_tensor_names(t->tb, &t->names);
  else
    rc = smr_catalog_tensor_names(t->cat, &t->names, err);
  t->names_valid = rc == SMR_OK;
  return rc;
}

int smr_trial_tensor_names(smr_trial *t, smr_strv *out, smr_error *err) {
  pthread_mutex_lock(&t->mu);
  int rc = cached_names(t, err);
  for (size_t i = 0; rc == SMR_OK && i < t->names.n; i++)
    smr_strv_push(out, t->names.v[i]);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

bool smr_trial_has_tensor(smr_trial *t, const char *name) {
  pthread_mutex_lock(&t->mu);
  bool ok = cached_names(t, NULL) == SMR_OK &&
            smr_trial_sorted_contains(&t->names, name);
  pthread_mutex_unlock(&t->mu);
  return ok;
}

/* The compiled pattern, kept in the trial (*kept true) or the caller's to
 * free. */
static int regex_of(smr_trial *t, const char *pattern, smr_regex **re,
                    bool *kept, smr_error *err) {
  pthread_mutex_lock(&t->mu);
  struct regex_slot *free_slot = NULL;
  for (size_t i = 0; i < REGEX_SLOTS; i++) {
    struct regex_slot *r = &t->regexes[i];
    if (r->pattern && strcmp(r->pattern, pattern) == 0) {
      *re = r->re;
      *kept = true;
      pthread_mutex_unlock(&t->mu);
      return SMR_OK;
    }
    if (!r->pattern && !free_slot)
      free_slot = r;
  }
  int rc = smr_regex_compile(pattern, re, err);
  *kept = rc == SMR_OK && free_slot;
  if (*kept) {
    free_slot->pattern = smr_xstrdup(pattern);
    free_slot->re = *re;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void smr_trial_forget_regexes(smr_trial *t) {
  for (size_t i = 0; i < REGEX_SLOTS; i++) {
    free(t->regexes[i].pattern);
    smr_regex_free(t->regexes[i].re);
  }
}

int smr_trial_tensor_names_regex(smr_trial *t, const char *const *regexes,
                                 size_t n, smr_regex_meter *meter,
                                 smr_strv *out, smr_error *err) {
  smr_strv names = {0};
  int rc = smr_trial_tensor_names(t, &names, err);
  smr_regex **res = smr_xcalloc(n ? n : 1, sizeof *res);
  bool *kept = smr_xcalloc(n ? n : 1, sizeof *kept);
  for (size_t k = 0; rc == SMR_OK && k < n; k++)
    rc = regex_of(t, regexes[k], &res[k], &kept[k], err);
  bool spent = false;
  for (size_t i = 0; rc == SMR_OK && !spent && i < names.n; i++)
    for (size_t k = 0; k < n; k++) {
      if (smr_regex_search_metered(res[k], names.v[i], meter)) {
        smr_strv_push(out, names.v[i]);
        break;
      }
      spent = meter && meter->exhausted;
      if (spent)
        break;
    }
  for (size_t k = 0; k < n; k++)
    if (!kept[k])
      smr_regex_free(res[k]);
  free(res);
  free(kept);
  smr_strv_free(&names);
  return rc;
}

int smr_trial_collection_members(smr_trial *t, const char *collection,
                                 smr_regex_meter *meter, smr_strv *out,
                                 smr_error *err) {
  const smr_collection *c = NULL;
  for (size_t i = 0; i < t->colls.n; i++)
    if (strcmp(t->colls.items[i].name, collection) == 0)
      c = &t->colls.items[i];
  if (!c)
    return SMR_OK;
  smr_strv members = {0};
  int rc =
      smr_trial_tensor_names_regex(t, (const char *const *)c->include_regex,
                                   c->n_include_regex, meter, &members, err);
  for (size_t i = 0; rc == SMR_OK && i < c->n_tensor_names; i++)
    if (smr_trial_has_tensor(t, c->tensor_names[i]))
      smr_strv_push(&members, c->tensor_names[i]);
  smr_strv_sort_unique(&members);
  for (size_t i = 0; i < members.n; i++)
    smr_strv_take(out, members.v[i]);
  free(members.v);
  return rc;
}
