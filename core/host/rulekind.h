/* rulekind.h - kinds of rule as registrations, and the factory that makes
 * a rule instance's host side from its rules.yaml entry.
 *
 * A kind (a C plugin or built-in, a Lua script, ...) recognises its entries
 * and creates the implementation behind smr_rule_ops; the runner only sees
 * the smr_rule it gets back and never asks which kind made it.  Adding a
 * kind: one file defining an smr_rule_kind, one line in the list in
 * rulekind.c. */
#ifndef SMR_RULEKIND_H
#define SMR_RULEKIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "config/config.h"
#include "config/params.h"
#include "host/rulectx.h"

/* The budgets of a sandboxed script rule (set from rules.yaml; the Lua
 * sandbox enforces them, lua/lua_limits.h). */
typedef struct smr_rule_budgets {
  int64_t instructions; /* per call into the script (init/invoke/finish) */
  size_t memory_bytes;  /* cap on the rule's heap and report data */
  double seconds;       /* wall clock per call: the last line of defence */
} smr_rule_budgets;

/* What every kind is given to create an instance. */
typedef struct smr_rule_env {
  smr_trial *trial;
  const char *config_path;         /* rules.yaml, for messages */
  const char *output_dir;          /* rule-output root (NULL: the default) */
  const smr_rule_budgets *budgets; /* script rules */
} smr_rule_env;

typedef struct smr_rule_kind smr_rule_kind;

/* The host side of one rule instance, as the runner drives it. */
typedef struct smr_rule {
  const smr_rule_kind *kind;
  char *type;       /* the rule: a plugin's registered name, "lua:<stem>" */
  const char *code; /* the file whose bytes belong to the rule's identity
                       (stored state is kept only for the same code) */
  smr_params params;
  /* A rule with a C parameter table: the table and the parsed settings
   * (NULL for rules that have none, e.g. scripts). */
  const smrules_param *param_table;
  const void *settings;
  smrules_ctx *ctx;
  const smr_rule_ops *ops;
  void *impl;
  bool stateless; /* results do not depend on earlier steps */
  /* A profiler rule: evaluated in time windows this long
   * (runner_profiler.h) instead of steps. */
  bool profiler;
  int64_t window_us;
  void *kind_state; /* the kind's own (a plugin: the loaded object) */
} smr_rule;

struct smr_rule_kind {
  const char *name; /* "plugin", "lua" */
  /* Whether the rules.yaml entry is one of this kind's. */
  bool (*claims)(const smr_rule_config *rc);
  /* Before the context exists: find the code, check and apply the
   * parameters; set type, code, params and the kind's answers. */
  int (*prepare)(smr_rule *r, const smr_rule_config *rc,
                 const smr_rule_env *env, smr_error *err);
  /* With r->ctx made: create the implementation (r->ops, r->impl). */
  int (*start)(smr_rule *r, const smr_rule_config *rc, const smr_rule_env *env,
               smr_error *err);
  /* After the implementation and the context are gone; may be NULL. */
  void (*release)(smr_rule *r);
};

/* The kind of a rules.yaml entry (NULL: none claims it). */
const smr_rule_kind *smr_rule_kind_of(const smr_rule_config *rc);

/* Make instance `name` of entry `rc`: the kind that claims it prepares it,
 * the context is made (with its output folder under env->output_dir), and
 * the kind starts it.  A configuration problem is SMR_ERR_USAGE with file
 * and line:column.  *out is set in every case: free it with
 * smr_rule_free. */
int smr_rule_new(const smr_rule_config *rc, const smr_rule_env *env,
                 const char *name, smr_rule **out, smr_error *err);
void smr_rule_free(smr_rule *r);

/* Whether the instance wants the wall clock (invoke_at_time). */
bool smr_rule_wants_time(const smr_rule *r);

/* A python rule's entry as far as it can be checked without running
 * Python (validate): its parameters are scalars, passed as strings. */
int smr_python_rule_check(const smr_rule_config *rc, const char *config_path,
                          smr_error *err);

/* The processes of cfg's python: rules, started and sent their load
 * (the rule's import, its trial open and __init__) before the C trial is
 * opened at trial_root, so that Python's start overlaps the C side's and
 * the rules load at once; each rule's start (smr_rule_new) takes its own
 * when the request is the same, else starts another.  _end stops those
 * not taken.  Called by the job, on the thread that makes the rules. */
void smr_python_prestart(const smr_config *cfg, const char *trial_root);
void smr_python_prestart_end(void);

/* The kinds this host knows, defined one per file. */
extern const smr_rule_kind smr_kind_plugin; /* host/rule_plugin.c */
extern const smr_rule_kind smr_kind_lua;    /* lua/lua_kind.c */
extern const smr_rule_kind smr_kind_python; /* host/rule_python.c */

#endif
