/* job_profile.c - the monitor beside `run --watch --profile DIR`. */
#include "job/job_profile.h"

#include "base/safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/common.h"

int smr_profile_prepare(const char *dir) {
  char *sys = smr_xasprintf("%s/system", dir);
  int rc = smr_mkdirs(sys, 0755) ? 0 : -1;
  if (rc != 0)
    fprintf(stderr, "smrules: --profile: cannot create %s: %s\n", sys,
            strerror(errno));
  free(sys);
  return rc;
}

void smr_profile_add_report(smr_config *cfg) {
  for (size_t i = 0; i < cfg->n_rules; i++)
    if (cfg->rules[i].rule && !strcmp(cfg->rules[i].rule, "ProfilerReport"))
      return;
  cfg->rules =
      smr_xrealloc(cfg->rules, (cfg->n_rules + 1) * sizeof *cfg->rules);
  smr_rule_config *rc = &cfg->rules[cfg->n_rules++];
  memset(rc, 0, sizeof *rc);
  rc->name = smr_xstrdup("ProfilerReport");
  rc->rule = smr_xstrdup("ProfilerReport");
  rc->start_step = rc->end_step = -1;
}

int smr_profile_start(smr_profile_session *s, const char *dir,
                      int interval_ms) {
  s->dir = dir;
  s->pid = 0;
  char interval[16];
  snprintf(interval, sizeof interval, "%d", interval_ms);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "smrules: --profile: cannot start the monitor: %s\n",
            strerror(errno));
    return -1;
  }
  if (pid == 0) {
    /* the recording must not outlive the watch, however it ends */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
      _exit(0);
    char *argv[] = {"smrules",       "monitor", "--out", (char *)dir,
                    "--interval-ms", interval,  NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  s->pid = pid;
  return 0;
}

void smr_profile_stop(smr_profile_session *s, bool ended) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    int status;
    while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
      ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fprintf(stderr, "smrules: --profile: the monitor ended with status %d\n",
              WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    s->pid = 0;
  }
  if (!ended)
    return;
  /* the training job writes in the profiler folder too: no link is
   * followed and nothing but a regular file is made or kept there */
  char *system = smr_xasprintf("%s/system", s->dir);
  char *marker = smr_xasprintf("%s/training_job_end.ts", system);
  smr_error err;
  smr_error_clear(&err);
  int dfd = -1, fd = -1;
  if (smr_safe_dir_open(system, s->dir, true, &dfd, &err) == SMR_OK) {
    smr_safe_open_append(dfd, "training_job_end.ts", marker, &fd, &err);
    close(dfd);
  }
  if (fd < 0)
    fprintf(stderr, "smrules: --profile: cannot write %s: %s\n", err.file,
            err.msg);
  else
    close(fd);
  free(marker);
  free(system);
}
