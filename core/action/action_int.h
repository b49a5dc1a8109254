/* action_int.h - what the action modules share (not part of the public
 * API): the plan built from rules.yaml, the event a trigger produces,
 * the outcome of one attempt, and the runners of each kind of action. */
#ifndef SMR_ACTION_INT_H
#define SMR_ACTION_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "action/action.h"
#include "base/common.h"
#include "config/node.h"

/* ------------------------------------------------------------ outcomes */

typedef enum smr_act_rc {
  SMR_ACT_OK,      /* done */
  SMR_ACT_RETRY,   /* failed; another attempt may succeed */
  SMR_ACT_FAILED,  /* failed; another attempt would fail the same way */
  SMR_ACT_REFUSED, /* deliberately not done (identity, prefix, ...) */
  SMR_ACT_SKIPPED, /* nothing to do (e.g. the process already exited) */
  SMR_ACT_DRY_RUN  /* --dry-run: described, not done */
} smr_act_rc;
const char *smr_act_rc_name(smr_act_rc rc); /* "ok", "failed", ... */

/* Every attempt reports what happened in one line (never a secret). */
typedef struct smr_act_result {
  smr_act_rc rc;
  char detail[512];
} smr_act_result;
smr_act_rc smr_act_set(smr_act_result *r, smr_act_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------- event */

/* One trigger of one rule instance; every string is owned, sanitized
 * (no control characters except in `details`, which has newlines). */
typedef struct smr_act_event {
  char *rule;      /* instance name */
  char *rule_type; /* built-in rule or script name */
  char *status;    /* "IssuesFound" */
  char *trial, *job, *time;
  int64_t step, trigger; /* global step; 1-based trigger ordinal */
  char *summary;         /* one line */
  char *details;         /* "  - tensor=... ...\n" lines, may be empty */
  char *violations;      /* JSON array text */
} smr_act_event;
/* `report` is the instance's report JSON (docs/rule-semantics.md#the-report);
 * the violations of Details.last_trigger are used when it is this step's. */
smr_act_event *smr_act_event_new(const char *rule, const char *rule_type,
                                 int64_t step, int64_t trigger,
                                 const char *trial, const char *job,
                                 const char *report);
void smr_act_event_free(smr_act_event *e);

/* Extra named values of one action (hook arguments, e-mail recipients
 * for an e-mail hook ...): parallel lists of names and values. */
typedef struct smr_act_args {
  smr_strv names, values;
} smr_act_args;
const char *smr_act_arg(const smr_act_args *a, const char *name);

/* Text made safe for a header or a one-line field: control characters
 * become spaces, invalid UTF-8 becomes '?', at most `max` bytes. */
char *smr_act_oneline(const char *s, size_t max);
/* Text made safe for a message body: like smr_act_oneline but keeps
 * '\n' (and '\t'); CR and other controls are written as \xNN. */
char *smr_act_multiline(const char *s, size_t max);
/* The event as a JSON object (what hooks receive). */
char *smr_act_event_json(const smr_act_event *e, const char *action,
                         const smr_act_args *args);
/* Expand {rule} {rule_type} {step} {trigger} {status} {trial} {job}
 * {action} {message} {time} {args.NAME}; "{{" and "}}" are literal
 * braces.  Returns NULL and sets *bad to the offending name (owned)
 * when a placeholder is unknown. */
char *smr_act_expand(const char *tmpl, const smr_act_event *e,
                     const char *action, const smr_act_args *args, char **bad);
/* Checks a template without an event: NULL when fine, else the name of
 * the first unknown placeholder (owned).  args.NAME are collected into
 * `arg_names` (may be NULL). */
char *smr_act_check_template(const char *tmpl, smr_strv *arg_names);
/* Redacted form of a URL for messages: scheme://host[:port] only (paths
 * and queries often carry tokens). */
char *smr_act_redact_url(const char *url);

/* ------------------------------------------------------------- plan */

typedef enum smr_repeat_mode {
  SMR_REPEAT_FIRST,
  SMR_REPEAT_EVERY,
  SMR_REPEAT_EVERY_NTH
} smr_repeat_mode;

typedef struct smr_repeat {
  smr_repeat_mode mode;
  int64_t n;
} smr_repeat;
/* Whether an action runs at the trigger with this 1-based ordinal. */
bool smr_repeat_due(const smr_repeat *r, int64_t ordinal);

typedef struct smr_act_retry {
  int64_t retries; /* further attempts after a retryable failure */
  double delay;    /* seconds before the first retry, doubled each time */
} smr_act_retry;

typedef enum smr_stop_how {
  SMR_STOP_NONE,
  SMR_STOP_PID,
  SMR_STOP_PID_FILE,
  SMR_STOP_CMDLINE
} smr_stop_how;

/* Identity of a process: what proves the pid still names it. */
typedef struct smr_proc_id {
  int64_t pid;
  uint64_t start_ticks; /* /proc/<pid>/stat field 22 */
  char boot_id[40];     /* /proc/sys/kernel/random/boot_id */
  double start_wall;    /* start time, seconds since the epoch (about) */
  char state;           /* 'R', 'S', 'Z', ... */
} smr_proc_id;

/* actions.StopTraining (action_stop.c's settings table). */
typedef struct smr_stop_cfg {
  smr_stop_how how;
  bool from_cli; /* --training-pid */
  bool launched; /* ... the command smrules started (run -- COMMAND) */
  int64_t pid;
  char *pid_file;     /* resolved against the rules.yaml directory */
  smr_strv cmdline;   /* list form: the exact argv */
  char *cmdline_text; /* string form: argv joined by single spaces */
  int sig;            /* first signal (default SIGTERM) */
  double grace;       /* seconds before SIGKILL */
  bool kill_after_grace;
  int64_t allow_uid; /* another user whose processes may be stopped; -1 */
  bool allow_root;   /* a pid file or cmdline may name a process of uid 0 */
  char *comm;        /* with pid_file: /proc/PID/comm must be this */
  char *exe;         /* with pid_file: /proc/PID/exe must be this path */
  char *prefix;      /* default training_job_prefix or NULL */
  char *job_name;    /* as written; the plan keeps the printable form */
  /* the checkpoint step (action_checkpoint.c): ask, wait, then stop */
  int ckpt_sig;            /* checkpoint_signal, 0: none */
  char *ckpt_request_file; /* checkpoint_request_file, or NULL */
  char *ckpt_file;         /* checkpoint_file, a glob; NULL: no step */
  double ckpt_timeout;     /* checkpoint_timeout_seconds */
  /* run time: the process as first seen in this run */
  bool have_seen;
  smr_proc_id seen;
} smr_stop_cfg;

typedef enum smr_tls { SMR_TLS_TRY, SMR_TLS_REQUIRED, SMR_TLS_NONE } smr_tls;

typedef struct smr_hook_cfg smr_hook_cfg;

/* actions.Email (action_email.c's settings table). */
typedef struct smr_email_cfg {
  bool present;
  char *smtp_url, *from;
  smr_strv to;
  char *username_env, *password_env, *credentials_file;
  smr_strv sendmail; /* argv template; empty: SMTP or hook */
  const smr_hook_cfg *hook;
  int tls; /* smr_tls */
  char *ca_file;
  double timeout;
  smr_act_retry retry;
} smr_email_cfg;

/* actions.SNS, also read by SMS (action_sns.c's settings table). */
typedef struct smr_sns_cfg {
  bool present;
  char *topic_arn, *region, *endpoint, *phone_number, *profile;
  const smr_hook_cfg *hook;
  double timeout;
  smr_act_retry retry;
} smr_sns_cfg;

typedef enum smr_hook_type { SMR_HOOK_EXEC, SMR_HOOK_WEBHOOK } smr_hook_type;

/* One of actions.hooks (action_hook.c's settings table). */
struct smr_hook_cfg {
  char *name;
  int type;         /* smr_hook_type */
  smr_strv argv;    /* exec: argv template */
  char *url;        /* webhook */
  smr_strv headers; /* webhook: "Name: value" lines */
  bool inherit_env;
  double timeout;
  smr_act_retry retry;
  smr_strv arg_names; /* {args.NAME} used by the argv template */
};

/* All of actions.hooks. */
typedef struct smr_hooks_cfg {
  smr_hook_cfg *v;
  size_t n;
} smr_hooks_cfg;

typedef struct smr_action_kind smr_action_kind;

/* One action of one rule.  What is particular to its kind (the e-mail
 * recipients, the phone number, the hook arguments...) is the kind's
 * `data`, made by its parse and freed by its free_item. */
typedef struct smr_act_item {
  const smr_action_kind *kind;
  char *key;    /* identity in the action log: "Email:a@b.c" ... */
  char *label;  /* "StopTraining", "Email", ..., or the hook name */
  char *target; /* printable target */
  void *data;   /* the kind's */
  smr_repeat repeat;
  smr_act_retry retry; /* how a retryable failure is retried */
  int line, col;
} smr_act_item;

typedef struct smr_act_rule_plan {
  smr_act_item *v;
  size_t n;
} smr_act_rule_plan;

typedef struct smr_act_plan {
  void **settings;          /* per kind (index in the list): its struct */
  char *job_name;           /* the local job name (event field "job") */
  smr_repeat repeat;        /* actions.repeat: default for every action */
  bool repeat_set;          /* ... given (else each kind's default) */
  smr_act_rule_plan *rules; /* parallel to smr_config.rules */
  size_t n_rules;
  size_t n_items;
} smr_act_plan;

/* action_plan.c: rules.yaml -> plan, every check with line and column. */
int smr_act_plan_build(const smr_config *cfg, const smr_actions_opts *o,
                       smr_act_plan *p, smr_error *err);
void smr_act_plan_free(smr_act_plan *p);
/* The settings struct of a kind (NULL when it has no settings table). */
void *smr_act_plan_settings(const smr_act_plan *p, const smr_action_kind *k);
/* Checks shared with tests. */
bool smr_act_valid_email(const char *s);     /* permissive, header-safe */
bool smr_act_sagemaker_email(const char *s); /* SageMaker's pattern */
bool smr_act_valid_phone(const char *s);     /* E.164 ^\+\d{1,15}$ */
bool smr_act_valid_prefix(const char *s);    /* ^[A-Za-z0-9-]+$ */
int smr_act_signal_number(const char *name); /* "TERM"/"SIGTERM"/"15" */
const char *smr_act_signal_name(int sig);
/* Credentials file: regular, owned by the effective user, no group or
 * other permission bits.  SMR_OK or SMR_ERR_USAGE with why. */
int smr_act_check_secret_file(const char *path, smr_error *err);

/* The action log and target store (action_store.c). */
typedef struct smr_act_store smr_act_store;

/* ------------------------------------------------------------ runners */

/* action_procfs.c: what /proc says of a process */
int smr_proc_identity(int64_t pid, smr_proc_id *out);
/* up to n - 1 bytes of a /proc file, NUL-terminated; -1 when unreadable */
ssize_t smr_proc_read_small(const char *path, char *buf, size_t n);
/* thread group (process) and real user of the task at pid; -1 unreadable */
int smr_proc_status(int64_t pid, int64_t *tgid, int64_t *uid);
void smr_proc_cmdline(int64_t pid, smr_strv *out); /* argv; empty: none */
char *smr_proc_cmdline_text(int64_t pid);          /* one line, cut at 100 */
bool smr_proc_same(const smr_proc_id *a, const smr_proc_id *b);
void smr_proc_comm(int64_t pid, char *out, size_t n); /* "" unreadable */
void smr_proc_exe(int64_t pid, char *out, size_t n);  /* "" unreadable */

/* action_checkpoint.c: StopTraining's checkpoint step */
bool smr_ckpt_wanted(const smr_stop_cfg *c);
void smr_ckpt_dry_text(const smr_stop_cfg *c, char *out, size_t n);
/* Asks the process (signal through `pidfd`, request file) for a
 * checkpoint and waits for it; `out` says which file came, or why none
 * did.  True when one was confirmed. */
bool smr_ckpt_request(const smr_stop_cfg *c, int pidfd, int64_t pid, char *out,
                      size_t n);

/* action_proc.c: signalling the training process, only through a pidfd */
int smr_act_pidfd_open(int64_t pid); /* -1 with errno */
int smr_act_pidfd_signal(int pidfd, int sig);
bool smr_act_pidfd_exited(int pidfd); /* now, without waiting */
/* A pidfd of the process `id` remembers, when its pid still names that
 * process (same start time and boot, not a zombie); else -1. */
int smr_act_pidfd_of(const smr_proc_id *id);
double smr_act_mono(void); /* CLOCK_MONOTONIC seconds */
/* Remember the target as it is now (smrules start), when it resolves. */
void smr_stop_prime(smr_stop_cfg *c, smr_act_store *s, bool persist);
void smr_stop_run(smr_stop_cfg *c, const char *prefix, bool dry_run,
                  smr_act_store *s, bool persist, smr_act_result *r);

/* action_email.c */
/* The whole message (headers and body, CRLF line ends). */
char *smr_email_message(const smr_email_cfg *c, const smr_strv *to,
                        const smr_act_event *e);
char *smr_email_subject(const smr_act_event *e);
void smr_email_send(const smr_email_cfg *c, const smr_strv *to,
                    const smr_act_event *e, bool dry_run, smr_act_result *r);

/* action_sns.c */
/* Form body of the Publish request (values URL-encoded). */
char *smr_sns_publish_body(const char *topic, const char *phone,
                           const char *subject, const char *message);
void smr_sns_publish(const smr_sns_cfg *c, const char *topic, const char *phone,
                     const smr_act_event *e, bool dry_run, smr_act_result *r);

/* action_hook.c */
/* An item naming a hook: the hook and the item's arguments. */
typedef struct smr_hook_item {
  const smr_hook_cfg *hook;
  smr_act_args args;
} smr_hook_item;
void smr_hook_run(const smr_hook_cfg *h, const char *action,
                  const smr_act_args *args, const smr_act_event *e,
                  const char *stdin_text, bool dry_run, smr_act_result *r);
/* One JSON POST over HTTP(S) (webhooks, Alertmanager): 2xx is ok, other
 * 4xx but 408/429 failed, the rest retryable; messages name `who` and the
 * redacted URL, never a secret. */
typedef struct smr_http_post {
  const char *who, *url;
  const smr_strv *headers; /* "Name: value" lines, or NULL */
  const char *body;
  double timeout;
  const char *ca_file;             /* NULL: the system's */
  const char *bearer;              /* Authorization: Bearer, or NULL */
  const char *username, *password; /* basic auth when both are set */
} smr_http_post;
void smr_act_http_post(const smr_http_post *q, smr_act_result *r);
/* Run argv (already expanded) with `env` added to the environment and
 * `stdin_text` on its standard input; output (at most 4 KiB) goes to
 * *output.  Returns the exit status, or -1 (r->detail says why). */
typedef struct smr_exec_req {
  char **argv;
  char **env; /* NULL-terminated "NAME=value" */
  bool inherit_env;
  const char *stdin_text;
  double timeout;
  /* > 0: *output is all the program wrote (stdout and stderr), at most
   * this many bytes, and *output_len its length; 0: its last line (of the
   * first 4 KiB) */
  size_t keep_output;
  size_t *output_len;
} smr_exec_req;
int smr_exec(const smr_exec_req *q, char **output, smr_act_result *r);

#endif
