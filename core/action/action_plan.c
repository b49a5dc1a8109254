/* action_plan.c - rules.yaml `actions` (top-level settings and each rule's
 * list) turned into the plan the dispatcher runs, for every kind through
 * its registration (action_kind.h): its settings table is read by the
 * generic reader (config/settings.c), its `configure` does the checks a
 * table cannot express (addresses, which settings go together...), and
 * each item of a rule's list goes to the kind that matches its name.  The
 * schema has already checked the shape; every error here has the line and
 * column of the offending value. */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "action/action_kind.h"
#include "base/suggest.h"

#define SMR_ACTION_KIND(sym) &sym,
const smr_action_kind *const smr_action_kinds[] = {
#include "action/action_kinds.h"
};
#undef SMR_ACTION_KIND
const size_t smr_n_action_kinds =
    sizeof smr_action_kinds / sizeof *smr_action_kinds;

/* ------------------------------------------------------ simple checks */

bool smr_act_has_space_or_control(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s <= ' ' || *s == 0x7f)
      return true;
  return false;
}

/* A host name: dot-separated labels of letters, digits and '-' (not at
 * either end of a label), 1-63 characters each.  One label is a name too:
 * RFC 5321 allows user@localhost, and local relays use it. */
static bool valid_domain(const char *d) {
  size_t label = 0;
  char prev = '.';
  for (const char *q = d;; q++) {
    if (*q == '.' || *q == '\0') {
      if (label == 0 || prev == '-')
        return false;
      if (*q == '\0')
        return true;
      label = 0;
    } else if (isalnum((unsigned char)*q) || (*q == '-' && label > 0)) {
      if (++label > 63)
        return false;
    } else {
      return false;
    }
    prev = *q;
  }
}

/* A local part without spaces, quotes or brackets, '@', a host name: nothing
 * that could break out of an address in a mail header or SMTP command. */
bool smr_act_valid_email(const char *s) {
  const char *at = strchr(s, '@');
  if (!at || at == s || strchr(at + 1, '@') ||
      smr_act_has_space_or_control(s) || strpbrk(s, "<>,;:\"()[]\\"))
    return false;
  return valid_domain(at + 1);
}

static bool word_chars(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_')
      return false;
  return n > 0;
}

/* SageMaker: ^[a-z0-9]+[@]\w+[.]\w{2,3}$ on the lower-cased text. */
bool smr_act_sagemaker_email(const char *s) {
  const char *at = strchr(s, '@');
  if (!at || at == s)
    return false;
  for (const char *q = s; q < at; q++)
    if (!islower((unsigned char)*q) && !isdigit((unsigned char)*q) &&
        !isupper((unsigned char)*q))
      return false;
  const char *dot = strchr(at + 1, '.');
  if (!dot || !word_chars(at + 1, (size_t)(dot - at - 1)))
    return false;
  size_t tld = strlen(dot + 1);
  return tld >= 2 && tld <= 3 && word_chars(dot + 1, tld);
}

bool smr_act_valid_phone(const char *s) {
  if (s[0] != '+')
    return false;
  size_t n = 0;
  for (const char *q = s + 1; *q; q++, n++)
    if (!isdigit((unsigned char)*q))
      return false;
  return n >= 1 && n <= 15;
}

bool smr_act_valid_prefix(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '-')
      return false;
  return true;
}

bool smr_act_valid_name_token(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
      return false;
  return true;
}

bool smr_act_valid_env_name(const char *s) {
  if (!isalpha((unsigned char)s[0]) && s[0] != '_')
    return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_')
      return false;
  return true;
}

bool smr_act_has_scheme(const char *url, const char *const *schemes) {
  for (size_t i = 0; schemes[i]; i++) {
    size_t n = strlen(schemes[i]);
    if (strncasecmp(url, schemes[i], n) == 0 && url[n] && url[n] != '/')
      return !smr_act_has_space_or_control(url);
  }
  return false;
}

static const struct {
  const char *name;
  int sig;
} SIGNALS[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
               {"ABRT", SIGABRT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
               {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
               {"STOP", SIGSTOP}, {"ALRM", SIGALRM}};

int smr_act_signal_number(const char *name) {
  if (isdigit((unsigned char)name[0])) {
    char *end;
    long v = strtol(name, &end, 10);
    return *end || v < 1 || v > 64 ? -1 : (int)v;
  }
  if (strncasecmp(name, "SIG", 3) == 0)
    name += 3;
  for (size_t i = 0; i < sizeof SIGNALS / sizeof *SIGNALS; i++)
    if (strcasecmp(name, SIGNALS[i].name) == 0)
      return SIGNALS[i].sig;
  return -1;
}

const char *smr_act_signal_name(int sig) {
  for (size_t i = 0; i < sizeof SIGNALS / sizeof *SIGNALS; i++)
    if (SIGNALS[i].sig == sig)
      return SIGNALS[i].name;
  return NULL;
}

int smr_act_check_secret_file(const char *path, smr_error *err) {
  return smr_settings_check_private_file(path, err);
}

/* ------------------------------------------------------------ repeat */

int smr_act_parse_repeat(smr_act_parse *c, const smr_node *v, smr_repeat *out) {
  const char *mode = NULL;
  const smr_node *mode_at = v, *n = NULL;
  if (v->type == SMR_NODE_STRING) {
    mode = v->s;
  } else if (v->type == SMR_NODE_MAP) {
    mode_at = smr_node_value(v, "mode");
    mode = mode_at && mode_at->type == SMR_NODE_STRING ? mode_at->s : NULL;
    n = smr_node_value(v, "n");
    if (!mode && n)
      mode = "every_nth";
    if (!mode_at)
      mode_at = v;
  }
  if (!mode || (strcmp(mode, "first") && strcmp(mode, "every") &&
                strcmp(mode, "every_nth")))
    return smr_settings_error(&c->sc, mode_at,
                              "repeat: expected first, every, or "
                              "{mode: every_nth, n: N}");
  if (strcmp(mode, "every_nth") == 0) {
    if (!n)
      return smr_settings_error(
          &c->sc, v,
          "repeat: every_nth needs n, e.g. {mode: every_nth, "
          "n: 10}");
    if (n->type != SMR_NODE_INT || n->i < 1)
      return smr_settings_error(&c->sc, n,
                                "repeat: n: expected an integer >= 1");
    *out = (smr_repeat){SMR_REPEAT_EVERY_NTH, n->i};
    return SMR_OK;
  }
  if (n)
    return smr_settings_error(&c->sc, n,
                              "repeat: n is only used with mode every_nth");
  *out = (smr_repeat){
      strcmp(mode, "first") ? SMR_REPEAT_EVERY : SMR_REPEAT_FIRST, 0};
  return SMR_OK;
}

bool smr_repeat_due(const smr_repeat *r, int64_t ordinal) {
  switch (r->mode) {
  case SMR_REPEAT_FIRST:
    return ordinal == 1;
  case SMR_REPEAT_EVERY:
    return ordinal >= 1;
  default:
    return ordinal >= 1 && (ordinal - 1) % r->n == 0;
  }
}

/* --------------------------------------------------------- templates */

int smr_act_check_templates(smr_act_parse *c, const smr_node *list,
                            const smr_strv *argv, smr_strv *arg_names) {
  for (size_t i = 0; i < argv->n; i++) {
    char *bad = smr_act_check_template(argv->v[i], arg_names);
    if (bad) {
      const smr_node *at = list->type == SMR_NODE_LIST ? list->items[i] : list;
      int rc = smr_settings_error(
          &c->sc, at,
          "unknown placeholder {%s} (known: {rule}, "
          "{rule_type}, {step}, {trigger}, {status}, {trial}, "
          "{job}, {action}, {message}, {time}, {args.NAME}; write "
          "{{ and }} for literal braces)",
          bad);
      free(bad);
      return rc;
    }
  }
  return SMR_OK;
}

/* ---------------------------------------------------------- settings */

static size_t kind_index(const smr_action_kind *k) {
  for (size_t i = 0; i < smr_n_action_kinds; i++)
    if (smr_action_kinds[i] == k)
      return i;
  return smr_n_action_kinds;
}

void *smr_act_plan_settings(const smr_act_plan *p, const smr_action_kind *k) {
  size_t i = kind_index(k);
  return p->settings && i < smr_n_action_kinds ? p->settings[i] : NULL;
}

/* Defaults, then actions.<key> when given: named kinds (hooks) first, so
 * the other kinds' settings may name one of them. */
static int read_settings(smr_act_parse *c, bool named) {
  for (size_t i = 0; i < smr_n_action_kinds; i++) {
    const smr_action_kind *k = smr_action_kinds[i];
    if (!k->settings_key || k->named != named)
      continue;
    void *s = c->p->settings[i] = smr_xcalloc(1, k->settings_size);
    const smr_node *m = smr_node_value(c->cfg->actions, k->settings_key);
    int rc = k->named ? SMR_OK : smr_settings_read(&c->sc, k->settings, m, s);
    if (!rc && k->configure)
      rc = k->configure(c, m, s);
    if (rc)
      return rc;
  }
  return SMR_OK;
}

/* -------------------------------------------------------- rule items */

static bool name_is(const smr_action_kind *k, const char *name) {
  if (strcasecmp(k->name, name) == 0)
    return true;
  bool hit = false;
  char *copy = k->aliases ? smr_xstrdup(k->aliases) : NULL;
  for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL;
       t && !hit; t = strtok_r(NULL, ",", &save))
    hit = strcasecmp(t + strspn(t, " "), name) == 0;
  free(copy);
  return hit;
}

static const smr_action_kind *find_kind(const smr_act_parse *c,
                                        const char *name) {
  for (size_t i = 0; i < smr_n_action_kinds; i++) {
    const smr_action_kind *k = smr_action_kinds[i];
    if (k->match ? k->match(c, name) : name_is(k, name))
      return k;
  }
  return NULL;
}

static int unknown_kind(smr_act_parse *c, const smr_act_src *s) {
  smr_buf names = {0}, hints = {0};
  smr_buf_puts(&names, "");
  smr_buf_puts(&hints, "");
  size_t n = 0, shown = 0;
  for (size_t i = 0; i < smr_n_action_kinds; i++) {
    n += !smr_action_kinds[i]->match;
    if (smr_action_kinds[i]->hint)
      smr_action_kinds[i]->hint(c, &hints);
  }
  for (size_t i = 0; i < smr_n_action_kinds; i++) {
    const smr_action_kind *k = smr_action_kinds[i];
    if (k->match)
      continue;
    shown++;
    smr_buf_printf(&names, "%s%s",
                   shown == 1                 ? ""
                   : shown == n && !hints.len ? " or "
                                              : ", ",
                   k->name);
  }
  int rc =
      smr_settings_error(&c->sc, s->at, "unknown action '%s' (expected %s%s)",
                         s->name, names.data, hints.data);
  smr_buf_free(&names);
  smr_buf_free(&hints);
  return rc;
}

/* The map form's keys: only the kind's and `repeat` (a near miss gets a
 * "did you mean", as rule parameters do). */
static int item_keys(smr_act_parse *c, const smr_act_src *s,
                     const char *const *keys) {
  const smr_node *v = s->value;
  const char *names[16];
  size_t n = 0;
  for (; keys && keys[n] && n + 1 < 16; n++)
    names[n] = keys[n];
  names[n++] = "repeat";
  for (size_t i = 0; keys && i < v->n; i++) {
    bool known = false;
    for (size_t k = 0; k < n; k++)
      known |= strcmp(v->keys[i], names[k]) == 0;
    const char *near = known ? NULL : smr_suggest(v->keys[i], names, n);
    if (!known)
      return smr_settings_error(&c->sc, v->items[i],
                                "%s: unknown key '%s'%s%s%s", s->name,
                                v->keys[i], near ? ": did you mean '" : "",
                                near ? near : "", near ? "'?" : "");
  }
  return SMR_OK;
}

static void item_free(smr_act_item *it) {
  if (it->kind && it->kind->free_item && it->data)
    it->kind->free_item(it->data);
  free(it->key);
  free(it->label);
  free(it->target);
  memset(it, 0, sizeof *it);
}

static int parse_item(smr_act_parse *c, const smr_node *n, smr_act_item *it) {
  smr_act_src s = {.at = n};
  if (n->type == SMR_NODE_STRING) {
    s.name = n->s;
  } else if (n->type == SMR_NODE_MAP && n->n == 1) {
    s.name = n->keys[0];
    s.value = n->items[0]->type == SMR_NODE_NULL ? NULL : n->items[0];
  } else {
    return smr_settings_error(&c->sc, n,
                              "an action is a name or a map with one key");
  }
  if (s.value && s.value->type != SMR_NODE_STRING &&
      s.value->type != SMR_NODE_MAP)
    return smr_settings_error(&c->sc, s.value, "%s: expected a string or a map",
                              s.name);
  it->line = n->line;
  it->col = n->col;
  it->kind = find_kind(c, s.name);
  if (!it->kind)
    return unknown_kind(c, &s);
  it->repeat = c->p->repeat_set ? c->p->repeat : it->kind->default_repeat;
  it->retry = (smr_act_retry){2, 1};
  it->label = smr_xstrdup(it->kind->match ? s.name : it->kind->name);
  if (s.value && s.value->type == SMR_NODE_MAP) {
    int rc = item_keys(c, &s, it->kind->item_keys);
    const smr_node *r = smr_node_value(s.value, "repeat");
    if (!rc && r)
      rc = smr_act_parse_repeat(c, r, &it->repeat);
    if (rc)
      return rc;
  }
  return it->kind->parse(c, &s, it);
}

int smr_act_plan_add(smr_act_parse *c, smr_act_rule_plan *rp,
                     const smr_node *at, smr_act_item *it) {
  for (size_t k = 0; k < rp->n; k++)
    if (strcmp(rp->v[k].key, it->key) == 0) {
      int rc = smr_settings_error(&c->sc, at,
                                  "this action is listed twice for the rule "
                                  "(first at line %d, column %d)",
                                  rp->v[k].line, rp->v[k].col);
      item_free(it);
      return rc;
    }
  rp->v = smr_xrealloc(rp->v, (rp->n + 1) * sizeof *rp->v);
  rp->v[rp->n++] = *it;
  c->p->n_items++;
  return SMR_OK;
}

static int parse_rule(smr_act_parse *c, const smr_rule_config *rc,
                      smr_act_rule_plan *rp) {
  const smr_node *list = rc->actions;
  for (size_t i = 0; list && list->type == SMR_NODE_LIST && i < list->n; i++) {
    smr_act_item it;
    memset(&it, 0, sizeof it);
    int st = parse_item(c, list->items[i], &it);
    if (st) {
      item_free(&it);
      return st;
    }
    if ((st = smr_act_plan_add(c, rp, list->items[i], &it)))
      return st;
  }
  for (size_t i = 0; i < smr_n_action_kinds; i++) {
    const smr_action_kind *k = smr_action_kinds[i];
    int st = k->implied ? k->implied(c, rc, rp) : SMR_OK;
    if (st)
      return st;
  }
  return SMR_OK;
}

/* ------------------------------------------------------------ schema */

char *smr_act_kind_schema(const smr_action_kind *k) {
  if (!k->settings_key)
    return NULL;
  if (k->named) /* definitions.<name>: one entry of the map */
    return smr_settings_schema(k->settings, k->name, false, k->required);
  return smr_settings_schema(k->settings, k->settings_key, true, k->required);
}

/* ------------------------------------------------------------- plan */

static char *trial_basename(const char *dir) {
  if (!dir || !*dir)
    return smr_xstrdup("");
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/')
    n--;
  size_t start = n;
  while (start > 0 && dir[start - 1] != '/')
    start--;
  char *raw = smr_xstrndup(dir + start, n - start);
  if (!strcmp(raw, ".") || !strcmp(raw, "..")) {
    free(raw);
    char *abs = realpath(dir, NULL);
    raw = smr_xstrdup(abs && strrchr(abs, '/') ? strrchr(abs, '/') + 1 : "");
    free(abs);
  }
  char *safe = smr_act_oneline(raw, 256);
  free(raw);
  return safe;
}

int smr_act_plan_build(const smr_config *cfg, const smr_actions_opts *o,
                       smr_act_plan *p, smr_error *err) {
  memset(p, 0, sizeof *p);
  p->repeat.mode = SMR_REPEAT_FIRST;
  p->job_name =
      o->job_name ? smr_xstrdup(o->job_name) : trial_basename(o->trial_dir);
  p->settings = smr_xcalloc(smr_n_action_kinds, sizeof *p->settings);
  p->rules = smr_xcalloc(cfg->n_rules ? cfg->n_rules : 1, sizeof *p->rules);
  p->n_rules = cfg->n_rules;
  smr_act_parse c = {cfg, o, p, {cfg->path, cfg->base_dir, err, NULL}};
  c.sc.user = &c;
  const smr_node *r = smr_node_value(cfg->actions, "repeat");
  int rc = r ? smr_act_parse_repeat(&c, r, &p->repeat) : SMR_OK;
  p->repeat_set = r != NULL;
  if (!rc)
    rc = read_settings(&c, true);
  if (!rc)
    rc = read_settings(&c, false);
  for (size_t i = 0; !rc && i < cfg->n_rules; i++)
    rc = parse_rule(&c, &cfg->rules[i], &p->rules[i]);
  if (rc)
    smr_act_plan_free(p);
  return rc;
}

void smr_act_plan_free(smr_act_plan *p) {
  for (size_t i = 0; i < p->n_rules; i++) {
    for (size_t k = 0; k < p->rules[i].n; k++)
      item_free(&p->rules[i].v[k]);
    free(p->rules[i].v);
  }
  free(p->rules);
  for (size_t i = 0; p->settings && i < smr_n_action_kinds; i++) {
    const smr_action_kind *k = smr_action_kinds[i];
    if (!p->settings[i])
      continue;
    if (k->free_settings)
      k->free_settings(p->settings[i]);
    if (!k->named)
      smr_settings_free(k->settings, p->settings[i]);
    free(p->settings[i]);
  }
  free(p->settings);
  free(p->job_name);
  memset(p, 0, sizeof *p);
}
