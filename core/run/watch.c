/* watch.c - the follow loop of `smrules run --watch`. */
#include "run/watch.h"

#include "run/launch.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE)
#define RESCAN_S 10.0

/* At most this many inotify watches per run: a trial with a folder per
 * step under index/ (hundreds of thousands) would otherwise use up the
 * user's watches (fs.inotify.max_user_watches, 8192 on many systems) and
 * other programs of that user would get ENOSPC.  Past it, smrules polls. */
#define WATCH_CAP 1024

typedef struct watcher {
  int fd; /* inotify descriptor, -1 when polling */
  const char *root;
  smr_trial *t; /* NULL: no trial (smr_watch_wait_until) */
  int max_wd;   /* watch descriptors are handed out 1, 2, 3, ... */
} watcher;

/* Give up inotify for polling, once, saying why. */
static void fall_back_to_polling(watcher *w, const char *why) {
  if (w->fd < 0)
    return;
  close(w->fd);
  w->fd = -1;
  fprintf(stderr,
          "smrules: warning: %s: %s; polling the trial instead of "
          "watching it\n",
          w->root, why);
}

static void watch_path(watcher *w, const char *path, uint32_t mask) {
  if (w->fd < 0)
    return;
  int wd = inotify_add_watch(w->fd, path, mask);
  if (wd < 0 && errno == ENOSPC)
    fall_back_to_polling(w, "the user's inotify watches are used up");
  else if (wd > w->max_wd && (w->max_wd = wd) >= WATCH_CAP)
    fall_back_to_polling(w, "more than 1024 folders to watch (index/ holds "
                            "a folder per step?)");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void add_watch(watcher *w, const char *rel) {
  char *path =
      rel[0] ? smr_xasprintf("%s/%s", w->root, rel) : smr_xstrdup(w->root);
  watch_path(w, path, WATCH_MASK | IN_ONLYDIR);
  free(path);
}

/* TensorBoard (docs/tensorboard.md#live): event files grow in place
 * (appends, no close) in the root or run sub-folders, so those folders are
 * watched for writes too, a few levels down; also while a trial has no
 * step yet, as it may turn out to be one. */
static void add_event_watches(watcher *w, const char *rel, int depth) {
  char *path =
      rel[0] ? smr_xasprintf("%s/%s", w->root, rel) : smr_xstrdup(w->root);
  /* IN_MASK_ADD: the root's watch keeps what add_watch asked for */
  watch_path(w, path, WATCH_MASK | IN_MODIFY | IN_ONLYDIR | IN_MASK_ADD);
  DIR *d = depth < 3 && w->fd >= 0 ? opendir(path) : NULL;
  free(path);
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.' || de->d_type != DT_DIR)
      continue;
    char *sub = rel[0] ? smr_xasprintf("%s/%s", rel, de->d_name)
                       : smr_xstrdup(de->d_name);
    add_event_watches(w, sub, depth + 1);
    free(sub);
  }
  if (d)
    closedir(d);
}

static bool wants_event_watches(const watcher *w) {
  if (!w->t)
    return false;
  if (smr_trial_is_tensorboard(w->t))
    return true;
  smr_i64v steps = {0};
  smr_trial_steps(w->t, SMR_MODE_GLOBAL, true, &steps);
  bool none = steps.n == 0;
  smr_i64v_free(&steps);
  return none;
}

/* Watch the root (end marker, index/ appearing), index/ and every
 * index/<folder>: new folders are added as they appear.  Adding a watch
 * twice is harmless (inotify returns the same descriptor). */
static void add_watches(watcher *w) {
  if (w->fd < 0)
    return;
  add_watch(w, "");
  if (wants_event_watches(w)) /* TensorBoard */
    add_event_watches(w, "", 0);
  add_watch(w, "index");
  char *idx = smr_xasprintf("%s/index", w->root);
  DIR *d = opendir(idx);
  free(idx);
  if (!d)
    return;
  struct dirent *de;
  while (w->fd >= 0 && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    char *rel = smr_xasprintf("index/%s", de->d_name);
    add_watch(w, rel);
    free(rel);
  }
  closedir(d);
}

enum { WOKE_CHANGED = 1, WOKE_TRAINER = 2, WOKE_SIGNAL = 4 };

/* Block until something changes, the trainer exits, a signal comes or
 * `wait_s` passes (polling: the polling interval).  Returns WOKE_* bits;
 * WOKE_CHANGED always when polling, as the trial may have changed. */
/* How often the group is looked at once its leader has exited (there is
 * no descriptor that says a process group is empty). */
#define GROUP_POLL_S 0.1

static int wait_for_change(watcher *w, double wait_s, int poll_ms,
                           const smr_watch_opts *o, bool following_group) {
  struct pollfd p[3];
  int n = 0, ino = -1, tr = -1, sg = -1;
  if (w->fd >= 0)
    p[ino = n++] = (struct pollfd){w->fd, POLLIN, 0};
  if (following_group && wait_s > GROUP_POLL_S)
    wait_s = GROUP_POLL_S; /* the leader's descriptor stays readable */
  else if (o->follow_trainer && o->trainer_fd >= 0)
    p[tr = n++] = (struct pollfd){o->trainer_fd, POLLIN, 0};
  if (smr_interrupt_fd() >= 0)
    p[sg = n++] = (struct pollfd){smr_interrupt_fd(), POLLIN, 0};
  double s = wait_s;
  if (w->fd < 0 && s > poll_ms / 1000.0)
    s = poll_ms / 1000.0;
  int ms = s > 0 ? (int)(s * 1000) + 1 : 0;
  int woke = w->fd < 0 ? WOKE_CHANGED : 0;
  if (poll(p, (nfds_t)n, ms) <= 0)
    return woke;
  if (tr >= 0 && p[tr].revents)
    woke |= WOKE_TRAINER;
  if (sg >= 0 && p[sg].revents) {
    char buf[64];
    while (read(p[sg].fd, buf, sizeof buf) > 0) /* drain */
      ;
    woke |= WOKE_SIGNAL;
  }
  if (ino >= 0 && p[ino].revents) {
    char buf[16 * 1024];
    while (read(w->fd, buf, sizeof buf) > 0) /* drain; we rescan anyway */
      ;
    add_watches(w);
    woke |= WOKE_CHANGED;
  }
  return woke;
}

static bool leader_gone(const smr_watch_opts *o) {
  if (!o->follow_trainer || o->trainer_fd < 0)
    return false;
  struct pollfd p = {o->trainer_fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

/* Whether training is over: the trainer exited and, when it leads a
 * process group, the group is empty.  The first time the leader is found
 * gone with the group still running, that is said once. */
static bool trainer_gone(const smr_watch_opts *o, bool *following_group) {
  if (!leader_gone(o))
    return false;
  size_t left = o->trainer_pgid > 0 ? smr_proc_group_alive(o->trainer_pgid) : 0;
  if (left == 0)
    return true;
  if (!*following_group) {
    fprintf(o->progress ? o->progress : stderr,
            "smrules: the training command (pid %lld) exited, but %zu "
            "process%s of its process group still run%s: following the "
            "group until its last process exits\n",
            (long long)o->trainer_pgid, left, left == 1 ? "" : "es",
            left == 1 ? "s" : "");
    *following_group = true;
  }
  return false;
}

/* ------------------------------------------------------------ progress */

typedef struct progress {
  FILE *f;
  bool tty;
  double last_line; /* when a log line was last printed (now_s) */
  size_t lines_drawn;
  char **last; /* last line printed per instance (log mode) */
  size_t n;
} progress;

static void status_line(smr_instance *in, char *buf, size_t n) {
  const smr_i64v *trig = smr_instance_triggered(in);
  int len = snprintf(buf, n, "%-28s %-14s evaluated %-6" PRId64,
                     smr_instance_name(in),
                     smr_rule_status_name(smr_instance_status(in)),
                     smr_instance_evaluated(in));
  if (trig->n && len > 0 && (size_t)len < n)
    snprintf(buf + len, n - (size_t)len,
             " last trigger at step %" PRId64 " (%zu in all)",
             trig->v[trig->n - 1], trig->n);
}

static void show(progress *p, smr_runner *r, smr_trial *t) {
  if (!p->f)
    return;
  size_t n = smr_runner_count(r);
  if (!p->last) {
    p->last = smr_xcalloc(n ? n : 1, sizeof *p->last);
    p->n = n;
  }
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, true, &steps);
  char head[128];
  snprintf(head, sizeof head, "steps seen: %zu (latest %" PRId64 ")%s", steps.n,
           steps.n ? steps.v[steps.n - 1] : (int64_t)-1,
           smr_trial_end_marker(t) ? ", training ended" : "");
  smr_i64v_free(&steps);
  if (p->tty) {
    if (p->lines_drawn) /* move up and redraw the block */
      fprintf(p->f, "\033[%zuA", p->lines_drawn);
    fprintf(p->f, "\033[2K%s\n", head);
    for (size_t i = 0; i < n; i++) {
      char line[256];
      status_line(smr_runner_instance(r, i), line, sizeof line);
      fprintf(p->f, "\033[2K  %s\n", line);
    }
    p->lines_drawn = n + 1;
    fflush(p->f);
    return;
  }
  /* log mode: a line when a rule's status or trigger count changes (not
   * at every evaluated step); the final pass too prints only what changed,
   * so the last line of a rule is not printed twice */
  for (size_t i = 0; i < n; i++) {
    smr_instance *in = smr_runner_instance(r, i);
    char key[64], line[256];
    snprintf(key, sizeof key, "%d/%zu", (int)smr_instance_status(in),
             smr_instance_triggered(in)->n);
    if (p->last[i] && strcmp(p->last[i], key) == 0)
      continue;
    free(p->last[i]);
    p->last[i] = smr_xstrdup(key);
    status_line(in, line, sizeof line);
    time_t now = time(NULL);
    struct tm tm;
    char ts[32];
    strftime(ts, sizeof ts, "%H:%M:%S", localtime_r(&now, &tm));
    fprintf(p->f, "%s %s | %s\n", ts, head, line);
    p->last_line = now_s();
  }
  fflush(p->f);
}

/* Log mode, nothing printed for `every` seconds: one line with the steps
 * seen, the latest step and the triggers so far. */
static void heartbeat(progress *p, smr_runner *r, smr_trial *t, double every) {
  if (!p->f || p->tty || every <= 0 || now_s() - p->last_line < every)
    return;
  smr_i64v steps = {0};
  smr_trial_steps(t, SMR_MODE_GLOBAL, true, &steps);
  size_t triggers = 0, fired = 0;
  for (size_t i = 0; i < smr_runner_count(r); i++) {
    size_t k = smr_instance_triggered(smr_runner_instance(r, i))->n;
    triggers += k;
    fired += k > 0;
  }
  time_t now = time(NULL);
  struct tm tm;
  char ts[32];
  strftime(ts, sizeof ts, "%H:%M:%S", localtime_r(&now, &tm));
  fprintf(p->f,
          "%s watching: steps seen: %zu (latest %" PRId64 "), triggers so "
          "far: %zu (%zu of %zu rules)\n",
          ts, steps.n, steps.n ? steps.v[steps.n - 1] : (int64_t)-1, triggers,
          fired, smr_runner_count(r));
  fflush(p->f);
  smr_i64v_free(&steps);
  p->last_line = now_s();
}

static void progress_free(progress *p) {
  for (size_t i = 0; i < p->n; i++)
    free(p->last[i]);
  free(p->last);
}

/* ---------------------------------------------------------------- loop */

/* Refresh, and hand the new steps to the rules' threads (runner.h): the
 * watch goes on at once, whatever a rule is doing. */
static int step_once(smr_trial *t, smr_runner *r, smr_error *err) {
  (void)t;
  int rc = smr_runner_refresh(r, err);
  if (rc == SMR_OK)
    smr_runner_live_dispatch(r);
  return rc;
}

/* What the rules' threads write, read from this one. */
static void on_pass(const smr_watch_opts *o, smr_runner *r) {
  if (!o->on_pass)
    return;
  smr_runner_lock_results(r);
  o->on_pass(o->on_pass_arg);
  smr_runner_unlock_results(r);
}

static void set_end(const smr_watch_opts *o, smr_watch_end e) {
  if (o->ended)
    *o->ended = e;
}

int smr_watch_run(smr_trial *t, smr_runner *r, const smr_watch_opts *o,
                  smr_error *err) {
  watcher w = {-1, smr_trial_root(t), t, 0};
  if (!o->force_polling)
    w.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  add_watches(&w);
  progress p = {o->progress, o->tty, now_s(), 0, NULL, 0};
  int poll_ms = o->poll_ms > 0 ? o->poll_ms : 200;
  int poll_cur = poll_ms;
  double tick = o->tick_s > 0 ? o->tick_s : 1.0;
  double start = now_s();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  double last_activity = (double)wall.tv_sec + wall.tv_nsec / 1e9;
  size_t steps_seen = 0;
  int rc = SMR_OK;
  smr_watch_end end = SMR_WATCH_TIMEOUT;
  smr_runner_live_start(r);
  /* Without a change event only rules driven by time have work; a full
   * re-scan still runs every RESCAN_S as a safety net (an event lost while
   * a new index folder was being added to the watch). */
  bool changed = true, following_group = false;
  double last_scan = 0;
  int woke = 0;
  for (;;) {
    if (changed || now_s() - last_scan >= RESCAN_S) {
      if ((rc = step_once(t, r, err)) != SMR_OK)
        break;
      if (smr_trial_is_tensorboard(t)) /* TensorBoard: folders may be new */
        add_watches(&w);
      last_scan = now_s();
      /* a new step is activity */
      smr_i64v steps = {0};
      smr_trial_steps(t, SMR_MODE_GLOBAL, true, &steps);
      if (steps.n > steps_seen) {
        clock_gettime(CLOCK_REALTIME, &wall);
        last_activity = (double)wall.tv_sec + wall.tv_nsec / 1e9;
        steps_seen = steps.n;
        poll_cur = poll_ms;
      } else if (poll_cur < 5 * poll_ms) {
        /* polling: back off while nothing changes (up to 5x the interval)
         * so an idle watch costs little; a new step resets it */
        poll_cur *= 2;
      }
      smr_i64v_free(&steps);
    }
    smr_runner_tick(r, last_activity);
    on_pass(o, r);
    /* Following a trainer, its exit ends the watch (it may still save a
     * model after the end marker, or die without writing one); else the
     * end marker does.  Either way nothing more is written: one more pass
     * picks up anything renamed into place just before. */
    bool over = o->follow_trainer ? trainer_gone(o, &following_group)
                                  : smr_trial_end_marker(t);
    if (over) {
      end = o->follow_trainer ? SMR_WATCH_TRAINER : SMR_WATCH_ENDED;
      rc = step_once(t, r, err);
      smr_runner_live_stop(r, false); /* every rule through every step */
      on_pass(o, r);
      break;
    }
    if ((woke & WOKE_SIGNAL) && !o->forwarding) {
      end = SMR_WATCH_INTERRUPTED; /* the step in hand is done */
      smr_runner_live_stop(r, true);
      break;
    }
    smr_runner_lock_results(r);
    show(&p, r, t);
    heartbeat(&p, r, t, o->heartbeat_s);
    smr_runner_unlock_results(r);
    double left = o->timeout_s > 0 ? o->timeout_s - (now_s() - start) : tick;
    if (o->timeout_s > 0 && left <= 0)
      break;
    double wait = left < tick ? left : tick;
    if (!smr_runner_has_clock_rules(r) && w.fd >= 0 && o->timeout_s <= 0)
      wait = RESCAN_S; /* nothing to do until a file appears */
    if (o->heartbeat_s > 0 && !o->tty && o->progress) {
      double due = o->heartbeat_s - (now_s() - p.last_line);
      if (due < wait)
        wait = due > 0.01 ? due : 0.01;
    }
    woke = wait_for_change(&w, wait, poll_cur, o, following_group);
    changed = woke & WOKE_CHANGED;
  }
  smr_runner_live_stop(r, false); /* the timeout, an error: steps in hand */
  set_end(o, end);
  show(&p, r, t);
  progress_free(&p);
  if (w.fd >= 0)
    close(w.fd);
  return rc;
}

smr_watch_end smr_watch_wait_until(bool (*ready)(void *), void *arg,
                                   const smr_watch_opts *o) {
  watcher none = {-1, NULL, NULL, 0};
  double start = now_s();
  bool following_group = false;
  for (;;) {
    if (ready(arg))
      return SMR_WATCH_READY;
    if (trainer_gone(o, &following_group))
      return SMR_WATCH_TRAINER;
    if (o->timeout_s > 0 && now_s() - start >= o->timeout_s)
      return SMR_WATCH_TIMEOUT;
    int woke = wait_for_change(&none, 0.1, 100, o, following_group);
    if ((woke & WOKE_SIGNAL) && !o->forwarding)
      return SMR_WATCH_INTERRUPTED;
  }
}
