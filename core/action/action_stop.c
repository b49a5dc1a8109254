/* action_stop.c - StopTraining: signal the training process, and only
 * when smrules can prove it is the process that was configured.
 *
 * A target is named by a pid (rules.yaml or --training-pid), a pid file
 * or an exact command line.  The first time smrules sees it, it records
 * the process's start time (/proc/<pid>/stat field 22) and the boot id in
 * the action_target table; before signalling, the process must still
 * have them, so a pid that was reused by another process is never
 * signalled.  A pid file must not be older than the process it names
 * (a stale file points at a recycled pid).  A command line must match
 * exactly one process.  The process must belong to the user smrules
 * runs as (or to actions.StopTraining.allow_uid) and be a thread-group
 * leader (a thread id in a pid file names no process); pids are range-
 * checked in pid_t's width before anything is narrowed.  The signal goes
 * only through a pidfd opened before the identity check -- there is no
 * kill() fallback -- so the check and the signal concern the same process
 * even if it exits in between. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"
#include "action/action_store.h"
#include "run/launch.h"

#define PID_FILE_SLACK 2.0 /* seconds: start times are known to ~1 s */
#define KILL_WAIT 5.0

/* -------------------------------------------------------- resolving */

typedef struct target {
  int64_t pid;
  double file_mtime; /* pid files: when the file was written */
  char *key;         /* action_target key */
} target;

static smr_act_rc from_pid_file(const smr_stop_cfg *c, target *t,
                                smr_act_result *r) {
  char buf[64];
  struct stat st;
  /* O_NONBLOCK: a FIFO there must not block the action worker */
  int fd = open(c->pid_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return smr_act_set(r, errno == ENOENT ? SMR_ACT_RETRY : SMR_ACT_REFUSED,
                       "pid file %s: %s", c->pid_file, strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "pid file %s is not a regular file; nothing signalled",
                       c->pid_file);
  }
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0)
    return smr_act_set(r, SMR_ACT_REFUSED, "pid file %s: cannot read",
                       c->pid_file);
  buf[n] = '\0';
  char *end;
  errno = 0;
  long long pid = strtoll(buf, &end, 10);
  bool overflow = errno == ERANGE;
  while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')
    end++;
  /* checked in the width of a process id (pid_t), before any narrowing */
  if (end == buf || *end || overflow || pid < 2 || pid > INT32_MAX)
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "pid file %s does not hold a "
                       "process id (2 to 2147483647); nothing signalled",
                       c->pid_file);
  t->pid = pid;
  t->file_mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
  return SMR_ACT_OK;
}

static bool cmdline_matches(const smr_stop_cfg *c, const smr_strv *argv) {
  if (!argv->n)
    return false;
  if (!c->cmdline_text) {
    if (argv->n != c->cmdline.n)
      return false;
    for (size_t i = 0; i < argv->n; i++)
      if (strcmp(argv->v[i], c->cmdline.v[i]) != 0)
        return false;
    return true;
  }
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  for (size_t i = 0; i < argv->n; i++)
    smr_buf_printf(&b, "%s%s", i ? " " : "", argv->v[i]);
  bool same = strcmp(b.data, c->cmdline_text) == 0;
  smr_buf_free(&b);
  return same;
}

static smr_act_rc from_cmdline(const smr_stop_cfg *c, target *t,
                               smr_act_result *r) {
  DIR *d = opendir("/proc");
  if (!d)
    return smr_act_set(r, SMR_ACT_REFUSED, "cannot list processes (/proc)");
  smr_i64v found = {0};
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end;
    long long pid = strtoll(de->d_name, &end, 10);
    if (*end || pid < 2 || pid == (long long)getpid())
      continue;
    smr_strv argv = {0};
    smr_proc_cmdline(pid, &argv);
    if (cmdline_matches(c, &argv))
      smr_i64v_push(&found, pid);
    smr_strv_free(&argv);
  }
  closedir(d);
  smr_act_rc rc = SMR_ACT_OK;
  if (found.n == 0)
    rc = smr_act_set(r, SMR_ACT_SKIPPED,
                     "no running process has this "
                     "command line");
  else if (found.n > 1)
    rc = smr_act_set(r, SMR_ACT_REFUSED,
                     "ambiguous: %zu processes have this "
                     "command line (pids %lld, %lld%s); nothing signalled",
                     found.n, (long long)found.v[0], (long long)found.v[1],
                     found.n > 2 ? ", ..." : "");
  else
    t->pid = found.v[0];
  smr_i64v_free(&found);
  return rc;
}

static char *target_key(const smr_stop_cfg *c) {
  switch (c->how) {
  case SMR_STOP_PID:
    return smr_xasprintf("pid:%lld", (long long)c->pid);
  case SMR_STOP_PID_FILE:
    return smr_xasprintf("pid_file:%s", c->pid_file);
  default: {
    smr_buf b = {0};
    smr_buf_puts(&b, "cmdline:");
    if (c->cmdline_text)
      smr_buf_puts(&b, c->cmdline_text);
    for (size_t i = 0; i < c->cmdline.n; i++)
      smr_buf_printf(&b, "%s%s", i ? "\x1f" : "", c->cmdline.v[i]);
    return b.data;
  }
  }
}

static smr_act_rc resolve(const smr_stop_cfg *c, target *t, smr_act_result *r) {
  memset(t, 0, sizeof *t);
  smr_act_rc rc = SMR_ACT_OK;
  switch (c->how) {
  case SMR_STOP_PID:
    t->pid = c->pid;
    break;
  case SMR_STOP_PID_FILE:
    rc = from_pid_file(c, t, r);
    break;
  case SMR_STOP_CMDLINE:
    rc = from_cmdline(c, t, r);
    break;
  default:
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "no target configured "
                       "(--training-pid, or pid, pid_file or cmdline under "
                       "actions.StopTraining)");
  }
  if (rc == SMR_ACT_OK)
    t->key = target_key(c);
  return rc;
}

/* ------------------------------------------------- a file's word */

static bool has_check(const smr_stop_cfg *c) {
  return c->comm || c->exe || c->cmdline.n || c->cmdline_text;
}

/* A pid file is written by the job, so the number in it proves nothing:
 * the process it names must also pass a check given with pid_file
 * (cmdline, comm, exe), and a process of uid 0 is signalled only when
 * allow_root says so -- otherwise a job could have smrules, running as
 * root to stop another user's job, kill any root process older than the
 * file.  A command line found by scanning is held to the same uid 0
 * rule.  (The start time against the file's is check_identity's.) */
static smr_act_rc check_named_process(const smr_stop_cfg *c, const target *t,
                                      int64_t uid, smr_act_result *r) {
  if (c->how != SMR_STOP_PID_FILE && c->how != SMR_STOP_CMDLINE)
    return SMR_ACT_OK;
  if (uid == 0 && !c->allow_root)
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "process %lld runs as root (uid 0): smrules stops a "
                       "root process found by %s only with "
                       "actions.StopTraining.allow_root: true; nothing "
                       "signalled",
                       (long long)t->pid,
                       c->how == SMR_STOP_PID_FILE ? "a pid file"
                                                   : "its command line");
  if (c->how != SMR_STOP_PID_FILE)
    return SMR_ACT_OK;
  if (!has_check(c))
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "pid file %s names pid %lld, but the job writes that "
                       "file: give cmdline, comm or exe with pid_file so "
                       "smrules can tell the process is the trainer; nothing "
                       "signalled",
                       c->pid_file, (long long)t->pid);
  char seen[4096];
  if (c->comm) {
    smr_proc_comm(t->pid, seen, sizeof seen);
    if (strcmp(seen, c->comm) != 0)
      return smr_act_set(r, SMR_ACT_REFUSED,
                         "pid file %s names pid %lld, whose comm '%s' is not "
                         "'%s'; nothing signalled",
                         c->pid_file, (long long)t->pid, seen, c->comm);
  }
  if (c->exe) {
    smr_proc_exe(t->pid, seen, sizeof seen);
    if (strcmp(seen, c->exe) != 0)
      return smr_act_set(r, SMR_ACT_REFUSED,
                         "pid file %s names pid %lld, whose exe '%s' is not "
                         "'%s'; nothing signalled",
                         c->pid_file, (long long)t->pid, seen, c->exe);
  }
  if (c->cmdline.n || c->cmdline_text) {
    smr_strv argv = {0};
    smr_proc_cmdline(t->pid, &argv);
    bool same = cmdline_matches(c, &argv);
    smr_strv_free(&argv);
    if (!same) {
      char *cmd = smr_proc_cmdline_text(t->pid);
      smr_act_set(r, SMR_ACT_REFUSED,
                  "pid file %s names pid %lld, whose command line (%s) is not "
                  "the configured cmdline; nothing signalled",
                  c->pid_file, (long long)t->pid, cmd);
      free(cmd);
      return SMR_ACT_REFUSED;
    }
  }
  return SMR_ACT_OK;
}

/* ---------------------------------------------------------- identity */

static void when_text(double t, char *buf, size_t n) {
  time_t s = (time_t)t;
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* The process now at t->pid against what was recorded for this target;
 * records it when it is new. */
static smr_act_rc check_identity(smr_stop_cfg *c, const target *t,
                                 const smr_proc_id *now, smr_act_store *s,
                                 bool persist, smr_act_result *r) {
  char a[40], b[40];
  if (c->how == SMR_STOP_PID_FILE &&
      now->start_wall > t->file_mtime + PID_FILE_SLACK) {
    when_text(t->file_mtime, a, sizeof a);
    when_text(now->start_wall, b, sizeof b);
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "pid file %s (written %s) is older "
                       "than process %lld (started %s): the pid was reused; "
                       "nothing signalled",
                       c->pid_file, a, (long long)t->pid, b);
  }
  smr_proc_id rec;
  double seen_at = 0;
  bool have = s && smr_act_target_load(s, t->key, &rec, &seen_at);
  if (!have && c->have_seen) {
    rec = c->seen;
    have = true;
  }
  if (have && rec.pid == now->pid && !smr_proc_same(&rec, now)) {
    when_text(rec.start_wall, a, sizeof a);
    when_text(now->start_wall, b, sizeof b);
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "pid %lld now belongs to a process "
                       "started %s, not the one first seen (started %s): the "
                       "pid was reused; nothing signalled",
                       (long long)now->pid, b, a);
  }
  if (have && rec.pid != now->pid && c->how == SMR_STOP_PID_FILE &&
      t->file_mtime <= seen_at)
    return smr_act_set(r, SMR_ACT_REFUSED,
                       "pid file %s names pid %lld but "
                       "pid %lld was recorded and the file was not rewritten "
                       "since; nothing signalled",
                       c->pid_file, (long long)now->pid, (long long)rec.pid);
  if (!have || rec.pid != now->pid) {
    if (s && persist)
      smr_act_target_save(s, t->key, now);
    c->seen = *now;
    c->have_seen = true;
  }
  return SMR_ACT_OK;
}

void smr_stop_prime(smr_stop_cfg *c, smr_act_store *s, bool persist) {
  target t;
  smr_act_result r;
  smr_proc_id now;
  if (resolve(c, &t, &r) != SMR_ACT_OK)
    return;
  if (smr_proc_identity(t.pid, &now) == 0 && now.state != 'Z')
    check_identity(c, &t, &now, s, persist, &r); /* records first sight */
  free(t.key);
}

/* -------------------------------------------------------- signalling */

static bool gone(int pidfd) {
  return smr_act_pidfd_exited(pidfd);
}

/* Seconds until the process exited, or -1 if it still runs after max. */
static double wait_exit(int pidfd, double max) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el =
        (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (gone(pidfd))
      return el;
    if (el >= max)
      return -1;
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    double left = max - el;
    poll(&p, 1, left > 0.05 ? 50 : (int)(left * 1000) + 1);
  }
}

static void signal_text(int sig, char *buf, size_t n) {
  const char *name = smr_act_signal_name(sig);
  if (name)
    snprintf(buf, n, "SIG%s", name);
  else
    snprintf(buf, n, "signal %d", sig);
}

static void signal_and_wait(smr_stop_cfg *c, int pidfd, const smr_proc_id *id,
                            const char *cmd, smr_act_result *r) {
  char sname[24];
  signal_text(c->sig, sname, sizeof sname);
  if (smr_act_pidfd_signal(pidfd, c->sig) != 0) {
    smr_act_set(r, errno == ESRCH ? SMR_ACT_SKIPPED : SMR_ACT_FAILED,
                "cannot send %s to pid %lld: %s", sname, (long long)id->pid,
                strerror(errno));
    return;
  }
  bool escalate = c->kill_after_grace && c->sig != SIGKILL;
  double t = wait_exit(pidfd, escalate ? c->grace : 1.0);
  if (t >= 0) {
    smr_act_set(r, SMR_ACT_OK,
                "sent %s to pid %lld (%s); it exited after "
                "%.1f s",
                sname, (long long)id->pid, cmd, t);
    return;
  }
  if (!escalate) {
    smr_act_set(r, SMR_ACT_OK, "sent %s to pid %lld (%s)", sname,
                (long long)id->pid, cmd);
    return;
  }
  smr_act_pidfd_signal(pidfd, SIGKILL);
  double k = wait_exit(pidfd, KILL_WAIT);
  smr_act_set(r, SMR_ACT_OK,
              "sent %s to pid %lld (%s); still running after "
              "%g s, sent SIGKILL%s",
              sname, (long long)id->pid, cmd, c->grace,
              k >= 0 ? "; it exited" : "");
}

/* Seconds until no process of group `pgid` runs, or -1 if some still do
 * after max (looked at every 20 ms: nothing signals a group's end). */
static double wait_group_exit(int64_t pgid, double max) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el =
        (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (smr_proc_group_alive(pgid) == 0)
      return el;
    if (el >= max)
      return -1;
    nanosleep(&(struct timespec){0, 20000000}, NULL);
  }
}

/* The command smrules launched leads a process group of its own: a
 * wrapper that does not exec (`sh -c 'train; echo done'`) or a trainer
 * started in the background stays in it, so the whole group is signalled
 * and the stop is done when the group is empty, not when its leader has
 * exited.  The leader is smrules' child and not reaped before the run
 * ends, so its pid, the group's id, names no other group meanwhile. */
static void signal_group_and_wait(smr_stop_cfg *c, const smr_proc_id *id,
                                  const char *cmd, smr_act_result *r) {
  char sname[24];
  signal_text(c->sig, sname, sizeof sname);
  int64_t pgid = id->pid;
  if (kill(-(pid_t)pgid, c->sig) != 0) {
    smr_act_set(r, errno == ESRCH ? SMR_ACT_SKIPPED : SMR_ACT_FAILED,
                "cannot send %s to the process group of pid %lld: %s", sname,
                (long long)pgid, strerror(errno));
    return;
  }
  /* counted after the signal (zombies too: those it already ended), so
   * that walking /proc does not delay the stop */
  size_t n = smr_proc_group_members(pgid);
  bool escalate = c->kill_after_grace && c->sig != SIGKILL;
  double t = wait_group_exit(pgid, escalate ? c->grace : 1.0);
  if (t >= 0) {
    smr_act_set(r, SMR_ACT_OK,
                "sent %s to the process group of pid %lld (%s, %zu "
                "process%s); all exited after %.1f s",
                sname, (long long)pgid, cmd, n, n == 1 ? "" : "es", t);
    return;
  }
  if (!escalate) {
    smr_act_set(r, SMR_ACT_OK,
                "sent %s to the process group of pid %lld (%s, %zu "
                "process%s)",
                sname, (long long)pgid, cmd, n, n == 1 ? "" : "es");
    return;
  }
  kill(-(pid_t)pgid, SIGKILL);
  double k = wait_group_exit(pgid, KILL_WAIT);
  smr_act_set(r, SMR_ACT_OK,
              "sent %s to the process group of pid %lld (%s); still running "
              "after %g s, sent SIGKILL%s",
              sname, (long long)pgid, cmd, c->grace,
              k >= 0 ? "; all exited" : "");
}

/* Whether the target is the launched command, leading its own group. */
static bool launched_group(const smr_stop_cfg *c, int64_t pid) {
  return c->launched && pid == c->pid && getpgid((pid_t)pid) == (pid_t)pid;
}

static smr_act_rc check_prefix(const smr_stop_cfg *c, const char *prefix,
                               smr_act_result *r) {
  if (!prefix || strncmp(c->job_name, prefix, strlen(prefix)) == 0)
    return SMR_ACT_OK;
  return smr_act_set(r, SMR_ACT_REFUSED,
                     "training_job_prefix '%s' does not "
                     "match the start of the job name '%s'; nothing signalled",
                     prefix, c->job_name);
}

void smr_stop_run(smr_stop_cfg *c, const char *prefix, bool dry_run,
                  smr_act_store *s, bool persist, smr_act_result *r) {
  target t = {0};
  if (check_prefix(c, prefix, r) != SMR_ACT_OK ||
      resolve(c, &t, r) != SMR_ACT_OK)
    return;
  if (t.pid < 2 || t.pid > INT32_MAX || t.pid == (int64_t)getpid()) {
    smr_act_set(r, SMR_ACT_REFUSED,
                "pid %lld is not a training process; nothing signalled",
                (long long)t.pid);
    free(t.key);
    return;
  }
  int pidfd = smr_act_pidfd_open(t.pid);
  int open_errno = errno;
  smr_proc_id now;
  int64_t tgid = -1, uid = -1;
  bool have_status = smr_proc_status(t.pid, &tgid, &uid) == 0;
  if (pidfd < 0 && open_errno == ESRCH && !have_status) {
    smr_act_set(r, SMR_ACT_SKIPPED, "process %lld is not running",
                (long long)t.pid);
  } else if (have_status && tgid != t.pid) {
    smr_act_set(r, SMR_ACT_REFUSED,
                "%lld is a thread of process %lld, not a process: smrules "
                "signals only the process a target names; nothing signalled",
                (long long)t.pid, (long long)tgid);
  } else if (pidfd < 0) {
    smr_act_set(r, SMR_ACT_REFUSED,
                "cannot get a pidfd for pid %lld (%s): smrules signals only "
                "through a pidfd, so that a reused pid is never signalled; "
                "nothing signalled",
                (long long)t.pid, strerror(open_errno));
  } else if (!have_status || smr_proc_identity(t.pid, &now) != 0 ||
             (now.state == 'Z' &&
              !(launched_group(c, t.pid) && smr_proc_group_alive(t.pid) > 0))) {
    smr_act_set(r, SMR_ACT_SKIPPED, "process %lld is not running",
                (long long)t.pid);
  } else if (uid != (int64_t)geteuid() && uid != c->allow_uid) {
    smr_act_set(r, SMR_ACT_REFUSED,
                "process %lld belongs to uid %lld, not to the user smrules "
                "runs as (uid %u); allow it with actions.StopTraining."
                "allow_uid: %lld; nothing signalled",
                (long long)t.pid, (long long)uid, (unsigned)geteuid(),
                (long long)uid);
  } else if (check_named_process(c, &t, uid, r) == SMR_ACT_OK &&
             check_identity(c, &t, &now, s, persist, r) == SMR_ACT_OK) {
    char *cmd = smr_proc_cmdline_text(t.pid);
    char ckpt[300] = "";
    if (smr_ckpt_wanted(c) && dry_run)
      smr_ckpt_dry_text(c, ckpt, sizeof ckpt);
    else if (smr_ckpt_wanted(c))
      smr_ckpt_request(c, pidfd, t.pid, ckpt, sizeof ckpt);
    bool ended = ckpt[0] && !dry_run && smr_act_pidfd_exited(pidfd) &&
                 !(launched_group(c, t.pid) && smr_proc_group_alive(t.pid));
    if (ended) { /* the request ended it (an unhandled signal) */
      smr_act_set(r, SMR_ACT_OK, "%s; nothing left to stop", ckpt);
      ckpt[0] = '\0';
    } else if (dry_run) {
      char sname[24];
      signal_text(c->sig, sname, sizeof sname);
      smr_act_set(r, SMR_ACT_DRY_RUN, "%s%swould send %s to pid %lld (%s)%s",
                  ckpt, ckpt[0] ? ", then " : "", sname, (long long)t.pid, cmd,
                  c->kill_after_grace && c->sig != SIGKILL
                      ? ", then SIGKILL if it still runs after the grace "
                        "period"
                      : "");
    } else if (launched_group(c, t.pid)) {
      signal_group_and_wait(c, &now, cmd, r);
    } else {
      signal_and_wait(c, pidfd, &now, cmd, r);
    }
    if (ckpt[0] && !dry_run) {
      char stop[sizeof r->detail];
      memcpy(stop, r->detail, sizeof stop);
      smr_act_set(r, r->rc, "%s; then %s", ckpt, stop); /* cut at 511 */
    }
    free(cmd);
  }
  if (pidfd >= 0)
    close(pidfd);
  free(t.key);
}

/* ---------------------------------------------------------- the kind */

static const smr_setting SETTINGS[] = {
    {.name = "pid",
     .type = SMR_SETTING_INT,
     .offset = offsetof(smr_stop_cfg, pid),
     .min = 2,
     .max = 2147483647,
     .description = "the training process id"},
    {.name = "pid_file",
     .type = SMR_SETTING_PATH,
     .offset = offsetof(smr_stop_cfg, pid_file),
     .description = "a file holding the training process id"},
    {.name = "cmdline",
     .type = SMR_SETTING_STRLIST,
     .offset = offsetof(smr_stop_cfg, cmdline),
     .description = "the training command line (a list: the exact argv)"},
    {.name = "signal",
     .type = SMR_SETTING_CUSTOM,
     .offset = offsetof(smr_stop_cfg, sig),
     .def = "TERM",
     .read = smr_act_read_signal,
     .schema = "{\"type\":[\"string\",\"integer\"]}",
     .description = "the first signal sent"},
    {.name = "grace_seconds",
     .type = SMR_SETTING_NUMBER,
     .offset = offsetof(smr_stop_cfg, grace),
     .max = 86400,
     .def = "30",
     .description = "seconds to wait for the process to exit"},
    {.name = "kill_after_grace",
     .type = SMR_SETTING_BOOL,
     .offset = offsetof(smr_stop_cfg, kill_after_grace),
     .def = "true",
     .description = "send SIGKILL when the grace period ends"},
    {.name = "allow_uid",
     .type = SMR_SETTING_INT,
     .offset = offsetof(smr_stop_cfg, allow_uid),
     .max = 4294967294.0,
     .description = "another user whose process may be stopped"},
    {.name = "allow_root",
     .type = SMR_SETTING_BOOL,
     .offset = offsetof(smr_stop_cfg, allow_root),
     .def = "false",
     .description = "a pid file or cmdline may name a root process"},
    {.name = "comm",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_stop_cfg, comm),
     .description = "with pid_file: the process's name (/proc/PID/comm)"},
    {.name = "exe",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_stop_cfg, exe),
     .description = "with pid_file: the process's executable (absolute)"},
    {.name = "checkpoint_signal",
     .type = SMR_SETTING_CUSTOM,
     .offset = offsetof(smr_stop_cfg, ckpt_sig),
     .read = smr_act_read_signal,
     .schema = "{\"type\":[\"string\",\"integer\"]}",
     .description = "the signal that asks the trainer for a checkpoint "
                    "before the stop (e.g. USR2)"},
    {.name = "checkpoint_request_file",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_stop_cfg, ckpt_request_file),
     .description = "a file written to ask for a checkpoint before the "
                    "stop (relative: in the trainer's working directory)"},
    {.name = "checkpoint_file",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_stop_cfg, ckpt_file),
     .description = "a glob pattern the checkpoint's file matches "
                    "(relative: to the trainer's working directory)"},
    {.name = "checkpoint_timeout_seconds",
     .type = SMR_SETTING_NUMBER,
     .offset = offsetof(smr_stop_cfg, ckpt_timeout),
     .min = 0.001,
     .max = SMR_ACT_MAX_TIMEOUT,
     .def = "60",
     .description = "seconds to wait for the checkpoint before stopping "
                    "anyway"},
    {.name = "training_job_prefix",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_stop_cfg, prefix),
     .description = "stop only a job whose name starts with this"},
    {.name = "job_name",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_stop_cfg, job_name),
     .description = "the local job name (default: the trial folder's)"},
    {.type = SMR_SETTING_END}};

static const char *const PREFIX_EXPECTED =
    "training_job_prefix: expected letters, digits and '-' (SageMaker's "
    "^[A-Za-z0-9\\-]+$)";

/* --training-pid (or the command smrules launched) wins over the
 * settings. */
static void cli_target(smr_act_parse *c, smr_stop_cfg *s) {
  s->how = SMR_STOP_PID;
  s->pid = c->o->training_pid;
  s->from_cli = true;
  s->launched = c->o->launched;
}

/* Which target the settings give: pid, pid_file or cmdline; cmdline,
 * comm and exe given with pid_file are checks on the process the file
 * names (check_named_process). */
static int configure_target(smr_act_parse *c, const smr_node *m,
                            smr_stop_cfg *s) {
  const smr_node *pid = smr_node_value(m, "pid");
  const smr_node *file = smr_node_value(m, "pid_file");
  const smr_node *cl = smr_node_value(m, "cmdline");
  if (pid && (file || cl))
    return smr_settings_error(&c->sc, file ? file : cl,
                              "StopTraining: give only one of pid, "
                              "pid_file and cmdline (cmdline, comm and exe "
                              "may go with pid_file, as checks)");
  static const char *const CHECKS[] = {"comm", "exe"};
  for (size_t k = 0; k < 2; k++) {
    const smr_node *v = smr_node_value(m, CHECKS[k]);
    if (v && !file)
      return smr_settings_error(&c->sc, v,
                                "StopTraining: %s checks the process a "
                                "pid_file names; give pid_file too",
                                CHECKS[k]);
  }
  if (s->exe && s->exe[0] != '/')
    return smr_settings_error(&c->sc, smr_node_value(m, "exe"),
                              "exe: expected an absolute path, as "
                              "/proc/PID/exe shows it");
  s->how = s->pid         ? SMR_STOP_PID
           : s->pid_file  ? SMR_STOP_PID_FILE
           : s->cmdline.n ? SMR_STOP_CMDLINE
                          : SMR_STOP_NONE;
  if (cl && cl->type == SMR_NODE_STRING) {
    s->cmdline_text = smr_xstrdup(cl->s);
    smr_strv_free(&s->cmdline);
    if (s->how == SMR_STOP_NONE)
      s->how = SMR_STOP_CMDLINE;
  }
  return SMR_OK;
}

/* The checkpoint step needs a way to ask and a file to wait for. */
static int configure_checkpoint(smr_act_parse *c, const smr_node *m,
                                smr_stop_cfg *s) {
  const smr_node *file = smr_node_value(m, "checkpoint_file");
  const smr_node *ask = smr_node_value(m, "checkpoint_signal");
  if (!ask)
    ask = smr_node_value(m, "checkpoint_request_file");
  if (!ask)
    ask = smr_node_value(m, "checkpoint_timeout_seconds");
  if (file && !s->ckpt_sig && !s->ckpt_request_file)
    return smr_settings_error(&c->sc, file,
                              "StopTraining: checkpoint_file needs "
                              "checkpoint_signal or checkpoint_request_file "
                              "(how the trainer is asked to save)");
  if (ask && !file)
    return smr_settings_error(&c->sc, ask,
                              "StopTraining: give checkpoint_file too (a "
                              "glob pattern of the file the trainer writes: "
                              "smrules waits for it before the stop)");
  if (file &&
      (!s->ckpt_file[0] || (s->ckpt_request_file && !s->ckpt_request_file[0])))
    return smr_settings_error(&c->sc, file,
                              "StopTraining: checkpoint paths may not be "
                              "empty");
  return SMR_OK;
}

static int configure(smr_act_parse *c, const smr_node *m, void *settings) {
  smr_stop_cfg *s = settings;
  if (!smr_node_value(m, "allow_uid"))
    s->allow_uid = -1;
  int rc = m ? configure_target(c, m, s) : SMR_OK;
  if (!rc && m)
    rc = configure_checkpoint(c, m, s);
  if (!rc && s->prefix && !smr_act_valid_prefix(s->prefix))
    return smr_settings_error(&c->sc, smr_node_value(m, "training_job_prefix"),
                              "%s", PREFIX_EXPECTED);
  /* the job name prefixes are matched against, also the event's "job":
   * job_name as given (made printable), else the trial folder's name */
  if (s->job_name) {
    free(c->p->job_name);
    c->p->job_name = smr_act_oneline(s->job_name, 256);
  }
  free(s->job_name);
  s->job_name = smr_xstrdup(c->p->job_name);
  if (!rc && c->o->training_pid > 0)
    cli_target(c, s);
  return rc;
}

static void free_settings(void *settings) {
  free(((smr_stop_cfg *)settings)->cmdline_text);
}

static smr_stop_cfg *stop_cfg(smr_act_parse *c) {
  return smr_act_plan_settings(c->p, &smr_action_stop);
}

static char *target_text(const smr_stop_cfg *s) {
  switch (s->how) {
  case SMR_STOP_PID:
    return smr_xasprintf("%s %lld",
                         s->launched   ? "launched command, pid"
                         : s->from_cli ? "--training-pid"
                                       : "pid",
                         (long long)s->pid);
  case SMR_STOP_PID_FILE:
    return smr_xasprintf("pid file %s", s->pid_file);
  case SMR_STOP_CMDLINE: {
    if (s->cmdline_text)
      return smr_xasprintf("cmdline '%s'", s->cmdline_text);
    smr_buf b = {0};
    smr_buf_puts(&b, "cmdline [");
    for (size_t i = 0; i < s->cmdline.n; i++)
      smr_buf_printf(&b, "%s'%s'", i ? ", " : "", s->cmdline.v[i]);
    smr_buf_puts(&b, "]");
    return b.data;
  }
  default:
    return smr_xstrdup("(no target)");
  }
}

/* The item's data: its training_job_prefix (or NULL). */
static void stop_item(smr_act_item *it, const smr_stop_cfg *s,
                      const char *prefix) {
  prefix = prefix ? prefix : s->prefix;
  it->data = prefix ? smr_xstrdup(prefix) : NULL;
  it->key = smr_xstrdup("StopTraining");
  it->target = target_text(s);
}

static int parse(smr_act_parse *c, const smr_act_src *src, smr_act_item *it) {
  smr_stop_cfg *s = stop_cfg(c);
  const smr_node *v = src->value, *pre = NULL;
  if (v && v->type == SMR_NODE_STRING)
    pre = v;
  else if (v)
    pre = smr_node_value(v, "training_job_prefix");
  if (pre && (pre->type != SMR_NODE_STRING || !smr_act_valid_prefix(pre->s)))
    return smr_settings_error(&c->sc, pre, "%s", PREFIX_EXPECTED);
  stop_item(it, s, pre ? pre->s : NULL);
  if (s->how != SMR_STOP_NONE || c->o->launched)
    return SMR_OK; /* launched: the command after '--' is the target */
  if (c->o->validate_only) {
    smr_settings_warn(&c->sc, src->at,
                      "StopTraining has no target here: give --training-pid "
                      "to smrules run, or pid, pid_file or cmdline under "
                      "actions.StopTraining");
    return SMR_OK;
  }
  return smr_settings_error(&c->sc, src->at,
                            "StopTraining needs a target: --training-pid N, "
                            "or pid, pid_file or cmdline under "
                            "actions.StopTraining");
}

static bool truthy(const smr_node *v) {
  return v && ((v->type == SMR_NODE_BOOL && v->b) ||
               (v->s && strcasecmp(v->s, "true") == 0));
}

/* StalledTrainingRule's stop_training_on_fire is a StopTraining with its
 * training_job_name_prefix (docs/actions.md#differences-from-sagemaker). */
static int implied(smr_act_parse *c, const smr_rule_config *rc,
                   smr_act_rule_plan *rp) {
  const smr_node *at = smr_node_value(rc->parameters, "stop_training_on_fire");
  if (!rc->rule || strcmp(rc->rule, "StalledTrainingRule") != 0 || !truthy(at))
    return SMR_OK;
  for (size_t k = 0; k < rp->n; k++)
    if (rp->v[k].kind == &smr_action_stop)
      return SMR_OK;
  const smr_node *pre =
      smr_node_value(rc->parameters, "training_job_name_prefix");
  if (pre && (!pre->s || !smr_act_valid_prefix(pre->s)))
    return smr_settings_error(&c->sc, pre,
                              "training_job_name_prefix: expected letters, "
                              "digits and '-'");
  smr_stop_cfg *s = stop_cfg(c);
  smr_act_item it = {.kind = &smr_action_stop,
                     .repeat = c->p->repeat_set
                                   ? c->p->repeat
                                   : smr_action_stop.default_repeat,
                     .retry = {2, 1},
                     .line = at->line,
                     .col = at->col};
  it.label = smr_xstrdup("StopTraining");
  stop_item(&it, s, pre ? pre->s : NULL);
  if (s->how == SMR_STOP_NONE)
    smr_settings_warn(&c->sc, at,
                      "stop_training_on_fire: no StopTraining target is "
                      "configured (--training-pid, or actions.StopTraining "
                      "pid, pid_file or cmdline); the action will be "
                      "refused");
  return smr_act_plan_add(c, rp, at, &it);
}

static void run(const smr_act_exec *x, const smr_act_item *it,
                const smr_act_event *e, smr_act_result *r) {
  (void)e;
  smr_stop_run(smr_act_plan_settings(x->plan, &smr_action_stop), it->data,
               x->dry_run, x->store, x->persist, r);
}

/* Remember the training process as it is now, so a pid reused later is
 * never signalled. */
static void start(const smr_act_exec *x, size_t n_items) {
  smr_stop_cfg *s = smr_act_plan_settings(x->plan, &smr_action_stop);
  if (n_items && s->how != SMR_STOP_NONE)
    smr_stop_prime(s, x->store, x->persist);
  else if (x->o->training_pid > 0 && !x->o->launched)
    fprintf(stderr, "smrules: warning: --training-pid given but no rule has "
                    "a StopTraining action\n");
}

static const char *const ITEM_KEYS[] = {"training_job_prefix", NULL};

const smr_action_kind smr_action_stop = {
    .name = "StopTraining",
    .settings_key = "StopTraining",
    .settings = SETTINGS,
    .settings_size = sizeof(smr_stop_cfg),
    .configure = configure,
    .free_settings = free_settings,
    .item_keys = ITEM_KEYS,
    .parse = parse,
    .free_item = free,
    .implied = implied,
    .default_repeat = {SMR_REPEAT_FIRST, 0},
    .run = run,
    .start = start,
};
