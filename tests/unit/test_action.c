/* test_action.c - actions: validation of action settings (every error
 * with its line and column), the plan, safe text and templates, e-mail
 * and SNS message building, the exec runner (argv, environment, stdin,
 * timeout), process identity and StopTraining against a real child. */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"
#include "aws/aws_chain.h"
#include "base/embedded.h"
#include "config/config.h"
#include "unit.h"

static char tmp_dir[64];

static void write_file(const char *name, const char *text, mode_t mode) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  CHECK(fd >= 0);
  if (fd < 0)
    return;
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  fchmod(fd, mode);
  close(fd);
}

/* ------------------------------------------------------- plan helpers */

static int build(const char *yaml, smr_act_plan *p, smr_error *err,
                 int64_t training_pid, bool validate_only) {
  smr_config cfg;
  smr_error_clear(err);
  int rc =
      smr_config_parse(yaml, strlen(yaml), "rules.yaml", tmp_dir, &cfg, err);
  if (rc != SMR_OK)
    return rc;
  smr_actions_opts o = {.trial_dir = "/data/job-7/",
                        .training_pid = training_pid,
                        .validate_only = validate_only};
  rc = smr_act_plan_build(&cfg, &o, p, err);
  if (rc == SMR_OK)
    smr_act_plan_free(p);
  smr_config_free(&cfg);
  return rc;
}

/* The error message for a configuration that must be refused. */
static const char *plan_error(const char *yaml) {
  static smr_error err;
  smr_act_plan p;
  int rc = build(yaml, &p, &err, 0, false);
  if (rc == SMR_OK)
    fprintf(stderr, "expected an error for:\n%s\n", yaml);
  CHECK_EQ_INT(rc, SMR_ERR_USAGE);
  CHECK_STR(err.file, "rules.yaml");
  return err.msg;
}

static void plan_ok(const char *yaml) {
  smr_error err;
  smr_act_plan p;
  int rc = build(yaml, &p, &err, 0, false);
  if (rc != SMR_OK)
    fprintf(stderr, "unexpected error: %s\nfor:\n%s\n", err.msg, yaml);
  CHECK_EQ_INT(rc, SMR_OK);
}

#define R1 "rules:\n  - rule: LossNotDecreasing\n"

/* ------------------------------------------------------------- plans */

static void test_plan_items(void) {
  const char *yaml =
      R1 "    actions:\n"
         "      - StopTraining\n"
         "      - email: ml-team@example.com\n"
         "      - SMS: \"+15555550100\"\n"
         "      - pager: {severity: high, repeat: every}\n"
         "      - SNS\n"
         "actions:\n"
         "  StopTraining: {pid_file: train.pid, signal: INT, grace_seconds: "
         "5}\n"
         "  Email: {smtp_url: 'smtp://127.0.0.1:25', from: a@b.cd}\n"
         "  SNS: {topic_arn: 'arn:aws:sns:eu-west-1:123456789012:t'}\n"
         "  hooks:\n"
         "    pager: {type: exec, argv: [/bin/page, '{args.severity}', "
         "'{rule}']}\n"
         "  repeat: {mode: every_nth, n: 3}\n";
  smr_config cfg;
  smr_error err;
  CHECK_EQ_INT(
      smr_config_parse(yaml, strlen(yaml), "rules.yaml", tmp_dir, &cfg, &err),
      SMR_OK);
  smr_actions_opts o = {.trial_dir = "/data/job-7/"};
  smr_act_plan p;
  int rc = smr_act_plan_build(&cfg, &o, &p, &err);
  CHECK_EQ_INT(rc, SMR_OK);
  if (rc != SMR_OK) {
    fprintf(stderr, "%s\n", err.msg);
    smr_config_free(&cfg);
    return;
  }
  CHECK_EQ_INT(p.n_items, 5);
  const smr_act_rule_plan *rp = &p.rules[0];
  CHECK_EQ_INT(rp->n, 5);
  CHECK_EQ_INT(rp->v[0].kind == &smr_action_stop, 1);
  CHECK_STR(rp->v[0].key, "StopTraining");
  CHECK_EQ_INT(rp->v[1].kind == &smr_action_email, 1);
  CHECK_STR(rp->v[1].key, "Email:ml-team@example.com");
  CHECK_STR(rp->v[1].label, "Email");
  CHECK_STR(rp->v[2].key, "SMS:+15555550100");
  CHECK_EQ_INT(rp->v[3].kind == &smr_action_hook, 1);
  CHECK_STR(rp->v[3].key, "hook:pager");
  CHECK_STR(
      smr_act_arg(&((const smr_hook_item *)rp->v[3].data)->args, "severity"),
      "high");
  CHECK_EQ_INT(rp->v[3].repeat.mode, SMR_REPEAT_EVERY);
  CHECK_EQ_INT(rp->v[0].repeat.mode, SMR_REPEAT_EVERY_NTH);
  CHECK_EQ_INT(rp->v[0].repeat.n, 3);
  CHECK_STR(rp->v[4].data, "arn:aws:sns:eu-west-1:123456789012:t");
  const smr_stop_cfg *stop = smr_act_plan_settings(&p, &smr_action_stop);
  CHECK_EQ_INT(stop->how, SMR_STOP_PID_FILE);
  char want[128];
  snprintf(want, sizeof want, "%s/train.pid", tmp_dir);
  CHECK_STR(stop->pid_file, want);
  CHECK_EQ_INT(stop->sig, SIGINT);
  CHECK(stop->grace == 5);
  CHECK_STR(p.job_name, "job-7");
  smr_act_plan_free(&p);
  smr_config_free(&cfg);
}

static void test_plan_cli_pid_and_implicit_stop(void) {
  smr_error err;
  smr_act_plan p;
  const char *yaml = R1 "    actions: [StopTraining]\n";
  CHECK_EQ_INT(build(yaml, &p, &err, 0, false), SMR_ERR_USAGE);
  CHECK_STR(err.msg, "line 3, column 15: StopTraining needs a target: "
                     "--training-pid N, or pid, pid_file or cmdline under "
                     "actions.StopTraining");
  CHECK_EQ_INT(build(yaml, &p, &err, 4242, false), SMR_OK);
  CHECK_EQ_INT(build(yaml, &p, &err, 0, true), SMR_OK); /* validate: warn */
  /* StalledTrainingRule's stop_training_on_fire is a StopTraining */
  smr_config cfg;
  const char *stalled = "rules:\n  - rule: StalledTrainingRule\n"
                        "    parameters: {stop_training_on_fire: true,\n"
                        "                 training_job_name_prefix: job}\n";
  CHECK_EQ_INT(smr_config_parse(stalled, strlen(stalled), "rules.yaml", tmp_dir,
                                &cfg, &err),
               SMR_OK);
  smr_actions_opts o = {.trial_dir = "job-7", .training_pid = 77};
  CHECK_EQ_INT(smr_act_plan_build(&cfg, &o, &p, &err), SMR_OK);
  CHECK_EQ_INT(p.rules[0].n, 1);
  CHECK_EQ_INT(p.rules[0].v[0].kind == &smr_action_stop, 1);
  CHECK_STR(p.rules[0].v[0].data, "job");
  CHECK_STR(p.rules[0].v[0].target, "--training-pid 77");
  smr_act_plan_free(&p);
  smr_config_free(&cfg);
}

static void test_plan_errors_rule_items(void) {
  CHECK_STR(plan_error(R1 "    actions: [Slack]\n"),
            "line 3, column 15: unknown action 'Slack' (expected "
            "StopTraining, Email, SMS, SNS, Alertmanager, DumpStacks or a hook "
            "defined under "
            "actions.hooks)");
  CHECK_STR(plan_error(R1 "    actions: [Slack]\nactions:\n  hooks:\n"
                          "    pager: {type: exec, argv: [p]}\n"),
            "line 3, column 15: unknown action 'Slack' (expected "
            "StopTraining, Email, SMS, SNS, Alertmanager, DumpStacks or a hook "
            "defined under "
            "actions.hooks; hooks defined: pager)");
  CHECK_STR(plan_error(R1
                       "    actions:\n      - Email: bad.email.com\n"
                       "actions:\n  Email: {sendmail: /usr/sbin/sendmail}\n"),
            "line 4, column 16: Email: 'bad.email.com' is not an e-mail "
            "address (expected name@host.domain or name@host, without "
            "spaces, quotes or brackets)");
  CHECK_STR(plan_error(R1
                       "    actions:\n      - Email: \"a@b.c\\r\\nBcc: "
                       "x@y.z\"\n"
                       "actions:\n  Email: {sendmail: /usr/sbin/sendmail}\n"),
            "line 4, column 16: Email: 'a@b.c  Bcc: x@y.z' is not an "
            "e-mail address (expected name@host.domain or name@host, "
            "without spaces, quotes or brackets)");
  CHECK_STR(plan_error(R1 "    actions:\n      - Email: a@b.cd\n"),
            "line 4, column 9: Email needs settings: add actions.Email with "
            "smtp_url (and from), sendmail, or hook");
  CHECK_STR(plan_error(R1
                       "    actions:\n      - Email\n"
                       "actions:\n  Email: {sendmail: /usr/sbin/sendmail}\n"),
            "line 4, column 9: Email needs a recipient: 'Email: "
            "ml-team@example.com' or actions.Email.to");
  CHECK_STR(plan_error(R1 "    actions:\n      - SMS: '1234'\n"),
            "line 4, column 14: SMS: '1234' is not an E.164 phone number "
            "(expected + and 1 to 15 digits, quoted: \"+15555550100\")");
  CHECK_STR(plan_error(R1 "    actions:\n      - SMS\n"),
            "line 4, column 9: SMS needs a phone number: 'SMS: "
            "\"+15555550100\"' or actions.SNS.phone_number");
  CHECK_STR(plan_error(R1 "    actions:\n      - StopTraining: "
                          "bad_training_job_prefix\n"
                          "actions:\n  StopTraining: {pid: 99}\n"),
            "line 4, column 23: training_job_prefix: expected letters, "
            "digits and '-' (SageMaker's ^[A-Za-z0-9\\-]+$)");
  CHECK_STR(plan_error(R1 "    actions:\n      - StopTraining: {prefix: x}\n"
                          "actions:\n  StopTraining: {pid: 99}\n"),
            "line 4, column 32: StopTraining: unknown key 'prefix'");
  CHECK_STR(plan_error(R1 "    actions:\n      - Email: {too: a@b.cd}\n"
                          "actions:\n  Email: {sendmail: /x}\n"),
            "line 4, column 22: Email: unknown key 'too': did you mean "
            "'to'?");
  CHECK_STR(plan_error(R1 "    actions:\n      - SNS: {topic_arn: nope}\n"),
            "line 4, column 26: SNS: expected a topic ARN arn:aws:sns:"
            "<region>:<account>:<topic>");
  CHECK_STR(plan_error(R1 "    actions:\n      - StopTraining\n"
                          "      - stoptraining\n"
                          "actions:\n  StopTraining: {pid: 99}\n"),
            "line 5, column 9: this action is listed twice for the rule "
            "(first at line 4, column 9)");
  CHECK_STR(plan_error(R1 "    actions:\n      - StopTraining: {repeat: "
                          "every_nth}\n"
                          "actions:\n  StopTraining: {pid: 99}\n"),
            "line 4, column 32: repeat: every_nth needs n, e.g. {mode: "
            "every_nth, n: 10}");
}

static void test_plan_errors_hooks(void) {
  const char *H = R1 "    actions: [pager]\nactions:\n  hooks:\n";
  char buf[512];
  snprintf(buf, sizeof buf, "%s    pager: {type: exec}\n", H);
  CHECK_STR(plan_error(buf), "line 6, column 12: hook 'pager': an exec hook "
                             "needs argv: [program, arguments...]");
  snprintf(buf, sizeof buf, "%s    pager: {type: webhook}\n", H);
  CHECK_STR(plan_error(buf), "line 6, column 12: hook 'pager': a webhook "
                             "needs url: http(s)://...");
  snprintf(buf, sizeof buf, "%s    pager: {type: webhook, url: 'ftp://x/y'}\n",
           H);
  CHECK_STR(plan_error(buf), "line 6, column 33: hook 'pager': url: expected "
                             "http://... or https://...");
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p, '{rule}', "
           "'{shell}']}\n",
           H);
  CHECK_STR(plan_error(buf),
            "line 6, column 45: unknown placeholder {shell} (known: {rule}, "
            "{rule_type}, {step}, {trigger}, {status}, {trial}, {job}, "
            "{action}, {message}, {time}, {args.NAME}; write {{ and }} for "
            "literal braces)");
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p, "
           "'{args.team}']}\n",
           H);
  CHECK_STR(plan_error(buf), "line 3, column 15: hook 'pager' uses "
                             "{args.team}: give it here, e.g. 'pager: "
                             "{team: ...}'");
  snprintf(buf, sizeof buf, "%s    Email: {type: exec, argv: [p]}\n", H);
  CHECK_STR(plan_error(buf), "line 6, column 5: hook name 'Email' is the "
                             "name of a built-in action; choose another");
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p]}\n"
           "    PAGER: {type: exec, argv: [p]}\n",
           H);
  CHECK_STR(plan_error(buf), "line 7, column 5: hook name 'PAGER' is used "
                             "twice (names are compared case-insensitively)");
  snprintf(buf, sizeof buf,
           "%s    pager: {type: webhook, url: 'http://h/',"
           " headers: {X-A: \"a\\nb\"}}\n",
           H);
  CHECK_STR(plan_error(buf), "line 6, column 61: headers: X-A: expected a "
                             "one-line value");
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p], url: "
           "'http://x/'}\n",
           H);
  CHECK_STR(plan_error(buf), "line 6, column 41: hook 'pager': url and "
                             "headers belong to webhook hooks");
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p], shell: "
           "true}\n",
           H);
  CHECK_STR(plan_error(buf), "line 6, column 36: unknown key 'shell' in hook "
                             "(expected one of: type, argv, url, headers, "
                             "timeout_seconds, inherit_env, retries, "
                             "retry_delay_seconds)");
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p]}\n"
           "rules2: 1\n",
           H);
  CHECK(strstr(plan_error(buf), "unknown key 'rules2'") != NULL);
  /* an argv is a list: one string would hide a program behind a command
   * line (the table's LIST_ONLY, in the schema and the reader) */
  snprintf(buf, sizeof buf, "%s    pager: {type: exec, argv: /bin/page}\n", H);
  CHECK_STR(plan_error(buf), "line 6, column 31: argv: expected a list, got "
                             "a string ('/bin/page')");
  /* one limit for every kind's timeout: SMR_ACT_MAX_TIMEOUT */
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p], timeout_seconds: 3601}\n", H);
  CHECK(strstr(plan_error(buf), "timeout_seconds") != NULL);
  snprintf(buf, sizeof buf,
           "%s    pager: {type: exec, argv: [p], timeout_seconds: 3600}\n", H);
  plan_ok(buf);
}

static void test_plan_errors_settings(void) {
  CHECK_STR(plan_error(R1 "actions:\n  StopTraining: {pid: 5, pid_file: "
                          "x}\n"),
            "line 4, column 36: StopTraining: give only one of pid, pid_file "
            "and cmdline (cmdline, comm and exe may go with pid_file, as "
            "checks)");
  /* a pid file's checks need the pid file */
  CHECK_STR(plan_error(R1 "actions:\n  StopTraining: {pid: 5, comm: x}\n"),
            "line 4, column 32: StopTraining: comm checks the process a "
            "pid_file names; give pid_file too");
  CHECK_STR(plan_error(R1 "actions:\n  StopTraining: {pid_file: p, exe: "
                          "python3}\n"),
            "line 4, column 36: exe: expected an absolute path, as "
            "/proc/PID/exe shows it");
  plan_ok(R1 "actions:\n  StopTraining: {pid_file: p, cmdline: [a, b], "
             "comm: a, exe: /usr/bin/a, allow_root: true}\n");
  CHECK_STR(plan_error(R1 "actions:\n  StopTraining: {pid: 5, signal: "
                          "BOOM}\n"),
            "line 4, column 34: signal: expected a signal name (TERM, INT, "
            "HUP, QUIT, USR1, USR2, KILL, ...) or a number from 1 to 64");
  CHECK_STR(plan_error(R1 "actions:\n  StopTraining: {pid: 5, "
                          "training_job_prefix: a_b}\n"),
            "line 4, column 47: training_job_prefix: expected letters, "
            "digits and '-' (SageMaker's ^[A-Za-z0-9\\-]+$)");
  CHECK_STR(plan_error(R1 "actions:\n  StopTraining: {pid: 1}\n"),
            "line 4, column 23: pid: expected an integer >= 2, got 1");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {from: a@b.cd}\n"),
            "line 4, column 10: Email: give exactly one of smtp_url, "
            "sendmail and hook");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {smtp_url: 'smtp://h', "
                          "sendmail: s, from: a@b.cd}\n"),
            "line 4, column 43: Email: give exactly one of smtp_url, "
            "sendmail and hook");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {smtp_url: 'http://h', from: "
                          "a@b.cd}\n"),
            "line 4, column 21: smtp_url: expected smtp://host[:port] or "
            "smtps://host[:port]");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {smtp_url: 'smtp://h'}\n"),
            "line 4, column 10: Email: sending through smtp_url needs from: "
            "sender@example.com");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {smtp_url: 'smtp://h', from: "
                          "a@b.cd, username_env: U}\n"),
            "line 4, column 10: Email: give both username_env and "
            "password_env");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {smtp_url: 'smtp://h', from: "
                          "a@b.cd, username_env: 'U;x', password_env: P}\n"),
            "line 4, column 61: username_env: expected the name of an "
            "environment variable (letters, digits, '_')");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {hook: nope}\n"),
            "line 4, column 17: hook: expected the name of a hook defined "
            "under actions.hooks");
  CHECK_STR(plan_error(R1 "actions:\n  SNS: {phone_number: '555'}\n"),
            "line 4, column 23: phone_number: expected an E.164 number such "
            "as \"+15555550100\"");
  CHECK_STR(plan_error(R1 "actions:\n  SNS: {endpoint: 'localhost:4566'}\n"),
            "line 4, column 19: endpoint: expected http://... or "
            "https://...");
  CHECK_STR(plan_error(R1 "actions:\n  repeat: {mode: every, n: 2}\n"),
            "line 4, column 28: repeat: n is only used with mode every_nth");
  CHECK_STR(plan_error(R1 "actions:\n  repeat: sometimes\n"),
            "line 4, column 11: repeat is one of first, every, every_nth, or "
            "a map {mode: every_nth, n: 10}");
  CHECK_STR(plan_error(R1 "actions:\n  Email: {smtp_url: 'smtp://h', from: "
                          "a@b.cd, port: 25}\n"),
            "line 4, column 47: unknown key 'port' in Email (expected one "
            "of: smtp_url, from, to, username_env, password_env, "
            "credentials_file, sendmail, hook, tls, ca_file, "
            "timeout_seconds, retries, retry_delay_seconds)");
}

static void test_plan_credentials_file(void) {
  write_file("creds-open", "username = u\npassword = p\n", 0644);
  write_file("creds-private", "username = u\npassword = p\n", 0600);
  const char *base = R1 "actions:\n  Email: {smtp_url: 'smtp://h', from: "
                        "a@b.cd, credentials_file: %s}\n";
  char buf[512];
  snprintf(buf, sizeof buf, base, "creds-open");
  const char *msg = plan_error(buf);
  CHECK(strstr(msg, "line 4, column 65: credentials_file ") == msg);
  CHECK(strstr(msg, "readable or writable by others (mode 644); make it "
                    "private: chmod 600") != NULL);
  snprintf(buf, sizeof buf, base, "creds-private");
  plan_ok(buf);
  snprintf(buf, sizeof buf, base, "missing-file");
  CHECK(strstr(plan_error(buf), "cannot open the credentials file") != NULL);
  char link[256], target[256];
  snprintf(link, sizeof link, "%s/creds-link", tmp_dir);
  snprintf(target, sizeof target, "%s/creds-private", tmp_dir);
  CHECK(symlink(target, link) == 0);
  snprintf(buf, sizeof buf, base, "creds-link");
  CHECK(strstr(plan_error(buf), "symbolic links are refused") != NULL);
}

static void test_plan_valid_forms(void) {
  plan_ok(R1 "    actions:\n      - Email: {to: [a@b.cd, 'c.d@mail.example."
             "org']}\n"
             "actions:\n  Email: {sendmail: [/usr/sbin/sendmail, -t]}\n");
  plan_ok(R1 "    actions: [Email]\n"
             "actions:\n  Email: {sendmail: /x, to: a@b.cd}\n");
  plan_ok(R1 "    actions: [SMS]\n"
             "actions:\n  SNS: {phone_number: '+4915112345678', region: "
             "eu-central-1, endpoint: 'http://127.0.0.1:4566'}\n");
  plan_ok(R1 "    actions: [StopTraining]\n"
             "actions:\n  StopTraining: {cmdline: [python3, train.py], "
             "signal: 2, kill_after_grace: false}\n");
  plan_ok(R1 "    actions: [{hook1: 'literal value'}]\n"
             "actions:\n  hooks:\n    hook1: {type: exec, argv: [x, "
             "'{{not a placeholder}}', '{args.value}']}\n");
  plan_ok(R1 "    actions:\n      - StopTraining: {training_job_prefix: "
             "job-7, repeat: every}\n"
             "actions:\n  StopTraining: {pid: 12345}\n  repeat: first\n");
}

/* ------------------------------------------------------------- checks */

static void test_validators(void) {
  CHECK(smr_act_valid_email("ml-team@example.com"));
  CHECK(smr_act_valid_email("first.last@sub.example.co.uk"));
  CHECK(!smr_act_valid_email("bad.email.com"));
  CHECK(smr_act_valid_email("smrules@localhost")); /* RFC 5321: one label */
  CHECK(smr_act_valid_email("a@b"));
  CHECK(smr_act_valid_email("ops@mail-relay.internal"));
  CHECK(!smr_act_valid_email("a@.b"));
  CHECK(!smr_act_valid_email("a@b..c"));
  CHECK(!smr_act_valid_email("a@b."));
  CHECK(!smr_act_valid_email("a@-b.c"));
  CHECK(!smr_act_valid_email("a@b-.c"));
  CHECK(!smr_act_valid_email("a@b_c.d"));
  CHECK(!smr_act_valid_email("a b@c.de"));
  CHECK(!smr_act_valid_email("a@b.c\r\nBcc: x@y.z"));
  CHECK(!smr_act_valid_email("<a@b.cd>"));
  CHECK(!smr_act_valid_email("a@b@c.de"));
  CHECK(smr_act_sagemaker_email("abc@example.com"));
  CHECK(!smr_act_sagemaker_email("first.last@example.com"));
  CHECK(!smr_act_sagemaker_email("abc@example.info"));
  CHECK(smr_act_valid_phone("+15555550100"));
  CHECK(!smr_act_valid_phone("1234"));
  CHECK(!smr_act_valid_phone("+"));
  CHECK(!smr_act_valid_phone("+1234567890123456"));
  CHECK(smr_act_valid_prefix("my-job-1"));
  CHECK(!smr_act_valid_prefix("bad_training_job_prefix"));
  CHECK_EQ_INT(smr_act_signal_number("TERM"), SIGTERM);
  CHECK_EQ_INT(smr_act_signal_number("sigint"), SIGINT);
  CHECK_EQ_INT(smr_act_signal_number("9"), 9);
  CHECK_EQ_INT(smr_act_signal_number("65"), -1);
  CHECK_EQ_INT(smr_act_signal_number("BOOM"), -1);
  smr_repeat first = {SMR_REPEAT_FIRST, 0}, every = {SMR_REPEAT_EVERY, 0},
             nth = {SMR_REPEAT_EVERY_NTH, 3};
  CHECK(smr_repeat_due(&first, 1) && !smr_repeat_due(&first, 2));
  CHECK(smr_repeat_due(&every, 1) && smr_repeat_due(&every, 7));
  CHECK(smr_repeat_due(&nth, 1) && !smr_repeat_due(&nth, 2) &&
        !smr_repeat_due(&nth, 3) && smr_repeat_due(&nth, 4) &&
        smr_repeat_due(&nth, 7));
}

static void test_safe_text(void) {
  char *s = smr_act_oneline("a\r\nb\tc\x01\x7f"
                            "d\xff\xc3\xa9",
                            100);
  CHECK_STR(s, "a  b c  d?\xc3\xa9");
  free(s);
  s = smr_act_multiline("x\ny\r\nz\x1b", 100);
  CHECK_STR(s, "x\ny\\x0d\nz\\x1b");
  free(s);
  s = smr_act_oneline("\xc3\xa9\xc3\xa9", 3); /* never cuts a character */
  CHECK_STR(s, "\xc3\xa9");
  free(s);
  s = smr_act_redact_url("https://user:secret@hooks.example.com:8443/T0/B1"
                         "?token=abc");
  CHECK_STR(s, "https://hooks.example.com:8443");
  free(s);
}

static smr_act_event *sample_event(const char *rule, const char *tensor) {
  char report[1024];
  snprintf(report, sizeof report,
           "{\"RuleTriggered\":1,\"Details\":{\"last_trigger\":{\"step\":12,"
           "\"violations\":[{\"tensor\":\"%s\",\"loss\":0.3,"
           "\"reference_loss\":0.3,\"diverging\":false}]}}}",
           tensor);
  return smr_act_event_new(rule, "LossNotDecreasing", 12, 1, "/t/job-7",
                           "job-7", report);
}

static void test_event_and_templates(void) {
  smr_act_event *e = sample_event("loss", "loss_0");
  CHECK_STR(e->summary, "rule loss (LossNotDecreasing) triggered at step 12: "
                        "tensor=loss_0, loss=0.3, reference_loss=0.3, "
                        "diverging=false");
  CHECK_STR(e->details, "  - tensor=loss_0, loss=0.3, reference_loss=0.3, "
                        "diverging=false\n");
  CHECK_STR(e->violations, "[{\"tensor\":\"loss_0\",\"loss\":0.3,"
                           "\"reference_loss\":0.3,\"diverging\":false}]");
  smr_act_args args = {0};
  smr_strv_push(&args.names, "team");
  smr_strv_push(&args.values, "$(touch /tmp/x); `id`");
  char *bad = NULL;
  char *x = smr_act_expand("{rule}@{step}#{trigger} {{lit}} {args.team}", e,
                           "pager", &args, &bad);
  CHECK_STR(x, "loss@12#1 {lit} $(touch /tmp/x); `id`");
  free(x);
  CHECK(smr_act_expand("{nope}", e, "pager", &args, &bad) == NULL);
  CHECK_STR(bad, "nope");
  free(bad);
  CHECK(smr_act_expand("{rule", e, "pager", &args, &bad) == NULL);
  free(bad);
  smr_strv names = {0};
  CHECK(smr_act_check_template("{args.a}-{args.b}-{step}", &names) == NULL);
  CHECK_EQ_INT(names.n, 2);
  smr_strv_free(&names);
  char *json = smr_act_event_json(e, "pager", &args);
  CHECK(strstr(json, "\"rule\":\"loss\"") != NULL);
  CHECK(strstr(json, "\"step\":12") != NULL);
  CHECK(strstr(json, "\"args\":{\"team\":\"$(touch /tmp/x); `id`\"}") != NULL);
  free(json);
  smr_strv_free(&args.names);
  smr_strv_free(&args.values);
  smr_act_event_free(e);
  /* a report of another step: no details */
  e = smr_act_event_new("r", NULL, 13, 2, "t", "j",
                        "{\"Details\":{\"last_trigger\":{\"step\":12,"
                        "\"violations\":[{\"a\":1}]}}}");
  CHECK_STR(e->violations, "[]");
  CHECK_STR(e->details, "");
  CHECK_STR(e->rule_type, "r");
  smr_act_event_free(e);
}

static void test_email_message(void) {
  smr_email_cfg c = {.from = "smrules@example.com"};
  smr_strv to = {0};
  smr_strv_push(&to, "ml-team@example.com");
  /* a rule name (a Lua script stem can be anything) and a tensor name
   * that try to add headers and end the message */
  smr_act_event *e = sample_event("evil\r\nBcc: victim@example.com",
                                  "t\r\n.\r\nRCPT TO:<x@y.z>\nX-Evil: 1");
  char *m = smr_email_message(&c, &to, e);
  CHECK(strstr(m, "From: smrules@example.com\r\nTo: ml-team@example.com\r\n"
                  "Subject: SMDebugRule:evil  Bcc: victim@example.com "
                  "fired\r\n") == m);
  CHECK(strstr(m, "\r\nBcc:") == NULL);
  CHECK(strstr(m, "\nX-Evil") == NULL);
  CHECK(strstr(m, "\r\n.\r\n") == NULL);
  char *sep = strstr(m, "\r\n\r\n");
  CHECK(sep != NULL);
  if (sep) {
    /* every header line is a known header */
    const char *known[] = {"From:",           "To:",
                           "Subject:",        "Date:",
                           "Message-ID:",     "MIME-Version:",
                           "Content-Type:",   "Content-Transfer-Encoding:",
                           "Auto-Submitted:", "X-Smrules-Step:"};
    int lines = 0;
    for (char *l = m; l < sep; l = strstr(l, "\r\n") + 2) {
      bool ok = false;
      for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        ok |= strncmp(l, known[k], strlen(known[k])) == 0;
      CHECK(ok);
      lines++;
    }
    CHECK_EQ_INT(lines, 10);
    CHECK(strstr(sep, "SMDebugRule:evil  Bcc: victim@example.com fired. ") ==
          sep + 4);
    CHECK(strstr(sep, "Step:     12\r\n") != NULL);
    CHECK(strstr(sep, "  - tensor=t  .  RCPT TO:<x@y.z> X-Evil: 1, loss=0.3") !=
          NULL);
  }
  /* no bare LF anywhere */
  for (char *p = m; *p; p++)
    if (*p == '\n')
      CHECK(p > m && p[-1] == '\r');
  free(m);
  smr_act_event_free(e);
  e = sample_event("r\xc3\xa9gle", "loss");
  m = smr_email_message(&c, &to, e);
  CHECK(
      strstr(m, "Subject: =?UTF-8?B?U01EZWJ1Z1J1bGU6csOpZ2xlIGZpcmVk?=\r\n") !=
      NULL);
  free(m);
  smr_act_event_free(e);
  smr_strv_free(&to);
}

static void test_sns_body_and_creds(void) {
  char *b = smr_sns_publish_body(NULL, "+15555550100", "S",
                                 "SMDebugRule:x fired. a=b&c");
  CHECK_STR(b, "Action=Publish&Version=2010-03-31&Message=SMDebugRule%3Ax+"
               "fired.+a%3Db%26c&PhoneNumber=%2B15555550100");
  free(b);
  b = smr_sns_publish_body("arn:aws:sns:us-east-1:1:t", "+1", "Sub j", "m");
  CHECK_STR(b, "Action=Publish&Version=2010-03-31&Message=m&TopicArn=arn%3A"
               "aws%3Asns%3Aus-east-1%3A1%3At&Subject=Sub+j"
               "&MessageAttributes.entry.1.Name=phone_num"
               "&MessageAttributes.entry.1.Value.DataType=String"
               "&MessageAttributes.entry.1.Value.StringValue=%2B1");
  free(b);
  write_file("aws-creds",
             "[default]\naws_access_key_id = AKDEFAULT\n"
             "aws_secret_access_key=sdefault\n"
             "[ci]\naws_access_key_id = AKCI\n"
             "aws_secret_access_key = sci\n"
             "aws_session_token = tci\n",
             0600);
  char path[256];
  snprintf(path, sizeof path, "%s/aws-creds", tmp_dir);
  setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_PROFILE");
  smr_aws_creds c;
  smr_error err;
  CHECK_EQ_INT(smr_aws_creds_load(NULL, &c, &err), SMR_OK);
  CHECK_STR(c.key_id, "AKDEFAULT");
  CHECK_STR(c.secret, "sdefault");
  CHECK(c.token == NULL);
  smr_aws_creds_free(&c);
  CHECK_EQ_INT(smr_aws_creds_load("ci", &c, &err), SMR_OK);
  CHECK_STR(c.token, "tci");
  smr_aws_creds_free(&c);
  CHECK_EQ_INT(smr_aws_creds_load("nope", &c, &err), SMR_ERR_USAGE);
  setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "senv", 1);
  CHECK_EQ_INT(smr_aws_creds_load(NULL, &c, &err), SMR_OK);
  CHECK_STR(c.key_id, "AKENV");
  smr_aws_creds_free(&c);
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("AWS_SHARED_CREDENTIALS_FILE");
}

/* -------------------------------------------------------------- exec */

static void test_exec(void) {
  smr_act_result r = {0};
  char *out = NULL;
  char *cat[] = {"cat", NULL};
  char *env[] = {"SMRULES_X=1", NULL};
  smr_exec_req q = {.argv = cat,
                    .env = env,
                    .inherit_env = true,
                    .stdin_text = "line one\nhello $(id)\n",
                    .timeout = 5};
  CHECK_EQ_INT(smr_exec(&q, &out, &r), 0);
  CHECK_STR(out, "hello $(id)");
  free(out);
  char *envp[] = {"sh", "-c", "printf '%s' \"$SMRULES_X\"", NULL};
  q = (smr_exec_req){.argv = envp,
                     .env = env,
                     .inherit_env = false,
                     .stdin_text = NULL,
                     .timeout = 5};
  CHECK_EQ_INT(smr_exec(&q, &out, &r), 0);
  CHECK_STR(out, "1");
  free(out);
  char *fail[] = {"sh", "-c", "echo nope >&2; exit 3", NULL};
  q = (smr_exec_req){.argv = fail,
                     .env = NULL,
                     .inherit_env = true,
                     .stdin_text = NULL,
                     .timeout = 5};
  CHECK_EQ_INT(smr_exec(&q, &out, &r), 3);
  CHECK_STR(out, "nope");
  free(out);
  /* a hook that never reads its (large) stdin and sleeps: killed on time */
  char *slow[] = {"sleep", "30", NULL};
  char *big = smr_xmalloc(1 << 20);
  memset(big, 'x', (1 << 20) - 1);
  big[(1 << 20) - 1] = '\0';
  /* (no elapsed-time check: a hook not killed would exit 0 after 30 s,
   * and the two checks below fail then, at any machine speed) */
  q = (smr_exec_req){.argv = slow,
                     .env = NULL,
                     .inherit_env = true,
                     .stdin_text = big,
                     .timeout = 0.3};
  CHECK_EQ_INT(smr_exec(&q, &out, &r), -1);
  CHECK_EQ_INT(r.rc, SMR_ACT_RETRY);
  CHECK(strstr(r.detail, "timed out after 0.3 s") != NULL);
  free(out);
  /* a hook that exits without reading its stdin: no SIGPIPE death */
  char *quick[] = {"true", NULL};
  q = (smr_exec_req){.argv = quick,
                     .env = NULL,
                     .inherit_env = true,
                     .stdin_text = big,
                     .timeout = 5};
  CHECK_EQ_INT(smr_exec(&q, &out, &r), 0);
  free(out);
  free(big);
  char *missing[] = {"/nonexistent/hook", NULL};
  q = (smr_exec_req){.argv = missing,
                     .env = NULL,
                     .inherit_env = true,
                     .stdin_text = NULL,
                     .timeout = 5};
  CHECK_EQ_INT(smr_exec(&q, &out, &r), -1);
  CHECK_EQ_INT(r.rc, SMR_ACT_FAILED);
  free(out);
  /* keep_output: everything written (DumpStacks' command), cut at the cap */
  char *lines[] = {"printf", "one\ntwo\n", NULL};
  size_t len = 0;
  q = (smr_exec_req){.argv = lines,
                     .inherit_env = true,
                     .timeout = 5,
                     .keep_output = 100,
                     .output_len = &len};
  CHECK_EQ_INT(smr_exec(&q, &out, &r), 0);
  CHECK_STR(out, "one\ntwo\n");
  CHECK_EQ_INT((int)len, 8);
  free(out);
  q.keep_output = 5;
  CHECK_EQ_INT(smr_exec(&q, &out, &r), 0);
  CHECK_STR(out, "one\nt");
  CHECK_EQ_INT((int)len, 5);
  free(out);
}

static void test_hook_no_shell(void) {
  smr_act_event *e = sample_event("loss", "$(touch INJECTED1);`touch "
                                          "INJECTED2`");
  char marker[256], argfile[256];
  snprintf(marker, sizeof marker, "%s/INJECTED1", tmp_dir);
  snprintf(argfile, sizeof argfile, "%s/args.txt", tmp_dir);
  smr_hook_cfg h = {
      .name = "h", .type = SMR_HOOK_EXEC, .inherit_env = true, .timeout = 5};
  smr_strv_push(&h.argv, "sh");
  smr_strv_push(&h.argv, "-c");
  smr_strv_push(&h.argv, "cd \"$1\" && printf '%s\\n' \"$2\" \"$SMRULES_STEP\""
                         " > args.txt && cat >> args.txt");
  smr_strv_push(&h.argv, "sh");
  smr_strv_push(&h.argv, tmp_dir);
  smr_strv_push(&h.argv, "{message}");
  smr_act_result r = {0};
  smr_hook_run(&h, "h", NULL, e, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_OK);
  CHECK(access(marker, F_OK) != 0);
  char *text = NULL;
  size_t len = 0;
  smr_error err;
  CHECK_EQ_INT(smr_read_file(argfile, 1 << 20, &text, &len, &err), SMR_OK);
  if (text) {
    CHECK(strstr(text, "tensor=$(touch INJECTED1);`touch INJECTED2`") != NULL);
    CHECK(strstr(text, "\n12\n{\"event\":\"rule_triggered\"") != NULL);
    free(text);
  }
  smr_hook_run(&h, "h", NULL, e, NULL, true, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_DRY_RUN);
  CHECK_STR(r.detail, "would run hook 'h': sh with 5 arguments, the event on "
                      "stdin");
  smr_strv_free(&h.argv);
  smr_act_event_free(e);
}

/* --------------------------------------------------------- processes */

/* Wait until the child `pid` is sleep (not the forked copy of this test):
 * an event, checked every 10 ms for up to 20 s (a hang guard). */
static void wait_until_sleep(pid_t pid) {
  for (int i = 0; i < 2000; i++) {
    char path[64], buf[64] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
      fclose(f);
    }
    if (strncmp(buf, "sleep", 5) == 0)
      break;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static pid_t start_sleeper(void) {
  pid_t pid = fork();
  if (pid == 0) {
    execlp("sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  wait_until_sleep(pid);
  return pid;
}

static bool alive(pid_t pid) {
  return waitpid(pid, NULL, WNOHANG) == 0;
}

static void test_proc_identity(void) {
  smr_proc_id me, again;
  CHECK_EQ_INT(smr_proc_identity(getpid(), &me), 0);
  CHECK_EQ_INT(smr_proc_identity(getpid(), &again), 0);
  CHECK(me.start_ticks > 0 && me.start_ticks == again.start_ticks);
  CHECK(strlen(me.boot_id) > 0);
  CHECK(me.start_wall > 1e9 && me.start_wall <= (double)time(NULL) + 2);
  CHECK(me.state == 'R' || me.state == 'S');
  CHECK(smr_proc_identity(999999999, &again) != 0);
}

static void test_stop_by_pid(void) {
  pid_t child = start_sleeper();
  smr_stop_cfg c = {.how = SMR_STOP_PID,
                    .pid = child,
                    .sig = SIGTERM,
                    .grace = 5,
                    .kill_after_grace = true};
  c.job_name = smr_xstrdup("job-7");
  smr_act_result r = {0};
  smr_stop_prime(&c, NULL, false);
  CHECK(c.have_seen);
  /* dry run: described, nothing sent */
  smr_stop_run(&c, NULL, true, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_DRY_RUN);
  CHECK(strstr(r.detail, "would send SIGTERM to pid") != NULL);
  CHECK(alive(child));
  /* prefix mismatch: refused */
  smr_stop_run(&c, "other-job", false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
  CHECK(strstr(r.detail, "does not match the start of the job name 'job-7'") !=
        NULL);
  CHECK(alive(child));
  /* what was first seen at this pid differs: a recycled pid, refused */
  c.seen.start_ticks += 1;
  smr_stop_run(&c, "job", false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
  CHECK(strstr(r.detail, "the pid was reused; nothing signalled") != NULL);
  CHECK(alive(child));
  c.seen.start_ticks -= 1;
  smr_stop_run(&c, "job", false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_OK);
  CHECK(strstr(r.detail, "sent SIGTERM to pid") != NULL);
  CHECK(strstr(r.detail, "(sleep 30); it exited after") != NULL);
  int st = 0;
  CHECK_EQ_INT(waitpid(child, &st, 0), child);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_SKIPPED);
  free(c.job_name);
}

static void test_stop_escalates_and_pid_file(void) {
  /* a process that ignores SIGTERM gets SIGKILL after the grace period */
  pid_t child = fork();
  if (child == 0) {
    signal(SIGTERM, SIG_IGN);
    execlp("sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  wait_until_sleep(child);
  char pidtext[32];
  snprintf(pidtext, sizeof pidtext, "%d\n", (int)child);
  write_file("train.pid", pidtext, 0644);
  smr_stop_cfg c = {.how = SMR_STOP_PID_FILE,
                    .sig = SIGTERM,
                    .grace = 0.3,
                    .kill_after_grace = true};
  c.pid_file = smr_xasprintf("%s/train.pid", tmp_dir);
  c.job_name = smr_xstrdup("j");
  smr_act_result r = {0};
  /* the job writes the pid file: without a check, nothing is signalled */
  c.allow_root = geteuid() == 0;
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
  CHECK(strstr(r.detail, "give cmdline, comm or exe with pid_file") != NULL);
  c.comm = "sleep";
  /* a pid file older than the process it names: stale, refused */
  struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
  CHECK_EQ_INT(utimensat(AT_FDCWD, c.pid_file, old, 0), 0);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
  CHECK(strstr(r.detail, "is older than process") != NULL);
  CHECK(alive(child));
  write_file("train.pid", pidtext, 0644);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_OK);
  CHECK(strstr(r.detail, "still running after 0.3 s, sent SIGKILL") != NULL);
  int st = 0;
  CHECK_EQ_INT(waitpid(child, &st, 0), child);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  /* missing pid file: worth retrying (the trainer may not have written it) */
  free(c.pid_file);
  c.pid_file = smr_xasprintf("%s/none.pid", tmp_dir);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_RETRY);
  write_file("garbage.pid", "12ab\n", 0644);
  free(c.pid_file);
  c.pid_file = smr_xasprintf("%s/garbage.pid", tmp_dir);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
  free(c.pid_file);
  free(c.job_name);
}

static void test_stop_cmdline(void) {
  char tag[64];
  snprintf(tag, sizeof tag, "%d.%ld", (int)getpid(), (long)time(NULL));
  pid_t a = fork();
  if (a == 0) {
    execlp("sleep", "sleep", "30", tag, (char *)NULL);
    _exit(127);
  }
  wait_until_sleep(a);
  smr_stop_cfg c = {.how = SMR_STOP_CMDLINE, .sig = SIGTERM, .grace = 5};
  c.job_name = smr_xstrdup("j");
  c.cmdline_text = smr_xasprintf("sleep 30 %s", tag);
  smr_act_result r = {0};
  if (geteuid() == 0) {
    /* a root process found by its command line: only with allow_root */
    smr_stop_run(&c, NULL, false, NULL, false, &r);
    CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
    CHECK(strstr(r.detail, "runs as root (uid 0)") != NULL);
    CHECK(alive(a));
    c.allow_root = true;
  }
  smr_stop_run(&c, NULL, true, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_DRY_RUN);
  pid_t b = fork();
  if (b == 0) {
    execlp("sleep", "sleep", "30", tag, (char *)NULL);
    _exit(127);
  }
  wait_until_sleep(b);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
  CHECK(strstr(r.detail, "ambiguous: 2 processes") != NULL);
  CHECK(alive(a) && alive(b));
  kill(b, SIGKILL);
  waitpid(b, NULL, 0);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_OK);
  waitpid(a, NULL, 0);
  smr_stop_run(&c, NULL, false, NULL, false, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_SKIPPED);
  free(c.cmdline_text);
  free(c.job_name);
}

/* Items run through their kind's `run` as the worker runs them: the
 * StopTraining prefix is matched against the job name the plan settled on
 * (the trial folder's unless job_name is given). */
static void test_plan_runs_through_kinds(void) {
  const char *yaml = R1 "    actions:\n      - StopTraining: other\n"
                        "      - pager: {}\n"
                        "actions:\n  StopTraining: {pid: 99999999}\n"
                        "  hooks:\n    pager: {type: exec, argv: "
                        "[/bin/true, '{job}']}\n";
  smr_config cfg;
  smr_error err;
  CHECK_EQ_INT(
      smr_config_parse(yaml, strlen(yaml), "rules.yaml", tmp_dir, &cfg, &err),
      SMR_OK);
  smr_actions_opts o = {.trial_dir = "/data/job-7/", .dry_run = true};
  smr_act_plan p;
  CHECK_EQ_INT(smr_act_plan_build(&cfg, &o, &p, &err), SMR_OK);
  CHECK_EQ_INT(p.rules[0].n, 2);
  smr_act_exec x = {&p, NULL, &o, true, false};
  smr_act_event *e =
      smr_act_event_new("r", "LossNotDecreasing", 5, 1, "/t", p.job_name, NULL);
  smr_act_result r = {0};
  p.rules[0].v[0].kind->run(&x, &p.rules[0].v[0], e, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_REFUSED);
  CHECK_STR(r.detail, "training_job_prefix 'other' does not match the start "
                      "of the job name 'job-7'; nothing signalled");
  CHECK(p.rules[0].v[1].kind == &smr_action_hook);
  memset(&r, 0, sizeof r);
  p.rules[0].v[1].kind->run(&x, &p.rules[0].v[1], e, &r);
  CHECK_EQ_INT(r.rc, SMR_ACT_DRY_RUN);
  smr_act_event_free(e);
  smr_act_plan_free(&p);
  smr_config_free(&cfg);
}

/* ------------------------------------------------------------ schema */

/* Where schemas/rules.schema.json holds a kind's settings. */
static const cJSON *schema_part(const cJSON *root, const smr_action_kind *k) {
  const cJSON *defs = cJSON_GetObjectItemCaseSensitive(root, "definitions");
  if (k->named)
    return cJSON_GetObjectItemCaseSensitive(defs, k->name);
  const cJSON *as = cJSON_GetObjectItemCaseSensitive(defs, "action_settings");
  return cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(as, "properties"), k->settings_key);
}

/* The schema's part equals the kind's table, key order included (the
 * order is the one "unknown key ... (expected one of: ...)" lists). */
static bool schema_matches(const cJSON *part, const char *generated) {
  cJSON *g = cJSON_Parse(generated);
  char *a = part ? cJSON_PrintUnformatted(part) : NULL;
  char *b = g ? cJSON_PrintUnformatted(g) : NULL;
  bool same = a && b && strcmp(a, b) == 0;
  cJSON_free(a);
  cJSON_free(b);
  cJSON_Delete(g);
  return same;
}

static cJSON *embedded_schema(void) {
  return cJSON_Parse(smr_embedded("schemas/rules.schema.json", NULL));
}

/* The schema's action part is the kinds' tables: every kind with settings
 * has its part, nothing else is there but `repeat`, and the parts are the
 * tables as smr_act_kind_schema prints them. */
static void test_schema_is_the_tables(void) {
  cJSON *root = embedded_schema();
  CHECK(root != NULL);
  size_t with_settings = 0;
  for (size_t i = 0; i < smr_n_action_kinds; i++) {
    const smr_action_kind *k = smr_action_kinds[i];
    char *gen = smr_act_kind_schema(k);
    if (!gen)
      continue;
    with_settings++;
    bool same = schema_matches(schema_part(root, k), gen);
    CHECK(same);
    if (!same)
      fprintf(stderr, "schema of %s should be:\n%s\n", k->name, gen);
    free(gen);
  }
  CHECK(with_settings > 0);
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(
          cJSON_GetObjectItemCaseSensitive(root, "definitions"),
          "action_settings"),
      "properties");
  size_t n = 0;
  for (const cJSON *p = props ? props->child : NULL; p; p = p->next, n++) {
    bool known = strcmp(p->string, "repeat") == 0;
    for (size_t i = 0; i < smr_n_action_kinds; i++)
      known |= smr_action_kinds[i]->settings_key &&
               strcmp(smr_action_kinds[i]->settings_key, p->string) == 0;
    CHECK(known);
  }
  CHECK_EQ_INT(n, with_settings + 1);
  cJSON_Delete(root);
}

/* A limit changed in one place (a copy of Email's table with a longer
 * timeout) changes the schema the table prints, so the file no longer
 * matches it (test_schema_is_the_tables fails), and validation and the
 * reader follow the table: 5000 s is refused by the shipped schema and
 * table, accepted by the schema and reader of the changed copy. */
static void test_schema_follows_a_changed_limit(void) {
  const smr_setting *orig = smr_action_email.settings;
  size_t n = 0;
  while (orig[n].type != SMR_SETTING_END)
    n++;
  smr_setting copy[32];
  CHECK(n < 32);
  memcpy(copy, orig, (n + 1) * sizeof *copy);
  smr_setting *t = (smr_setting *)smr_setting_find(copy, "timeout_seconds");
  CHECK(t != NULL && t->max == SMR_ACT_MAX_TIMEOUT);
  t->max = 7200;
  smr_action_kind changed = smr_action_email;
  changed.settings = copy;
  char *gen = smr_act_kind_schema(&changed);
  cJSON *root = embedded_schema();
  CHECK(!schema_matches(schema_part(root, &smr_action_email), gen));
  /* the shipped schema refuses 5000 s ... */
  const char *yaml = "rules:\n  - rule: LossNotDecreasing\n"
                     "actions:\n  Email: {sendmail: /x, timeout_seconds: "
                     "5000}\n";
  smr_node *doc;
  smr_error err;
  CHECK_EQ_INT(smr_yaml_parse(yaml, strlen(yaml), "rules.yaml", &doc, &err),
               SMR_OK);
  char *text = cJSON_PrintUnformatted(root);
  CHECK_EQ_INT(smr_schema_validate(text, doc, "rules.yaml", &err),
               SMR_ERR_USAGE);
  CHECK(strstr(err.msg, "timeout_seconds") != NULL);
  cJSON_free(text);
  /* ... the one with the changed table's part accepts it */
  cJSON *props = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(
          cJSON_GetObjectItemCaseSensitive(root, "definitions"),
          "action_settings"),
      "properties");
  cJSON_ReplaceItemInObjectCaseSensitive(props, "Email", cJSON_Parse(gen));
  text = cJSON_PrintUnformatted(root);
  CHECK_EQ_INT(smr_schema_validate(text, doc, "rules.yaml", &err), SMR_OK);
  cJSON_free(text);
  /* and the reader follows its table the same way */
  const smr_node *m = smr_node_value(smr_node_value(doc, "actions"), "Email");
  smr_settings_ctx sc = {"rules.yaml", tmp_dir, &err, NULL};
  smr_email_cfg e;
  memset(&e, 0, sizeof e);
  CHECK_EQ_INT(smr_settings_read(&sc, orig, m, &e), SMR_ERR_USAGE);
  CHECK_STR(err.msg, "line 4, column 42: timeout_seconds: expected a number "
                     "from 0.001 to 3600");
  smr_settings_free(orig, &e);
  memset(&e, 0, sizeof e);
  CHECK_EQ_INT(smr_settings_read(&sc, copy, m, &e), SMR_OK);
  CHECK(e.timeout == 5000);
  smr_settings_free(copy, &e);
  smr_node_free(doc);
  cJSON_Delete(root);
  free(gen);
}

int main(void) {
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/smr-action-XXXXXX");
  if (!mkdtemp(tmp_dir)) {
    perror("mkdtemp");
    return 2;
  }
  TEST_RUN(test_plan_items);
  TEST_RUN(test_plan_cli_pid_and_implicit_stop);
  TEST_RUN(test_plan_errors_rule_items);
  TEST_RUN(test_plan_errors_hooks);
  TEST_RUN(test_plan_errors_settings);
  TEST_RUN(test_plan_credentials_file);
  TEST_RUN(test_plan_valid_forms);
  TEST_RUN(test_validators);
  TEST_RUN(test_safe_text);
  TEST_RUN(test_event_and_templates);
  TEST_RUN(test_email_message);
  TEST_RUN(test_sns_body_and_creds);
  TEST_RUN(test_exec);
  TEST_RUN(test_hook_no_shell);
  TEST_RUN(test_proc_identity);
  TEST_RUN(test_stop_by_pid);
  TEST_RUN(test_stop_escalates_and_pid_file);
  TEST_RUN(test_stop_cmdline);
  TEST_RUN(test_plan_runs_through_kinds);
  TEST_RUN(test_schema_is_the_tables);
  TEST_RUN(test_schema_follows_a_changed_limit);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", tmp_dir);
  return TEST_REPORT("test_action");
}
