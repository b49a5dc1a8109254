/* action_proc.c - what the kinds that signal the training process share
 * (StopTraining, DumpStacks): the `signal` setting's reader, a pidfd and
 * the signal sent through it, and the check that a remembered process is
 * still the one at its pid.  A signal goes only through a pidfd: it names
 * one process for as long as it is held, so a pid reused in the meantime
 * is never signalled.  There is no kill() fallback. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"

int smr_act_read_signal(const smr_settings_ctx *c, const smr_setting *s,
                        const smr_node *v, void *field) {
  int sig = v->s ? smr_act_signal_number(v->s) : -1;
  if (sig < 0)
    return smr_settings_error(c, v,
                              "%s: expected a signal name (TERM, INT, HUP, "
                              "QUIT, USR1, USR2, KILL, ...) or a number from "
                              "1 to 64",
                              s->name);
  *(int *)field = sig;
  return SMR_OK;
}

int smr_act_pidfd_open(int64_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

int smr_act_pidfd_signal(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
  return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#else
  (void)pidfd, (void)sig;
  errno = ENOSYS;
  return -1;
#endif
}

bool smr_act_pidfd_exited(int pidfd) {
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

int smr_act_pidfd_of(const smr_proc_id *id) {
  int pidfd = smr_act_pidfd_open(id->pid);
  smr_proc_id now;
  if (pidfd >= 0 && smr_proc_identity(id->pid, &now) == 0 &&
      now.start_ticks == id->start_ticks &&
      strcmp(now.boot_id, id->boot_id) == 0 && now.state != 'Z')
    return pidfd;
  if (pidfd >= 0)
    close(pidfd);
  return -1;
}

double smr_act_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
