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
#include "format/index.h"
#include "run/nodata.h"

/* "no_data": what a rule that evaluated nothing looked for (nodata.h). */
static void nodata_json(smr_jw *w, smr_runner *r, smr_instance *in) {
  smr_jw_key(w, "no_data");
  if (smr_instance_status(in) != SMR_RULE_NO_DATA || !r) {
    smr_jw_null(w);
    return;
  }
  smr_nodata d;
  smr_instance_nodata(r, in, &d);
  smr_jw_raw(w, d.json);
  smr_nodata_free(&d);
}

static void result_json(smr_jw *w, smr_runner *r, smr_instance *in) {
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
  smr_jw_key(w, "not_due_steps");
  smr_jw_int(w, smr_instance_not_due(in));
  nodata_json(w, r, in);
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
  /* where the catalog, rule state and action log are kept (":memory:"
   * with --fresh): outside the trial folder unless --state says so */
  smr_jw_key(&w, "state");
  smr_jw_str(&w, smr_trial_state_path(smr_runner_trial(r)));
  smr_jw_key(&w, "rules");
  smr_jw_arr(&w);
  for (size_t i = 0; i < smr_runner_count(r); i++)
    result_json(&w, r, smr_runner_instance(r, i));
  smr_jw_arr_end(&w);
  smr_jw_key(&w, "read_problems");
  smr_output_read_problems_json(r, &w);
  /* what the actions of triggered rules did (core/action/action.c) */
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

/* Under a NoData row: why nothing was evaluated. */
static void nodata_text(smr_runner *r, smr_instance *in) {
  int64_t skipped = (int64_t)smr_instance_skipped(in)->n;
  int64_t not_due = smr_instance_not_due(in);
  printf("    evaluated nothing:");
  if (skipped)
    printf(" %" PRId64 " step%s skipped for want of data", skipped,
           skipped == 1 ? "" : "s");
  if (not_due)
    printf("%s %" PRId64 " step%s not due (the rule checks only some steps)",
           skipped ? ";" : "", not_due, not_due == 1 ? "" : "s");
  if (!skipped && !not_due)
    printf(" no step to evaluate");
  printf("\n");
  smr_nodata d;
  smr_instance_nodata(r, in, &d);
  for (size_t i = 0; i < d.lines.n; i++)
    printf("    %s\n", d.lines.v[i]);
  smr_nodata_free(&d);
}

void smr_output_run_table(smr_runner *r, const char *trial) {
  int nw, tw;
  column_widths(r, &nw, &tw);
  printf("trial %s\n\n", trial);
  bool not_due = false;
  for (size_t i = 0; i < smr_runner_count(r); i++)
    not_due |= smr_instance_not_due(smr_runner_instance(r, i)) > 0;
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
    if (smr_instance_status(in) == SMR_RULE_NO_DATA)
      nodata_text(r, in);
    if (smr_instance_message(in)) /* its first line: a traceback would
                                     break the table (--json has all) */
      printf("    %.*s\n", (int)strcspn(smr_instance_message(in), "\n"),
             smr_instance_message(in));
  }
  if (not_due)
    printf("\nSKIPPED counts steps skipped for want of data; steps a rule does "
           "not check by\ndesign (not due) are counted apart: --json "
           "not_due_steps.\n");
  for (size_t i = 0; i < smr_runner_count(r); i++)
    if (smr_instance_is_profiler(smr_runner_instance(r, i))) {
      printf("\nProfiler rules count time windows, not steps: EVALUATED is "
             "the number of\nwindows and TRIGGERED AT their numbers (window "
             "k starts k * scan_interval_us,\n60 s by default, after the "
             "first timestamp of the profiler data).\n");
      break;
    }
}

/* The HTML reports rules write into their folders (ProfilerReport's,
 * CreateXgboostReport's): where each file lies below a rule's folder. */
static const char *const HTML_REPORTS[] = {
    "profiler-output/profiler-report.html", "xgboost_report.html"};

void smr_output_report_paths(smr_runner *r, const char *dir, FILE *f) {
  if (!dir)
    return;
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    smr_instance *in = smr_runner_instance(r, i);
    for (size_t k = 0; k < sizeof HTML_REPORTS / sizeof *HTML_REPORTS; k++) {
      /* looked at as it was written: no link below --output followed (one
       * planted there would make this line name a file nobody wrote) */
      char *path = smr_xasprintf("%s/%s/%s", dir, smr_instance_name(in),
                                 HTML_REPORTS[k]);
      char *slash = strrchr(path, '/');
      *slash = '\0';
      int fd;
      smr_error e;
      struct stat st;
      if (smr_safe_dir_open(path, dir, false, &fd, &e) == SMR_OK) {
        if (fstatat(fd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
          fprintf(f, "%s: HTML report written to %s/%s\n",
                  smr_instance_name(in), path, slash + 1);
        close(fd);
      }
      free(path);
    }
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

/* Whether <dfd>/result.json was written by a run that keeps state: its
 * report.json is then the stored one, which a --fresh run must not replace
 * (one written by an earlier --fresh run is a scratch copy: replaced). */
static bool holds_stored_report(int dfd) {
  int fd = openat(dfd, "result.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0)
    return false;
  buf[n] = '\0';
  return strstr(buf, "\"fresh\":true") == NULL; /* a leading key */
}

/* One instance's report.json and result.json in <dir>/<name>/; a --fresh
 * run beside a stored report writes report.fresh.json and
 * result.fresh.json instead, and says so. */
static int write_instance(smr_runner *r, smr_instance *in, const char *dir,
                          const char *trial, bool fresh, smr_error *err) {
  /* everything below the trial folder is someone else's: no link there
   * is followed (base/safefs.h) */
  char *d = smr_xasprintf("%s/%s", dir, smr_instance_name(in));
  int dfd;
  if (smr_safe_dir_open(d, trial, true, &dfd, err) != SMR_OK) {
    free(d);
    return SMR_ERR_IO;
  }
  bool beside = fresh && holds_stored_report(dfd);
  if (beside)
    fprintf(stderr,
            "smrules: %s: kept the stored %s/report.json; this --fresh run's "
            "report is %s/report.fresh.json\n",
            smr_instance_name(in), d, d);
  char *rep = smr_instance_report(in);
  int rc = write_text(dfd, d, beside ? "report.fresh.json" : "report.json", rep,
                      err);
  free(rep);
  smr_jw w = {0};
  smr_jw_obj(&w);
  if (fresh) { /* first: holds_stored_report reads the head only */
    smr_jw_key(&w, "fresh");
    smr_jw_bool(&w, true);
  }
  smr_jw_key(&w, "trial");
  smr_jw_str(&w, trial);
  smr_jw_key(&w, "result");
  result_json(&w, r, in);
  smr_jw_obj_end(&w);
  char *res = smr_jw_finish(&w);
  if (rc == SMR_OK)
    rc = write_text(dfd, d, beside ? "result.fresh.json" : "result.json", res,
                    err);
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
    int rc = write_instance(r, smr_runner_instance(r, i), dir, trial,
                            smr_runner_fresh(r), &e);
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

/* ------------------------------------------------- trial read problems */

/* The global step an index file is named after (-1: not an index file). */
static int64_t problem_step(const char *file) {
  const char *b = strrchr(file, '/');
  b = b ? b + 1 : file;
  int64_t step;
  char *worker = NULL;
  if (strncmp(file, "index/", 6) != 0 && !strstr(file, "/index/"))
    return -1;
  if (smr_parse_step_worker(b, &step, &worker) != SMR_OK)
    return -1;
  free(worker);
  return step;
}

/* What listing a trial's problems needs, made once in linear time (a
 * trial may have 200,000 damaged index files): which problems repeat an
 * earlier one (same file and message), found by hashing, and the saved
 * global steps, ascending, for a binary search. */
typedef struct problem_view {
  const smr_trial_problem *p;
  size_t n;
  bool *repeat;
  smr_i64v steps;
} problem_view;

static uint64_t problem_hash(const smr_trial_problem *p) {
  uint64_t h = 1469598103934665603ULL;
  for (const char *c = p->file; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  h = (h ^ 0xff) * 1099511628211ULL;
  for (const char *c = p->message; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  return h;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void problem_view_make(smr_trial *t, problem_view *v) {
  v->n = smr_trial_problems(t, &v->p);
  v->repeat = smr_xcalloc(v->n ? v->n : 1, sizeof *v->repeat);
  size_t cap = 16;
  while (cap < 2 * v->n)
    cap *= 2;
  size_t *slot = smr_xcalloc(cap, sizeof *slot); /* problem index + 1 */
  for (size_t i = 0; i < v->n; i++) {
    for (size_t k = problem_hash(&v->p[i]) & (cap - 1);;
         k = (k + 1) & (cap - 1)) {
      if (!slot[k]) {
        slot[k] = i + 1;
        break;
      }
      const smr_trial_problem *q = &v->p[slot[k] - 1];
      if (!strcmp(q->file, v->p[i].file) &&
          !strcmp(q->message, v->p[i].message)) {
        v->repeat[i] = true;
        break;
      }
    }
  }
  free(slot);
  v->steps = (smr_i64v){0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &v->steps);
  if (v->steps.n > 1)
    qsort(v->steps.v, v->steps.n, sizeof *v->steps.v, cmp_i64);
}

static void problem_view_free(problem_view *v) {
  free(v->repeat);
  smr_i64v_free(&v->steps);
}

static bool step_saved(const problem_view *v, int64_t step) {
  size_t lo = 0, hi = v->steps.n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v->steps.v[mid] < step)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < v->steps.n && v->steps.v[lo] == step;
}

void smr_output_read_problems_json(smr_runner *r, smr_jw *w) {
  problem_view v;
  problem_view_make(smr_runner_trial(r), &v);
  const smr_trial_problem *p = v.p;
  smr_jw_arr(w);
  for (size_t i = 0; i < v.n; i++) {
    if (v.repeat[i])
      continue;
    smr_jw_obj(w);
    smr_jw_key(w, "file");
    smr_jw_str(w, p[i].file);
    smr_jw_key(w, "offset");
    if (p[i].offset >= 0)
      smr_jw_int(w, p[i].offset);
    else
      smr_jw_null(w);
    smr_jw_key(w, "message");
    smr_jw_str(w, p[i].message);
    /* the step the file describes, unless another worker's file still
     * makes it a complete step */
    int64_t step = problem_step(p[i].file);
    smr_jw_key(w, "steps_lost");
    smr_jw_arr(w);
    if (step >= 0 && !step_saved(&v, step))
      smr_jw_int(w, step);
    smr_jw_arr_end(w);
    smr_jw_obj_end(w);
  }
  smr_jw_arr_end(w);
  problem_view_free(&v);
}

#define READ_PROBLEMS_SHOWN 20

size_t smr_output_read_problems(smr_runner *r, FILE *f) {
  problem_view v;
  problem_view_make(smr_runner_trial(r), &v);
  const smr_trial_problem *p = v.p;
  size_t shown = 0, more = 0;
  for (size_t i = 0; i < v.n; i++) {
    if (v.repeat[i])
      continue;
    /* 200,000 damaged files are not 200,000 lines: --json has them all */
    if (shown == READ_PROBLEMS_SHOWN) {
      more++;
      continue;
    }
    shown++;
    int64_t step = problem_step(p[i].file);
    fprintf(f, "smrules: warning: %s", p[i].file);
    if (p[i].offset >= 0)
      fprintf(f, " at offset %" PRId64, p[i].offset);
    fprintf(f, ": %s", p[i].message);
    if (step >= 0 && !step_saved(&v, step))
      fprintf(f, " (step %" PRId64 " not evaluated by any rule)", step);
    fprintf(f, "\n");
  }
  if (more)
    fprintf(f,
            "smrules: warning: %zu more files of the trial could not be "
            "read (run --json lists every one)\n",
            more);
  problem_view_free(&v);
  return shown;
}
