/* launch.h - `smrules run ... -- COMMAND`: start the training command as
 * a child in its own process group, with stdin/stdout/stderr inherited,
 * and hold a pidfd on it from the start.  The child is not reaped until
 * smr_launch_wait, so its pid cannot be reused while StopTraining may
 * still signal it.
 *
 * Also the signals smrules itself receives while it follows a run:
 * SIGINT, SIGTERM and SIGHUP are recorded (and forwarded to the launched
 * command's process group) and announced on a descriptor the watch loop
 * polls, so an interrupted run can finish the step in hand, write its
 * reports and state and exit 128+N. */
#ifndef SMR_LAUNCH_H
#define SMR_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

typedef struct smr_launch smr_launch;

/* fork + exec argv[0] (searched in PATH).  A command that cannot be
 * executed is an error here (err says why; nothing keeps running).
 * With stdout_to_stderr the command's stdout goes to smrules' stderr
 * (run --json: stdout holds one JSON document). */
int smr_launch_start(char *const argv[], bool stdout_to_stderr,
                     smr_launch **out, smr_error *err);
int64_t smr_launch_pid(const smr_launch *l);
/* Readable once the child has exited (poll it; it is not reaped). */
int smr_launch_fd(const smr_launch *l);
/* Reap the child (waits for it) and return its status as a shell
 * reports it: the exit code, or 128+N when killed by signal N. */
int smr_launch_wait(smr_launch *l);
/* "exited with status 0", "killed by SIGTERM" (after smr_launch_wait). */
const char *smr_launch_outcome(const smr_launch *l);
/* The signal that killed it (0 when it exited). */
int smr_launch_signal(const smr_launch *l);
int smr_launch_exit_code(const smr_launch *l); /* -1 when killed */
void smr_launch_free(smr_launch *l);

/* How many processes of process group `pgid` are alive (zombies, which
 * have exited, do not count), from /proc.  The launched command runs in
 * a group of its own (its pid is the group's id): a wrapper that does
 * not exec, or a command that starts the trainer in the background and
 * exits, leaves the trainer in that group.  A process that leaves the
 * group (setsid, setpgid) is no longer counted. */
size_t smr_proc_group_alive(int64_t pgid);
/* The same, zombies included: the processes a signal just sent to the
 * group reached, those that already exited but are not reaped yet too
 * (StopTraining counts them after its signal, so that the /proc walk,
 * ~1-2 ms, does not come before the signal). */
size_t smr_proc_group_members(int64_t pgid);

/* Catch SIGINT, SIGTERM and SIGHUP from now on; when `forward` is not
 * NULL they are passed on to its process group. */
void smr_interrupt_install(const smr_launch *forward);
/* Readable after a caught signal (-1 before install). */
int smr_interrupt_fd(void);
/* The first signal caught (0: none). */
int smr_interrupt_signal(void);

/* "SIGTERM", or "signal 42" (static buffer for unnamed ones). */
const char *smr_signal_text(int sig);

#endif
