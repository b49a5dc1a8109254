/* cli_inspect.c - `smrules inspect`: what a trial holds (steps, modes,
 * workers, collections, tensors, read problems), as a table or JSON. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "base/text.h"
#include "cli/cli.h"
#include "cli/cli_trial.h"
#include "format/mode.h"

static void jw_i64v(smr_jw *w, const smr_i64v *v) {
  smr_jw_arr(w);
  for (size_t i = 0; i < v->n; i++)
    smr_jw_int(w, v->v[i]);
  smr_jw_arr_end(w);
}

static void jw_strv(smr_jw *w, const smr_strv *v) {
  smr_jw_arr(w);
  for (size_t i = 0; i < v->n; i++)
    smr_jw_str(w, v->v[i]);
  smr_jw_arr_end(w);
}

static void inspect_modes(smr_jw *w, smr_trial *t) {
  int modes[4];
  size_t nm;
  smr_trial_modes(t, modes, &nm);
  smr_jw_key(w, "modes");
  smr_jw_obj(w);
  for (size_t i = 0; i < nm; i++) {
    smr_i64v ms = {0}, gs = {0};
    smr_trial_steps(t, modes[i], false, &ms);
    for (size_t k = 0; k < ms.n; k++) {
      int64_t g;
      if (smr_trial_global_step(t, modes[i], ms.v[k], &g))
        smr_i64v_push(&gs, g);
    }
    if (modes[i] == SMR_MODE_GLOBAL) {
      /* GLOBAL-mode steps are the global steps written in GLOBAL mode */
      smr_i64v_free(&gs);
      smr_i64v_free(&ms);
      smr_i64v all = {0};
      smr_trial_steps(t, SMR_MODE_GLOBAL, false, &all);
      for (size_t k = 0; k < all.n; k++) {
        int m;
        int64_t s;
        if (smr_trial_step_mode(t, all.v[k], &m, &s) && m == SMR_MODE_GLOBAL) {
          smr_i64v_push(&gs, all.v[k]);
          smr_i64v_push(&ms, s);
        }
      }
      smr_i64v_free(&all);
    }
    smr_jw_key(w, smr_mode_name(modes[i]));
    smr_jw_obj(w);
    smr_jw_key(w, "steps");
    jw_i64v(w, &gs);
    smr_jw_key(w, "mode_steps");
    jw_i64v(w, &ms);
    smr_jw_obj_end(w);
    smr_i64v_free(&ms);
    smr_i64v_free(&gs);
  }
  smr_jw_obj_end(w);
}

static void inspect_step_modes(smr_jw *w, smr_trial *t) {
  smr_i64v all = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, true, &all);
  smr_jw_key(w, "step_modes");
  smr_jw_obj(w);
  for (size_t i = 0; i < all.n; i++) {
    int m;
    int64_t ms;
    if (!smr_trial_step_mode(t, all.v[i], &m, &ms))
      continue;
    char key[32];
    snprintf(key, sizeof key, "%" PRId64, all.v[i]);
    smr_jw_key(w, key);
    smr_jw_arr(w);
    smr_jw_str(w, smr_mode_name(m));
    smr_jw_int(w, ms);
    smr_jw_arr_end(w);
  }
  smr_jw_obj_end(w);
  smr_i64v_free(&all);
}

static void inspect_collections(smr_jw *w, smr_trial *t) {
  smr_strv names = {0};
  smr_trial_collection_names(t, &names);
  smr_jw_key(w, "collections");
  smr_jw_obj(w);
  for (size_t i = 0; i < names.n; i++) {
    smr_strv members = {0};
    smr_error err;
    smr_trial_collection_members(t, names.v[i], NULL, &members, &err);
    smr_jw_key(w, names.v[i]);
    jw_strv(w, &members);
    smr_strv_free(&members);
  }
  smr_jw_obj_end(w);
  smr_strv_free(&names);
  smr_jw_key(w, "collections_error");
  smr_jw_str(w, smr_trial_collections_error(t));
}

static void inspect_tensor(smr_jw *w, smr_trial *t, const char *name) {
  smr_tensor_steps ts;
  smr_error err;
  if (smr_trial_tensor_steps(t, name, &ts, &err) != SMR_OK)
    return;
  smr_i64v complete = {0}, all = {0};
  for (size_t i = 0; i < ts.n; i++) {
    int64_t g = ts.v[i].step;
    if (all.n && all.v[all.n - 1] == g)
      continue;
    smr_i64v_push(&all, g);
    if (smr_trial_step_complete(t, g))
      smr_i64v_push(&complete, g);
  }
  smr_jw_obj(w);
  smr_jw_key(w, "name");
  smr_jw_str(w, name);
  smr_jw_key(w, "steps");
  jw_i64v(w, &complete);
  smr_jw_key(w, "steps_all");
  jw_i64v(w, &all);
  smr_jw_key(w, "workers_by_step");
  smr_jw_obj(w);
  for (size_t i = 0; i < ts.n;) {
    char key[32];
    snprintf(key, sizeof key, "%" PRId64, ts.v[i].step);
    smr_jw_key(w, key);
    smr_jw_arr(w);
    int64_t g = ts.v[i].step;
    for (; i < ts.n && ts.v[i].step == g; i++)
      smr_jw_str(w, ts.v[i].worker);
    smr_jw_arr_end(w);
  }
  smr_jw_obj_end(w);
  smr_jw_obj_end(w);
  smr_i64v_free(&complete);
  smr_i64v_free(&all);
  smr_tensor_steps_free(&ts);
}

static void inspect_problems(smr_jw *w, smr_trial *t) {
  const smr_trial_problem *p;
  size_t n = smr_trial_problems(t, &p);
  smr_jw_key(w, "errors");
  smr_jw_arr(w);
  for (size_t i = 0; i < n; i++) {
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
    smr_jw_obj_end(w);
  }
  smr_jw_arr_end(w);
}

static char *inspect_json(smr_trial *t, const char *dir) {
  smr_jw w = {0};
  smr_i64v steps = {0}, all = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  smr_trial_steps(t, SMR_MODE_GLOBAL, true, &all);
  smr_jw_obj(&w);
  smr_jw_key(&w, "trial");
  smr_jw_str(&w, dir);
  smr_jw_key(&w, "workers");
  jw_strv(&w, smr_trial_workers(t));
  smr_jw_key(&w, "num_workers");
  smr_jw_int(&w, smr_trial_num_workers(t));
  smr_jw_key(&w, "training_ended");
  smr_jw_bool(&w, smr_trial_end_marker(t));
  smr_jw_key(&w, "steps");
  jw_i64v(&w, &steps);
  smr_jw_key(&w, "steps_all");
  jw_i64v(&w, &all);
  smr_jw_key(&w, "last_complete_step");
  smr_jw_int(&w, smr_trial_last_complete_step(t));
  inspect_modes(&w, t);
  inspect_step_modes(&w, t);
  inspect_collections(&w, t);
  smr_strv names = {0};
  smr_error err;
  smr_trial_tensor_names(t, &names, &err);
  smr_jw_key(&w, "tensors");
  smr_jw_arr(&w);
  for (size_t i = 0; i < names.n; i++)
    inspect_tensor(&w, t, names.v[i]);
  smr_jw_arr_end(&w);
  inspect_problems(&w, t);
  smr_jw_key(&w, "state");
  smr_jw_str(&w, smr_trial_state_path(t));
  smr_jw_obj_end(&w);
  smr_strv_free(&names);
  smr_i64v_free(&steps);
  smr_i64v_free(&all);
  return smr_jw_finish(&w);
}

static void print_steps_line(const char *label, const smr_i64v *v) {
  printf("%-14s", label);
  if (v->n == 0)
    printf(" (none)");
  for (size_t i = 0; i < v->n; i++) {
    if (i == 12 && v->n > 16) {
      printf(" ... (%zu more) ... %" PRId64, v->n - 13, v->v[v->n - 1]);
      break;
    }
    printf(" %" PRId64, v->v[i]);
  }
  printf("\n");
}

/* Names and messages come from the trial's files: shown with the bytes a
 * terminal would obey escaped (base/text.h). */
static void print_safe(const char *fmt, const char *a, const char *b) {
  char *sa = smr_term_safe(a), *sb = b ? smr_term_safe(b) : NULL;
  printf(fmt, sa, sb);
  free(sa);
  free(sb);
}

static void safe_copies(const smr_strv *names, smr_strv *out) {
  for (size_t i = 0; i < names->n; i++) {
    char *s = smr_term_safe(names->v[i]);
    smr_strv_push(out, s);
    free(s);
  }
}

static void inspect_table(smr_trial *t, const char *dir) {
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, false, &steps);
  const smr_strv *workers = smr_trial_workers(t);
  printf("trial          %s\n", dir);
  printf("workers        %zu of %d expected:", workers->n,
         smr_trial_num_workers(t));
  for (size_t i = 0; i < workers->n; i++)
    print_safe(" %s", workers->v[i], NULL);
  printf("\ntraining ended %s\n", smr_trial_end_marker(t)
                                      ? "yes (training_job_end.ts)"
                                      : "no end marker");
  print_steps_line("steps", &steps);
  int modes[4];
  size_t nm;
  smr_trial_modes(t, modes, &nm);
  for (size_t i = 0; i < nm; i++) {
    smr_i64v ms = {0};
    smr_trial_steps(t, modes[i], false, &ms);
    char label[32];
    snprintf(label, sizeof label, "  %s", smr_mode_name(modes[i]));
    if (modes[i] != SMR_MODE_GLOBAL)
      print_steps_line(label, &ms);
    smr_i64v_free(&ms);
  }
  smr_strv names = {0}, shown = {0};
  smr_error err;
  smr_trial_tensor_names(t, &names, &err);
  safe_copies(&names, &shown);
  int w = 48; /* wider for a longer name */
  for (size_t i = 0; i < shown.n; i++)
    w = (int)strlen(shown.v[i]) > w ? (int)strlen(shown.v[i]) : w;
  printf("\n%-*s %8s  %s\n", w, "TENSOR", "STEPS", "FIRST..LAST");
  for (size_t i = 0; i < names.n; i++) {
    smr_i64v ts = {0};
    smr_trial_tensor_step_list(t, names.v[i], SMR_MODE_GLOBAL, false, &ts,
                               &err);
    if (ts.n)
      printf("%-*s %8zu  %" PRId64 "..%" PRId64 "\n", w, shown.v[i], ts.n,
             ts.v[0], ts.v[ts.n - 1]);
    else
      printf("%-*s %8zu\n", w, shown.v[i], ts.n);
    smr_i64v_free(&ts);
  }
  smr_strv cn = {0}, cshown = {0};
  smr_trial_collection_names(t, &cn);
  safe_copies(&cn, &cshown);
  int cw = 24; /* wider for a longer collection name */
  for (size_t i = 0; i < cshown.n; i++)
    cw = (int)strlen(cshown.v[i]) > cw ? (int)strlen(cshown.v[i]) : cw;
  printf("\n%-*s %s\n", cw, "COLLECTION", "MEMBERS");
  for (size_t i = 0; i < cn.n; i++) {
    smr_strv m = {0};
    smr_trial_collection_members(t, cn.v[i], NULL, &m, &err);
    printf("%-*s %zu\n", cw, cshown.v[i], m.n);
    smr_strv_free(&m);
  }
  if (smr_trial_collections_error(t))
    print_safe("collections: %s\n", smr_trial_collections_error(t), NULL);
  const smr_trial_problem *p;
  size_t np = smr_trial_problems(t, &p);
  for (size_t i = 0; i < np; i++)
    print_safe("problem: %s: %s\n", p[i].file, p[i].message);
  smr_strv_free(&cn);
  smr_strv_free(&cshown);
  smr_strv_free(&names);
  smr_strv_free(&shown);
  smr_i64v_free(&steps);
}

int smr_cmd_inspect(int argc, char **argv) {
  static const struct option longopts[] = {SMR_TRIAL_LONGOPTS, {0, 0, 0, 0}};
  smr_trial_args a = {0};
  int c;
  optind = 1;
  opterr = 0; /* smr_cli_bad_option says it, with a suggestion */
  while ((c = getopt_long(argc, argv, ":t:h", longopts, NULL)) != -1) {
    if (smr_cli_trial_opt(&a, c))
      continue;
    if (c == 'h') {
      printf("usage: smrules inspect --trial DIR [--json] [--live] "
             "[--rules FILE]\n%s",
             SMR_TRIAL_HELP);
      return SMR_EXIT_OK;
    }
    return smr_cli_bad_option("inspect", argv, "th", longopts);
  }
  smr_trial *t;
  int rc = smr_cli_open_trial(&a, &t);
  if (rc)
    return rc;
  if (a.json) {
    char *s = inspect_json(t, a.trial);
    printf("%s\n", s);
    free(s);
  } else {
    inspect_table(t, a.trial);
  }
  smr_cli_close_trial(&a, t);
  return SMR_EXIT_OK;
}
