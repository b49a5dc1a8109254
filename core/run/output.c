/* output.c - results as a table, as JSON, and as rule-output files. */
#include "run/output.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonw.h"
#include "base/safefs.h"

static void result_json(smr_jw *w, smr_instance *in) {
  const smr_i64v *trig = smr_instance_triggered(in);
  const smr_i64v *skip = smr_instance_skipped(in);
  smr_jw_obj(w);
  smr_jw_key(w, "name");
  smr_jw_str(w, smr_instance_name(in));
  smr_jw_key(w, "rule");
  smr_jw_str(w, smr_instance_rule(in));
  smr_jw_key(w, "status");
  smr_jw_str(w, smr_rule_status_name(smr_instance_status(in)));
  smr_jw_key(w, "first_trigger_step");
  if (trig->n)
    smr_jw_int(w, trig->v[0]);
  else
    smr_jw_null(w);
  smr_jw_key(w, "triggered_steps");
  smr_jw_arr(w);
  for (size_t i = 0; i < trig->n; i++)
    smr_jw_int(w, trig->v[i]);
  smr_jw_arr_end(w);
  smr_jw_key(w, "evaluated_steps");
  smr_jw_int(w, smr_instance_evaluated(in));
  smr_jw_key(w, "skipped_steps");
  smr_jw_arr(w);
  for (size_t i = 0; i < skip->n; i++)
    smr_jw_int(w, skip->v[i]);
  smr_jw_arr_end(w);
  smr_jw_key(w, "waiting_at_step");
  if (smr_instance_waiting_at(in) >= 0)
    smr_jw_int(w, smr_instance_waiting_at(in));
  else
    smr_jw_null(w);
  smr_jw_key(w, "message");
  smr_jw_str(w, smr_instance_message(in));
  smr_jw_key(w, "report");
  char *rep = smr_instance_report(in);
  smr_jw_raw(w, rep);
  free(rep);
  smr_jw_obj_end(w);
}

char *smr_output_run_json(smr_runner *r, const char *trial) {
  return smr_output_run_json_actions(r, trial, NULL);
}

char *smr_output_run_json_actions(smr_runner *r, const char *trial,
                                  const char *actions_json) {
  return smr_output_run_json_training(r, trial, actions_json, NULL);
}

char *smr_output_run_json_training(smr_runner *r, const char *trial,
                                   const char *actions_json,
                                   const char *training_json) {
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "trial");
  smr_jw_str(&w, trial);
  smr_jw_key(&w, "rules");
  smr_jw_arr(&w);
  for (size_t i = 0; i < smr_runner_count(r); i++)
    result_json(&w, smr_runner_instance(r, i));
  smr_jw_arr_end(&w);
  /* what the actions of triggered rules did (core/action.c) */
  smr_jw_key(&w, "actions");
  smr_jw_raw(&w, actions_json ? actions_json : "[]");
  if (training_json) {
    smr_jw_key(&w, "training");
    smr_jw_raw(&w, training_json);
  }
  smr_jw_obj_end(&w);
  return smr_jw_finish(&w);
}

static void steps_text(const smr_i64v *v, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < v->n && used + 24 < n; i++) {
    if (i == 8 && v->n > 10) {
      snprintf(buf + used, n - used, " ... (%zu in all)", v->n);
      return;
    }
    used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, i ? "," : "",
                             v->v[i]);
  }
  if (!v->n)
    snprintf(buf, n, "-");
}

/* The RULE and TYPE columns: at least 28 and 26 wide, wider when a name
 * is longer (FeatureImportanceOverweight, a long lua:<script>). */
static void column_widths(smr_runner *r, int *name_w, int *type_w) {
  *name_w = 28;
  *type_w = 26;
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    smr_instance *in = smr_runner_instance(r, i);
    int n = (int)strlen(smr_instance_name(in));
    int t = (int)strlen(smr_instance_rule(in));
    *name_w = n > *name_w ? n : *name_w;
    *type_w = t > *type_w ? t : *type_w;
  }
}

void smr_output_run_table(smr_runner *r, const char *trial) {
  int nw, tw;
  column_widths(r, &nw, &tw);
  printf("trial %s\n\n", trial);
  printf("%-*s %-*s %-14s %9s %8s  %s\n", nw, "RULE", tw, "TYPE", "STATUS",
         "EVALUATED", "SKIPPED", "TRIGGERED AT");
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    smr_instance *in = smr_runner_instance(r, i);
    char steps[256];
    steps_text(smr_instance_triggered(in), steps, sizeof steps);
    printf("%-*s %-*s %-14s %9" PRId64 " %8zu  %s\n", nw, smr_instance_name(in),
           tw, smr_instance_rule(in),
           smr_rule_status_name(smr_instance_status(in)),
           smr_instance_evaluated(in), smr_instance_skipped(in)->n, steps);
    /* a rule with a final status waits for nothing (it may have stopped
     * at a trigger before a step that never came) */
    if (smr_instance_waiting_at(in) >= 0 &&
        smr_instance_status(in) == SMR_RULE_IN_PROGRESS)
      printf("    waiting for step %" PRId64 "\n", smr_instance_waiting_at(in));
    if (smr_instance_message(in)) /* its first line: a traceback would
                                     break the table (--json has all) */
      printf("    %.*s\n", (int)strcspn(smr_instance_message(in), "\n"),
             smr_instance_message(in));
  }
  for (size_t i = 0; i < smr_runner_count(r); i++)
    if (smr_instance_is_profiler(smr_runner_instance(r, i))) {
      printf("\nProfiler rules count time windows, not steps: EVALUATED is "
             "the number of\nwindows and TRIGGERED AT their numbers (window "
             "k starts k * scan_interval_us,\n60 s by default, after the "
             "first timestamp of the profiler data).\n");
      break;
    }
}

void smr_output_report_paths(smr_runner *r, const char *dir, FILE *f) {
  if (!dir)
    return;
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    smr_instance *in = smr_runner_instance(r, i);
    if (!smr_instance_is_profiler(in))
      continue;
    /* looked at as it was written: no link below --output followed (one
     * planted there would make this line name a file nobody wrote) */
    char *sub =
        smr_xasprintf("%s/%s/profiler-output", dir, smr_instance_name(in));
    int fd;
    smr_error e;
    struct stat st;
    if (smr_safe_dir_open(sub, dir, false, &fd, &e) == SMR_OK) {
      if (fstatat(fd, "profiler-report.html", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISREG(st.st_mode))
        fprintf(f, "%s: HTML report written to %s/profiler-report.html\n",
                smr_instance_name(in), sub);
      close(fd);
    }
    free(sub);
  }
}

/* `text` and a newline replace `name` in the directory `dirfd`. */
static int write_text(int dirfd, const char *dir, const char *name,
                      const char *text, smr_error *err) {
  char *shown = smr_xasprintf("%s/%s", dir, name);
  size_t n = strlen(text);
  char *data = smr_xmalloc(n + 1);
  memcpy(data, text, n);
  data[n] = '\n';
  int rc = smr_safe_write_at(dirfd, name, data, n + 1, shown, err);
  free(data);
  free(shown);
  return rc;
}

/* One instance's report.json and result.json in <dir>/<name>/. */
static int write_instance(smr_instance *in, const char *dir, const char *trial,
                          smr_error *err) {
  /* everything below the trial folder is someone else's: no link there
   * is followed (base/safefs.h) */
  char *d = smr_xasprintf("%s/%s", dir, smr_instance_name(in));
  int dfd;
  if (smr_safe_dir_open(d, trial, true, &dfd, err) != SMR_OK) {
    free(d);
    return SMR_ERR_IO;
  }
  char *rep = smr_instance_report(in);
  int rc = write_text(dfd, d, "report.json", rep, err);
  free(rep);
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "trial");
  smr_jw_str(&w, trial);
  smr_jw_key(&w, "result");
  result_json(&w, in);
  smr_jw_obj_end(&w);
  char *res = smr_jw_finish(&w);
  if (rc == SMR_OK)
    rc = write_text(dfd, d, "result.json", res, err);
  free(res);
  close(dfd);
  free(d);
  return rc;
}

/* A folder refused for one rule does not keep the others' files from
 * being written; the first error is returned. */
int smr_output_write_files(smr_runner *r, const char *dir, const char *trial,
                           smr_error *err) {
  int first = SMR_OK;
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    smr_error e;
    smr_error_clear(&e);
    int rc = write_instance(smr_runner_instance(r, i), dir, trial, &e);
    if (rc != SMR_OK && first == SMR_OK) {
      first = rc;
      if (err)
        *err = e;
    } else if (rc != SMR_OK) {
      char msg[SMR_ERR_MSG_MAX + 64];
      smr_error_format(&e, msg, sizeof msg);
      fprintf(stderr, "smrules: %s\n", msg);
    }
  }
  return first;
}
