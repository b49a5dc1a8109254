/* action_kind.h - an action kind as a registration (curl's Curl_ssl,
 * nginx's ngx_command_t): each core/action/action_<kind>.c exports one
 * `const smr_action_kind`, listed once in action_kinds.h.  The plan builder
 * (action_plan.c) and the dispatcher (action.c) know kinds only through
 * this table: no switch on the kind anywhere.
 *
 * To add a kind: write action_<kind>.c with its settings struct, its
 * settings table (config/settings.h: types, ranges, choices, defaults,
 * descriptions, offsets) and its ops, and add one line to action_kinds.h.
 * The schema's part for it (schemas/rules.schema.json,
 * definitions.action_settings.properties.<key>) is what smr_act_kind_schema
 * prints for it; test_action fails until the two are the same.
 *
 * A kind's life: its settings are read once (defaults, then the table,
 * then `configure`); each item of a rule's list that `match`es it is
 * `parse`d into the item's `data`, `retry` and action-log `key`; at run
 * start `start` sees how many items it has; each due trigger queues the
 * item, and the worker calls `run` (again while it returns SMR_ACT_RETRY,
 * up to it->retry); when the run ends, `finish`.  The action log's "exactly
 * once" and the summary are the dispatcher's, the same for every kind.
 *
 * How the kinds fit, touching only their file and the list:
 *  - DumpStacks (action_dumpstacks.c): `start` remembers the trainer's
 *    identity, `run` signals it and keeps what it wrote in the rule's
 *    output folder (smr_actions_opts.output_dir, which other kinds ignore).
 *  - Alertmanager: rows {url, labels, annotations, timeout_seconds,
 *    retries...}; `default_repeat` every, so it is re-sent at each trigger
 *    while the rule keeps firing; `run` POSTs to /api/v2/alerts and records
 *    the alert in the kind's settings struct (it lives for the whole run and
 *    `run` gets it non-const); `finish` POSTs them again with endsAt = now:
 *    resolved when the run ends.
 *  - StopTraining's checkpoint step: rows {checkpoint_signal,
 *    checkpoint_request_file, checkpoint_file, checkpoint_timeout_seconds}
 *    and a first step in its `run` (action_checkpoint.c: ask, wait for the
 *    file, then stop).
 * A rule's actions run in the order written: items are queued in list
 * order and one worker runs the queue in order. */
#ifndef SMR_ACTION_KIND_H
#define SMR_ACTION_KIND_H

#include "action/action_int.h"
#include "config/settings.h"

/* The longest a delivery may take and the most retries, for every kind. */
#define SMR_ACT_MAX_TIMEOUT 3600
#define SMR_ACT_MAX_RETRIES 10

/* The rows every delivering kind has, for a struct with `timeout` and
 * `retry` fields: how long one attempt may take, and how it is retried. */
#define SMR_ACT_TIMEOUT_SETTING(T)                                             \
  {                                                                            \
    .name = "timeout_seconds", .type = SMR_SETTING_NUMBER,                     \
    .offset = offsetof(T, timeout), .min = 0.001, .max = SMR_ACT_MAX_TIMEOUT,  \
    .def = "30", .description = "seconds one attempt may take"                 \
  }
#define SMR_ACT_RETRY_SETTINGS(T)                                              \
  {.name = "retries",                                                          \
   .type = SMR_SETTING_INT,                                                    \
   .offset = offsetof(T, retry.retries),                                       \
   .min = 0,                                                                   \
   .max = SMR_ACT_MAX_RETRIES,                                                 \
   .def = "2",                                                                 \
   .description = "further attempts after a failure that may pass"},           \
  {                                                                            \
    .name = "retry_delay_seconds", .type = SMR_SETTING_NUMBER,                 \
    .offset = offsetof(T, retry.delay), .min = 0, .max = SMR_ACT_MAX_TIMEOUT,  \
    .def = "1",                                                                \
    .description = "seconds before the first retry, doubled each time"         \
  }

/* What parsing sees: the configuration, the options and the plan so far. */
typedef struct smr_act_parse {
  const smr_config *cfg;
  const smr_actions_opts *o;
  smr_act_plan *p;
  smr_settings_ctx sc; /* file, base_dir, err; user = this struct */
} smr_act_parse;

/* One entry of a rule's `actions:` list. */
typedef struct smr_act_src {
  const char *name;
  const smr_node *value; /* a string or a map; NULL for a bare name */
  const smr_node *at;    /* where the action is named */
} smr_act_src;

/* What running sees. */
typedef struct smr_act_exec {
  smr_act_plan *plan;
  smr_act_store *store;
  const smr_actions_opts *o;
  bool dry_run;
  bool persist; /* the action log is kept in the trial's state */
} smr_act_exec;

struct smr_action_kind {
  const char *name;    /* as written in rules.yaml (case-insensitive) */
  const char *aliases; /* other names, comma-separated, or NULL */

  /* --- settings: actions.<settings_key>, read by the table */
  const char *settings_key; /* NULL: no settings of its own */
  const smr_setting *settings;
  size_t settings_size; /* of the kind's settings struct */
  /* The settings are a map of name -> table (actions.hooks); read before
   * the other kinds' so their settings may name one. */
  bool named;
  const char *const *required; /* rows a (named) entry must give */
  /* Checks the table cannot express (which settings go together...), after
   * the table was read; `m` is the map given, or NULL (defaults only). */
  int (*configure)(smr_act_parse *c, const smr_node *m, void *settings);
  /* Frees what the table does not know about (NULL: nothing). */
  void (*free_settings)(void *settings);

  /* --- items of a rule's `actions:` list */
  /* Whether `name` names this kind (NULL: name or one of the aliases). */
  bool (*match)(const smr_act_parse *c, const char *name);
  /* Keys allowed in the map form besides `repeat` (NULL-terminated), or
   * NULL when the kind checks the keys itself. */
  const char *const *item_keys;
  /* Fills it->data, key, target, retry (label, repeat, line and column
   * are set before).  Errors with line and column (smr_settings_error). */
  int (*parse)(smr_act_parse *c, const smr_act_src *s, smr_act_item *it);
  void (*free_item)(void *data);
  /* Items a rule implies without listing them (StalledTrainingRule's
   * stop_training_on_fire), appended with smr_act_plan_add; may be NULL. */
  int (*implied)(smr_act_parse *c, const smr_rule_config *rc,
                 smr_act_rule_plan *rp);
  /* Appends to "unknown action 'X' (expected A, B, C...)" (NULL: nothing). */
  void (*hint)(const smr_act_parse *c, smr_buf *b);

  /* --- running (on the action worker thread, one item at a time) */
  smr_repeat default_repeat; /* when neither the item nor actions.repeat
                                says (mode first: the plan's default) */
  /* One attempt; r->rc SMR_ACT_RETRY asks for another (it->retry). */
  void (*run)(const smr_act_exec *x, const smr_act_item *it,
              const smr_act_event *e, smr_act_result *r);
  /* At run start, with the number of items of this kind (may be 0). */
  void (*start)(const smr_act_exec *x, size_t n_items);
  /* At the end of the run, after the last queued action ran. */
  void (*finish)(const smr_act_exec *x);
};

/* The registered kinds, in the order items are matched (action_plan.c). */
extern const smr_action_kind *const smr_action_kinds[];
extern const size_t smr_n_action_kinds;

/* The JSON Schema of a kind's settings (owned; NULL when it has none):
 * schemas/rules.schema.json holds it as definitions.action_settings.
 * properties.<settings_key>, or for a named kind as definitions.<name>
 * (test_action checks the file against every kind). */
char *smr_act_kind_schema(const smr_action_kind *k);

/* Appends an item to a rule's plan (checks it is not listed twice). */
int smr_act_plan_add(smr_act_parse *c, smr_act_rule_plan *rp,
                     const smr_node *at, smr_act_item *it);
/* Parses a `repeat` value (string or map). */
int smr_act_parse_repeat(smr_act_parse *c, const smr_node *v, smr_repeat *out);
/* Checks every {placeholder} of argv templates; {args.NAME} are collected
 * into `arg_names` (may be NULL).  `list` is where to point errors. */
int smr_act_check_templates(smr_act_parse *c, const smr_node *list,
                            const smr_strv *argv, smr_strv *arg_names);
/* The hook named `name` (case-insensitive) of actions.hooks, or NULL. */
const smr_hook_cfg *smr_act_find_hook(const smr_act_plan *p, const char *name);
/* Runs an Email, SMS or SNS through a configured hook instead. */
void smr_act_via_hook(const smr_act_exec *x, const smr_hook_cfg *h,
                      const smr_act_item *it, const smr_act_args *args,
                      const smr_act_event *e, smr_act_result *r);
/* CUSTOM reader of a `hook: NAME` setting (into a const smr_hook_cfg *). */
int smr_act_read_hook_ref(const smr_settings_ctx *c, const smr_setting *s,
                          const smr_node *v, void *field);
/* CUSTOM reader of a `signal` setting: a name (TERM, SIGTERM) or 1-64,
 * into an int (action_proc.c). */
int smr_act_read_signal(const smr_settings_ctx *c, const smr_setting *s,
                        const smr_node *v, void *field);
/* Small checks shared by kinds. */
bool smr_act_has_space_or_control(const char *s);
bool smr_act_valid_name_token(const char *s); /* letters, digits, _ . - */
bool smr_act_valid_env_name(const char *s);
bool smr_act_has_scheme(const char *url, const char *const *schemes);

/* The kinds (one line each in action_kinds.h). */
#define SMR_ACTION_KIND(sym) extern const smr_action_kind sym;
#include "action/action_kinds.h"
#undef SMR_ACTION_KIND

#endif
