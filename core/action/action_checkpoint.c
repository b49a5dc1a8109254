/* action_checkpoint.c - StopTraining's checkpoint step: before the stop
 * signal, ask the trainer to save its work and wait until it says it did
 * (docs/actions.md#checkpoint-before-stop).
 *
 * The request is a signal sent through the pidfd (checkpoint_signal, e.g.
 * USR2, which the trainer's handler turns into a save) and/or a request
 * file smrules writes (checkpoint_request_file, for a trainer that polls
 * for it from a thread of its own).  The confirmation is a file matching
 * checkpoint_file (a glob pattern) that was not there before the request,
 * or was rewritten since, and has kept its size and time for one look (a
 * trainer that writes in place is not caught half-way; one that writes a
 * temporary file and renames it is seen complete).  Relative paths are the
 * trainer's: resolved in its working directory (/proc/<pid>/cwd), and the
 * request file is written there without following a link (base/safefs).
 * The wait ends at the confirmation, when the trainer exits, or after
 * checkpoint_timeout_seconds; the stop follows in every case. */
#include <errno.h>
#include <glob.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"
#include "base/safefs.h"

#define LOOK_EVERY_NS 50000000L /* 50 ms between looks */
#define MAX_SEEN 4096           /* files of the pattern remembered */

typedef struct seen_file {
  char *path;
  struct timespec mtime;
  off_t size;
} seen_file;

typedef struct seen_set {
  seen_file *v;
  size_t n;
} seen_set;

static void seen_free(seen_set *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i].path);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* The regular files matching `pattern` now, with their times and sizes. */
static void look(const char *pattern, seen_set *out) {
  glob_t g;
  memset(out, 0, sizeof *out);
  if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0)
    return;
  size_t n = g.gl_pathc < MAX_SEEN ? g.gl_pathc : MAX_SEEN;
  out->v = smr_xcalloc(n ? n : 1, sizeof *out->v);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    out->v[out->n++] =
        (seen_file){smr_xstrdup(g.gl_pathv[i]), st.st_mtim, st.st_size};
  }
  globfree(&g);
}

static const seen_file *find(const seen_set *s, const char *path) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v[i].path, path) == 0)
      return &s->v[i];
  return NULL;
}

static bool same_time(struct timespec a, struct timespec b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* A file of `now` that is new or rewritten since `before` and looked the
 * same in `last` (the previous look): written, and done writing. */
static const seen_file *confirmed(const seen_set *before, const seen_set *last,
                                  const seen_set *now) {
  for (size_t i = 0; i < now->n; i++) {
    const seen_file *f = &now->v[i], *b = find(before, f->path);
    if (b && same_time(b->mtime, f->mtime) && b->size == f->size)
      continue;
    const seen_file *l = find(last, f->path);
    if (l && same_time(l->mtime, f->mtime) && l->size == f->size)
      return f;
  }
  return NULL;
}

/* `rel` as the trainer sees it: absolute as given, else below its cwd. */
static char *trainer_path(int64_t pid, const char *rel) {
  return rel[0] == '/'
             ? smr_xstrdup(rel)
             : smr_xasprintf("/proc/%lld/cwd/%s", (long long)pid, rel);
}

/* Writes the request file (its content: when, and why), through no link
 * below the trainer's working directory. */
static int write_request(const smr_stop_cfg *c, int64_t pid, smr_error *err) {
  char *path = trainer_path(pid, c->ckpt_request_file);
  char *cwd = smr_xasprintf("/proc/%lld/cwd/", (long long)pid);
  char *d = smr_xstrdup(path), *b = smr_xstrdup(path);
  const char *dir = dirname(d), *name = basename(b);
  int fd = -1,
      rc = smr_safe_dir_open(dir, c->ckpt_request_file[0] == '/' ? NULL : cwd,
                             false, &fd, err);
  if (rc == SMR_OK) {
    char text[128];
    int len = snprintf(text, sizeof text,
                       "{\"requested_by\": \"smrules\", \"time\": %.3f}\n",
                       (double)time(NULL));
    rc = smr_safe_write_at(fd, name, text, (size_t)len, c->ckpt_request_file,
                           err);
    close(fd);
  }
  free(d), free(b), free(cwd), free(path);
  return rc;
}

/* The file's name as configured: the trainer's relative path, not
 * /proc/<pid>/cwd/... */
static const char *shown_path(const char *path, int64_t pid) {
  char prefix[64];
  int n = snprintf(prefix, sizeof prefix, "/proc/%lld/cwd/", (long long)pid);
  return strncmp(path, prefix, (size_t)n) == 0 ? path + n : path;
}

/* How the request was made, for the outcome: "SIGUSR2", "ckpt.request",
 * or both. */
static void request_text(const smr_stop_cfg *c, char *buf, size_t n) {
  const char *name = c->ckpt_sig ? smr_act_signal_name(c->ckpt_sig) : NULL;
  char sig[24] = "";
  if (c->ckpt_sig && name)
    snprintf(sig, sizeof sig, "SIG%s", name);
  else if (c->ckpt_sig)
    snprintf(sig, sizeof sig, "signal %d", c->ckpt_sig);
  if (c->ckpt_sig && c->ckpt_request_file)
    snprintf(buf, n, "%s and %s", sig, c->ckpt_request_file);
  else
    snprintf(buf, n, "%s", c->ckpt_sig ? sig : c->ckpt_request_file);
}

bool smr_ckpt_wanted(const smr_stop_cfg *c) {
  return c->ckpt_file != NULL;
}

void smr_ckpt_dry_text(const smr_stop_cfg *c, char *out, size_t n) {
  char how[300];
  request_text(c, how, sizeof how);
  snprintf(out, n, "would ask for a checkpoint (%s) and wait up to %g s for %s",
           how, c->ckpt_timeout, c->ckpt_file);
}

bool smr_ckpt_request(const smr_stop_cfg *c, int pidfd, int64_t pid, char *out,
                      size_t n) {
  char how[300];
  request_text(c, how, sizeof how);
  char *pattern = trainer_path(pid, c->ckpt_file);
  seen_set before, last = {0}, now;
  look(pattern, &before);
  double t0 = smr_act_mono();
  smr_error err;
  smr_error_clear(&err);
  if (c->ckpt_request_file && write_request(c, pid, &err) != SMR_OK) {
    snprintf(out, n, "cannot write the checkpoint request: %s", err.msg);
    goto done;
  }
  if (c->ckpt_sig && smr_act_pidfd_signal(pidfd, c->ckpt_sig) != 0) {
    snprintf(out, n, "cannot send the checkpoint signal: %s", strerror(errno));
    goto done;
  }
  bool ok = false;
  for (;;) {
    look(pattern, &now);
    const seen_file *f = confirmed(&before, &last, &now);
    double el = smr_act_mono() - t0;
    if (f) {
      snprintf(out, n, "checkpoint %s written %.1f s after %s",
               shown_path(f->path, pid), el, how);
      ok = true;
    } else if (smr_act_pidfd_exited(pidfd)) {
      snprintf(out, n,
               "the trainer exited %.1f s after %s, with no new file "
               "matching %s",
               el, how, c->ckpt_file);
    } else if (el >= c->ckpt_timeout) {
      snprintf(out, n, "no checkpoint matching %s within %g s of %s",
               c->ckpt_file, c->ckpt_timeout, how);
    } else {
      seen_free(&last);
      last = now;
      nanosleep(&(struct timespec){0, LOOK_EVERY_NS}, NULL);
      continue;
    }
    seen_free(&now);
    seen_free(&last);
    seen_free(&before);
    free(pattern);
    return ok;
  }
done:
  seen_free(&before);
  free(pattern);
  return false;
}
