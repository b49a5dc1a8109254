/* launch.c - the training command started by `smrules run -- COMMAND`,
 * and the signals smrules receives while it follows a run. */
#include "run/launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Signals (below): the first caught, the process group they are passed
 * on to, and the pipe that wakes the watch loop. */
static volatile sig_atomic_t caught;
static volatile pid_t forward_pgid;
static int wake[2] = {-1, -1};

struct smr_launch {
  pid_t pid;
  int pidfd;    /* -1 where pidfd_open is not available */
  int alive_fd; /* without a pidfd: the read end of a pipe whose write
                   end only the child holds (EOF when it exits) */
  bool reaped;
  int status;    /* raw wait status */
  bool took_tty; /* the terminal's foreground group was given to it */
  char outcome[64];
};

static int pidfd_open_compat(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

/* In the child: its own process group, default signal handling, exec.
 * An exec failure is reported to the parent through `report` (errno). */
static void child_exec(char *const argv[], bool stdout_to_stderr, int report) {
  setpgid(0, 0);
  if (stdout_to_stderr)
    dup2(STDERR_FILENO, STDOUT_FILENO);
  struct sigaction sa = {.sa_handler = SIG_DFL};
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGTTOU, SIGTTIN};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execvp(argv[0], argv);
  int e = errno;
  ssize_t w = write(report, &e, sizeof e);
  (void)w;
  _exit(127);
}

/* On a terminal where smrules is in the foreground, the child's group
 * becomes the foreground group: it reads the terminal and gets Ctrl-C
 * itself (smrules sees it exit and makes its final pass). */
static bool give_terminal(pid_t pgid) {
  if (!isatty(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) != getpgrp())
    return false;
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &old);
  bool ok = tcsetpgrp(STDIN_FILENO, pgid) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return ok;
}

static void take_terminal_back(void) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &old);
  tcsetpgrp(STDIN_FILENO, getpgrp());
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int smr_launch_start(char *const argv[], bool stdout_to_stderr,
                     smr_launch **out, smr_error *err) {
  *out = NULL;
  int report[2], alive[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    return smr_error_set(err, SMR_ERR_IO, "", 0, "cannot run '%s': pipe: %s",
                         argv[0], strerror(errno));
  if (pipe2(alive, O_CLOEXEC) != 0) {
    close(report[0]);
    close(report[1]);
    return smr_error_set(err, SMR_ERR_IO, "", 0, "cannot run '%s': pipe: %s",
                         argv[0], strerror(errno));
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    close(alive[0]);
    /* the write end of `alive` stays open across exec in the child */
    int keep = fcntl(alive[1], F_GETFD);
    fcntl(alive[1], F_SETFD, keep & ~FD_CLOEXEC);
    child_exec(argv, stdout_to_stderr, report[1]);
  }
  close(report[1]);
  close(alive[1]);
  if (pid < 0) {
    close(report[0]);
    close(alive[0]);
    return smr_error_set(err, SMR_ERR_IO, "", 0, "cannot run '%s': fork: %s",
                         argv[0], strerror(errno));
  }
  setpgid(pid, pid); /* also in the child: whichever runs first */
  int e = 0;
  ssize_t n;
  do
    n = read(report[0], &e, sizeof e);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == (ssize_t)sizeof e) { /* exec failed: the child is exiting */
    waitpid(pid, NULL, 0);
    close(alive[0]);
    return smr_error_set(err, SMR_ERR_IO, "", 0, "cannot run '%s': %s", argv[0],
                         strerror(e));
  }
  smr_launch *l = smr_xcalloc(1, sizeof *l);
  l->pid = pid;
  l->pidfd = pidfd_open_compat(pid); /* unreaped: the pid is still ours */
  l->alive_fd = alive[0];
  l->took_tty = give_terminal(pid);
  *out = l;
  return SMR_OK;
}

int64_t smr_launch_pid(const smr_launch *l) {
  return l->pid;
}

int smr_launch_fd(const smr_launch *l) {
  return l->pidfd >= 0 ? l->pidfd : l->alive_fd;
}

int smr_launch_wait(smr_launch *l) {
  if (!l->reaped) {
    while (waitpid(l->pid, &l->status, 0) < 0 && errno == EINTR)
      ;
    l->reaped = true;
    if (forward_pgid == l->pid) /* its group id may be reused from now */
      forward_pgid = 0;
    if (l->took_tty)
      take_terminal_back();
    if (WIFSIGNALED(l->status))
      snprintf(l->outcome, sizeof l->outcome, "killed by %s",
               smr_signal_text(WTERMSIG(l->status)));
    else
      snprintf(l->outcome, sizeof l->outcome, "exited with status %d",
               WEXITSTATUS(l->status));
  }
  return WIFSIGNALED(l->status) ? 128 + WTERMSIG(l->status)
                                : WEXITSTATUS(l->status);
}

const char *smr_launch_outcome(const smr_launch *l) {
  return l->outcome;
}

int smr_launch_signal(const smr_launch *l) {
  return l->reaped && WIFSIGNALED(l->status) ? WTERMSIG(l->status) : 0;
}

int smr_launch_exit_code(const smr_launch *l) {
  return l->reaped && WIFEXITED(l->status) ? WEXITSTATUS(l->status) : -1;
}

void smr_launch_free(smr_launch *l) {
  if (!l)
    return;
  if (l->pidfd >= 0)
    close(l->pidfd);
  close(l->alive_fd);
  free(l);
}

/* -------------------------------------------------- process groups */

/* The state and process group of /proc/<pid>/stat: the fields after the
 * command name, which is in parentheses and may hold anything. */
static bool stat_group(int dirfd, const char *pid, char *state, long *pgrp) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "%s/stat", pid);
  int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  const char *end = strrchr(buf, ')');
  long ppid;
  return end && sscanf(end + 1, " %c %ld %ld", state, &ppid, pgrp) == 3;
}

/* Processes of group `pgid` from /proc; zombies only when asked. */
static size_t group_count(int64_t pgid, bool zombies) {
  if (pgid <= 1)
    return 0;
  DIR *d = opendir("/proc");
  if (!d)
    return kill(-(pid_t)pgid, 0) == 0; /* zombies count: the best there is */
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9')
      continue;
    char state;
    long pgrp;
    if (stat_group(dirfd(d), de->d_name, &state, &pgrp) && pgrp == pgid &&
        state != 'X' && (zombies || state != 'Z'))
      n++;
  }
  closedir(d);
  return n;
}

size_t smr_proc_group_alive(int64_t pgid) {
  return group_count(pgid, false);
}

size_t smr_proc_group_members(int64_t pgid) {
  return group_count(pgid, true);
}

/* ---------------------------------------------------------- signals */

/* What the first signal does, said at once (write(2) is async-signal
 * safe; the run may take a while to finish the step in hand, and whoever
 * pressed Ctrl-C must know that a second one stops it at once). */
static void say_stopping(int sig) {
  static const char head[] = "smrules: ";
  static const char tail[] = " received: finishing the step in hand, then "
                             "the reports and state (send it again to "
                             "stop at once)\n";
  const char *name = sig == SIGINT    ? "SIGINT"
                     : sig == SIGTERM ? "SIGTERM"
                                      : "SIGHUP";
  ssize_t w = write(STDERR_FILENO, head, sizeof head - 1);
  w = write(STDERR_FILENO, name, strlen(name));
  w = write(STDERR_FILENO, tail, sizeof tail - 1);
  (void)w;
}

static void on_signal(int sig) {
  int saved = errno;
  /* a second signal while nothing is passed on: stop at once, as the
   * default action would (the first one finishes the step in hand) */
  if (caught && forward_pgid <= 0) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
  if (!caught) {
    caught = sig;
    if (forward_pgid <= 0)
      say_stopping(sig);
  }
  if (forward_pgid > 0)
    kill(-forward_pgid, sig);
  char c = (char)sig;
  ssize_t w = write(wake[1], &c, 1);
  (void)w;
  errno = saved;
}

void smr_interrupt_install(const smr_launch *forward) {
  if (wake[0] < 0 && pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
    wake[0] = wake[1] = -1;
  forward_pgid = forward ? forward->pid : 0;
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

int smr_interrupt_fd(void) {
  return wake[0];
}

int smr_interrupt_signal(void) {
  return caught;
}

const char *smr_signal_text(int sig) {
  static char buf[24];
  const char *name = sigabbrev_np(sig);
  if (name)
    snprintf(buf, sizeof buf, "SIG%s", name);
  else
    snprintf(buf, sizeof buf, "signal %d", sig);
  return buf;
}
