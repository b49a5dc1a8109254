/* job_trial.c - which folders a `run` reads (--trial may name the
 * smdebug trial, a profiler-output folder or a job folder holding both),
 * and whether a trial is there yet: checked before anything is written
 * there. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host/plugin.h"
#include "job/job_int.h"
#include "profiler/profiler.h"
#include "source/source.h"
#include "trial/tb_trial.h"

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* s3://.../job: debug-output/ when it holds keys; the profiler output is
 * --profiler, else profiler-output/ when it holds keys, else the trial
 * itself when it holds system/ or framework/ keys (as for a local
 * folder).  Each look is one short listing. */
static char *s3_sub(const char *url, const char *sub) {
  size_t n = strlen(url);
  while (n > 5 && url[n - 1] == '/') /* s3://b/job/ names s3://b/job */
    n--;
  return smr_xasprintf("%.*s/%s", (int)n, url, sub);
}

static void resolve_s3_dirs(const smr_job_opts *a, char **debug,
                            char **profiler) {
  bool job = smr_location_has(a->trial, "debug-output");
  *debug = job ? s3_sub(a->trial, "debug-output") : smr_xstrdup(a->trial);
  if (a->profiler)
    *profiler = smr_xstrdup(a->profiler);
  else if (smr_location_has(a->trial, "profiler-output"))
    *profiler = s3_sub(a->trial, "profiler-output");
  else if (smr_location_has(a->trial, "system") ||
           smr_location_has(a->trial, "framework"))
    *profiler = smr_xstrdup(a->trial);
  else
    *profiler = NULL;
}

void smr_job_resolve_dirs(const smr_job_opts *a, char **debug,
                          char **profiler) {
  if (smr_location_is_remote(a->trial)) {
    resolve_s3_dirs(a, debug, profiler);
    return;
  }
  char *dbg = smr_xasprintf("%s/debug-output", a->trial);
  char *prof = smr_xasprintf("%s/profiler-output", a->trial);
  *debug = smr_xstrdup(is_dir(dbg) ? dbg : a->trial);
  if (a->profiler)
    *profiler = smr_xstrdup(a->profiler);
  else if (is_dir(prof))
    *profiler = smr_xstrdup(prof);
  else if (smr_profiler_dir_looks_like(a->trial))
    *profiler = smr_xstrdup(a->trial);
  else
    *profiler = NULL;
  free(dbg);
  free(prof);
}

/* ---- is there a trial?  Checked before anything is written there. */
static bool exists(const char *dir, const char *name) {
  char *p = smr_xasprintf("%s/%s", dir, name);
  struct stat st;
  bool ok = stat(p, &st) == 0;
  free(p);
  return ok;
}

/* TensorBoard: events.out.tfevents.* files in the folder or below it
 * (docs/tensorboard.md). */
static bool has_event_files(const char *dir) {
  smr_source *src;
  smr_error e;
  if (!is_dir(dir) || smr_source_local_open(dir, &src, &e) != SMR_OK)
    return false;
  bool any = smr_tb_probe(src);
  smr_source_close(src);
  return any;
}

static bool has_debug_data(const char *dir) {
  return exists(dir, "index") || exists(dir, "events") ||
         exists(dir, "training_job_end.ts") || has_event_files(dir);
}

/* Whether some rule reads tensors (every rule but profiler plugins). */
bool smr_job_needs_tensor_data(const smr_config *cfg) {
  for (size_t i = 0; i < cfg->n_rules; i++) {
    const smr_rule_config *rc = &cfg->rules[i];
    if (rc->lua || rc->python)
      return true;
    smr_plugin *p;
    smr_error err;
    smr_error_clear(&err);
    int st = rc->plugin ? smr_plugin_load(rc->plugin, &p, &err)
                        : smr_plugin_find(rc->rule, &p, &err);
    if (st != SMR_OK)
      return true; /* reported when the rules are set up */
    bool tensor = p->reg->kind != SMRULES_KIND_PROFILER;
    smr_plugin_unload(p);
    if (tensor)
      return true;
  }
  return false;
}

bool smr_job_trial_present(void *arg) {
  const smr_job_presence *p = arg;
  if (smr_location_is_remote(p->a->trial))
    return true; /* read as it is (a listing per look is not free) */
  char *debug, *prof;
  smr_job_resolve_dirs(p->a, &debug, &prof);
  /* profiler rules alone need profiler data, and the trial folder to
   * exist (it is opened all the same; a launched trainer makes it) */
  bool ok = has_debug_data(debug) ||
            (!p->tensor && prof &&
             (smr_location_is_remote(prof) ||
              (smr_profiler_dir_looks_like(prof) && is_dir(debug))));
  free(debug);
  free(prof);
  return ok;
}

void smr_job_no_trial(const smr_job_presence *p, smr_error *e) {
  const char *d = p->a->trial;
  smr_error_clear(e);
  if (!is_dir(d))
    smr_error_set(e, SMR_ERR_IO, d, -1,
                  "no such folder (expected a trial: smdebug's out_dir)");
  else
    smr_error_set(
        e, SMR_ERR_IO, d, -1,
        "no trial here: expected smdebug's index/ and events/ "
        "folders (or training_job_end.ts) in %s or in "
        "%s/debug-output, or TensorBoard's events.out.tfevents.* files%s",
        d, d, p->tensor ? "" : ", or profiler data (system/ or framework/)");
}
