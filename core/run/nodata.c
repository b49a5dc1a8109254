/* nodata.c - what a rule that evaluated nothing looked for, and what the
 * trial has (nodata.h). */
#include "run/nodata.h"

#include <stdlib.h>
#include <string.h>

#include "base/suggest.h"

typedef enum { SEL_COLLECTION, SEL_REGEX, SEL_TENSOR } sel_kind;

static const char *const KIND_NAMES[] = {"collection", "regex", "tensor"};

/* A parameter selects data by its name and flags: collections
 * (collection_names, collection_name), regexes (SMRULES_P_REGEX, or a name
 * with "regex" for script parameters), tensor names (a name with
 * "tensor").  Everything else (thresholds, modes) selects nothing. */
static bool kind_of(const char *name, bool regex_flag, sel_kind *out) {
  if (strstr(name, "collection"))
    *out = SEL_COLLECTION;
  else if (regex_flag || strstr(name, "regex"))
    *out = SEL_REGEX;
  else if (strstr(name, "tensor"))
    *out = SEL_TENSOR;
  else
    return false;
  return true;
}

typedef struct sel {
  const char *param;
  sel_kind kind;
  const char *value;
} sel;

typedef struct sels {
  sel *v;
  size_t n;
  smr_strv keep; /* strings the selections point into (Lua lines) */
} sels;

static void add(sels *s, const char *param, sel_kind k, const char *value) {
  s->v = smr_xrealloc(s->v, (s->n + 1) * sizeof *s->v);
  s->v[s->n++] = (sel){param, k, value};
}

static void from_table(sels *s, const smrules_param *table,
                       const void *settings) {
  for (const smrules_param *p = table; p->type != SMRULES_PARAM_END; p++) {
    sel_kind k;
    if ((p->type != SMRULES_PARAM_STRING && p->type != SMRULES_PARAM_STRLIST) ||
        !kind_of(p->name, p->flags & SMRULES_P_REGEX, &k))
      continue;
    const char *field = (const char *)settings + p->offset;
    if (p->type == SMRULES_PARAM_STRING) {
      const char *v;
      memcpy(&v, field, sizeof v);
      if (v && *v)
        add(s, p->name, k, v);
      continue;
    }
    smrules_strlist l;
    memcpy(&l, field, sizeof l);
    for (size_t i = 0; i < l.n; i++)
      if (l.v[i] && *l.v[i])
        add(s, p->name, k, l.v[i]);
  }
}

/* Script parameters: "name:value" lines, lists joined with commas. */
static void from_lines(sels *s, const smr_params *p) {
  const char *text = p->lines.data ? p->lines.data : "";
  while (*text) {
    size_t len = strcspn(text, "\n");
    char *line = smr_xstrndup(text, len);
    text += len + (text[len] == '\n');
    char *colon = strchr(line, ':');
    sel_kind k;
    if (!colon) {
      free(line);
      continue;
    }
    *colon = '\0';
    smr_strv_take(&s->keep, line);
    if (!kind_of(line, false, &k) || strcmp(colon + 1, "None") == 0)
      continue;
    char *save = NULL;
    for (char *item = strtok_r(colon + 1, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
      while (*item == ' ')
        item++;
      if (*item)
        add(s, line, k, item);
    }
  }
}

/* The letters of a regex without its operators: what the user meant to
 * name (".*relu_output" -> "relu_output"), for did-you-mean. */
static char *regex_literal(const char *re) {
  char *out = smr_xmalloc(strlen(re) + 1);
  size_t n = 0;
  for (const char *c = re; *c; c++)
    if (!strchr(".*+?^$()[]{}|\\", *c))
      out[n++] = *c;
  out[n] = '\0';
  return out;
}

/* The tensor nearest to `word`: by edit distance, else the first that
 * contains it (a regex's literal part). */
static const char *near_tensor(const char *word, const smr_strv *names) {
  if (!*word)
    return NULL;
  const char *n = smr_suggest(word, (const char *const *)names->v, names->n);
  for (size_t i = 0; !n && i < names->n; i++)
    if (strcasestr(names->v[i], word))
      n = names->v[i];
  return n;
}

typedef struct found {
  bool exists;      /* collections: the trial has it */
  size_t matches;   /* saved tensors selected */
  const char *near; /* did you mean */
} found;

static found look(smr_trial *t, const sel *s, const smr_strv *names,
                  const smr_strv *colls) {
  found f = {0};
  smr_strv out = {0};
  smr_error e;
  switch (s->kind) {
  case SEL_COLLECTION:
    f.exists = smr_strv_contains(colls, s->value);
    if (f.exists &&
        smr_trial_collection_members(t, s->value, NULL, &out, &e) == SMR_OK)
      f.matches = out.n;
    if (!f.exists)
      f.near = smr_suggest(s->value, (const char *const *)colls->v, colls->n);
    break;
  case SEL_REGEX:
    if (smr_trial_tensor_names_regex(t, &s->value, 1, NULL, &out, &e) == SMR_OK)
      f.matches = out.n;
    if (!f.matches) {
      char *lit = regex_literal(s->value);
      f.near = near_tensor(lit, names);
      free(lit);
    }
    break;
  case SEL_TENSOR:
    f.exists = smr_trial_has_tensor(t, s->value);
    f.matches = f.exists;
    if (!f.exists)
      f.near = near_tensor(s->value, names);
    break;
  }
  smr_strv_free(&out);
  return f;
}

static void sentence(const sel *s, const found *f, size_t ntensors,
                     smr_strv *lines) {
  smr_buf b = {0};
  switch (s->kind) {
  case SEL_COLLECTION:
    if (!f->exists)
      smr_buf_printf(&b, "%s: no collection '%s' in the trial", s->param,
                     s->value);
    else
      smr_buf_printf(&b, "%s: collection '%s' holds %zu saved tensor%s",
                     s->param, s->value, f->matches,
                     f->matches == 1 ? "" : "s");
    break;
  case SEL_REGEX:
    if (f->matches)
      smr_buf_printf(&b, "%s: '%s' matches %zu of the trial's %zu tensors",
                     s->param, s->value, f->matches, ntensors);
    else
      smr_buf_printf(&b, "%s: '%s' matches none of the trial's %zu tensors",
                     s->param, s->value, ntensors);
    break;
  case SEL_TENSOR:
    smr_buf_printf(&b, "%s: tensor '%s' %s", s->param, s->value,
                   f->exists ? "is saved" : "was never saved");
    break;
  }
  if (f->near)
    smr_buf_printf(&b, "; did you mean '%s'?", f->near);
  smr_strv_take(lines, b.data);
}

static void names_text(smr_buf *b, const smr_strv *v, size_t shown) {
  for (size_t i = 0; i < v->n && i < shown; i++)
    smr_buf_printf(b, "%s%s", i ? ", " : "", v->v[i]);
  if (v->n > shown)
    smr_buf_printf(b, ", ... (%zu in all)", v->n);
}

#define SHOWN 5 /* tensor names in the sentence; JSON lists up to 100 */

static void trial_has(smr_trial *t, const smr_strv *names,
                      const smr_strv *colls, smr_nodata *out, smr_jw *w) {
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  smr_buf b = {0};
  smr_buf_printf(&b, "the trial has %zu step%s and %zu tensor%s", steps.n,
                 steps.n == 1 ? "" : "s", names->n, names->n == 1 ? "" : "s");
  if (names->n) {
    smr_buf_puts(&b, ": ");
    names_text(&b, names, SHOWN);
  }
  if (colls->n) {
    smr_buf_puts(&b, "; collections: ");
    names_text(&b, colls, 100);
  }
  smr_strv_take(&out->lines, b.data);
  smr_jw_key(w, "trial_has");
  smr_jw_obj(w);
  smr_jw_key(w, "steps");
  smr_jw_int(w, (int64_t)steps.n);
  smr_jw_key(w, "tensors");
  smr_jw_int(w, (int64_t)names->n);
  smr_jw_key(w, "tensor_names");
  smr_jw_arr(w);
  for (size_t i = 0; i < names->n && i < 100; i++)
    smr_jw_str(w, names->v[i]);
  smr_jw_arr_end(w);
  smr_jw_key(w, "collections");
  smr_jw_arr(w);
  for (size_t i = 0; i < colls->n; i++)
    smr_jw_str(w, colls->v[i]);
  smr_jw_arr_end(w);
  smr_jw_obj_end(w);
  smr_i64v_free(&steps);
}

void smr_nodata_describe(smr_trial *t, const smrules_param *table,
                         const void *settings, const smr_params *params,
                         smr_nodata *out) {
  memset(out, 0, sizeof *out);
  sels s = {0};
  if (table && settings)
    from_table(&s, table, settings);
  else if (params)
    from_lines(&s, params);
  smr_strv names = {0}, colls = {0};
  smr_error e;
  smr_trial_tensor_names(t, &names, &e);
  smr_trial_collection_names(t, &colls);
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "looked_for");
  smr_jw_arr(&w);
  for (size_t i = 0; i < s.n; i++) {
    found f = look(t, &s.v[i], &names, &colls);
    sentence(&s.v[i], &f, names.n, &out->lines);
    smr_jw_obj(&w);
    smr_jw_key(&w, "parameter");
    smr_jw_str(&w, s.v[i].param);
    smr_jw_key(&w, "kind");
    smr_jw_str(&w, KIND_NAMES[s.v[i].kind]);
    smr_jw_key(&w, "value");
    smr_jw_str(&w, s.v[i].value);
    smr_jw_key(&w, "matches");
    smr_jw_int(&w, (int64_t)f.matches);
    if (s.v[i].kind == SEL_COLLECTION) {
      smr_jw_key(&w, "exists");
      smr_jw_bool(&w, f.exists);
    }
    smr_jw_key(&w, "did_you_mean");
    if (f.near)
      smr_jw_str(&w, f.near);
    else
      smr_jw_null(&w);
    smr_jw_obj_end(&w);
  }
  smr_jw_arr_end(&w);
  trial_has(t, &names, &colls, out, &w);
  smr_jw_obj_end(&w);
  out->json = smr_jw_finish(&w);
  smr_strv_free(&names);
  smr_strv_free(&colls);
  smr_strv_free(&s.keep);
  free(s.v);
}

void smr_nodata_free(smr_nodata *d) {
  smr_strv_free(&d->lines);
  free(d->json);
  memset(d, 0, sizeof *d);
}
