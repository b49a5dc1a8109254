/* action_procfs.c - what /proc says of a process, for StopTraining and
 * DumpStacks' proof of identity: its start time and the boot it belongs
 * to (smr_proc_identity), its thread group and user, its argv, comm and
 * exe.  Every read is small, bounded and never blocks (O_NONBLOCK). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "action/action_kind.h"

ssize_t smr_proc_read_small(const char *path, char *buf, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return -1;
  size_t used = 0;
  while (used + 1 < n) {
    ssize_t k = read(fd, buf + used, n - 1 - used);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    used += (size_t)k;
  }
  close(fd);
  buf[used] = '\0';
  return (ssize_t)used;
}

static void boot_id(char *out, size_t n) {
  char buf[64];
  if (smr_proc_read_small("/proc/sys/kernel/random/boot_id", buf, sizeof buf) <=
      0)
    buf[0] = '\0';
  size_t len = strcspn(buf, "\n");
  if (len >= n)
    len = n - 1;
  memcpy(out, buf, len);
  out[len] = '\0';
}

static double boot_time(void) {
  static char buf[16384];
  static double cached = -1;
  if (cached >= 0)
    return cached;
  if (smr_proc_read_small("/proc/stat", buf, sizeof buf) <= 0)
    return 0;
  const char *b = strstr(buf, "\nbtime ");
  cached = b ? strtod(b + 7, NULL) : 0;
  return cached;
}

int smr_proc_identity(int64_t pid, smr_proc_id *out) {
  char path[64], buf[2048];
  memset(out, 0, sizeof *out);
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  if (smr_proc_read_small(path, buf, sizeof buf) <= 0)
    return -1;
  /* comm may hold spaces and parentheses: fields start after the last ')' */
  const char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ')
    return -1;
  p += 2;
  out->state = *p;
  for (int field = 3; field < 22 && *p; field++) {
    p = strchr(p, ' ');
    if (!p)
      return -1;
    p++;
  }
  char *end;
  unsigned long long ticks = strtoull(p, &end, 10);
  if (end == p)
    return -1;
  out->pid = pid;
  out->start_ticks = ticks;
  boot_id(out->boot_id, sizeof out->boot_id);
  long hz = sysconf(_SC_CLK_TCK);
  out->start_wall = boot_time() + (double)ticks / (double)(hz > 0 ? hz : 100);
  return 0;
}

/* The thread group (process) and real user of the task at `pid`, from
 * /proc/<pid>/status; -1 when it cannot be read. */
int smr_proc_status(int64_t pid, int64_t *tgid, int64_t *uid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%lld/status", (long long)pid);
  if (smr_proc_read_small(path, buf, sizeof buf) <= 0)
    return -1;
  const char *t = strstr(buf, "\nTgid:");
  const char *u = strstr(buf, "\nUid:");
  if (!t || !u)
    return -1;
  *tgid = strtoll(t + 6, NULL, 10);
  *uid = strtoll(u + 5, NULL, 10);
  return 0;
}

/* argv of a process; empty for kernel threads and zombies. */
void smr_proc_cmdline(int64_t pid, smr_strv *out) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/cmdline", (long long)pid);
  static __thread char buf[65536];
  ssize_t n = smr_proc_read_small(path, buf, sizeof buf);
  for (ssize_t i = 0; i < n;) {
    smr_strv_push(out, buf + i);
    i += (ssize_t)strlen(buf + i) + 1;
  }
}

char *smr_proc_cmdline_text(int64_t pid) {
  smr_strv v = {0};
  smr_proc_cmdline(pid, &v);
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  for (size_t i = 0; i < v.n; i++)
    smr_buf_printf(&b, "%s%s", i ? " " : "", v.v[i]);
  smr_strv_free(&v);
  char *t = smr_act_oneline(b.data, 100);
  if (b.len > 100) {
    char *more = smr_xasprintf("%s...", t);
    free(t);
    t = more;
  }
  smr_buf_free(&b);
  return t;
}

bool smr_proc_same(const smr_proc_id *a, const smr_proc_id *b) {
  return a->pid == b->pid && a->start_ticks == b->start_ticks &&
         strcmp(a->boot_id, b->boot_id) == 0;
}

/* /proc/<pid>/comm without its newline; "" when unreadable. */
void smr_proc_comm(int64_t pid, char *out, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/comm", (long long)pid);
  if (smr_proc_read_small(path, out, n) <= 0)
    out[0] = '\0';
  out[strcspn(out, "\n")] = '\0';
}

/* /proc/<pid>/exe; "" when unreadable (another user's, a kernel thread). */
void smr_proc_exe(int64_t pid, char *out, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/exe", (long long)pid);
  ssize_t k = readlink(path, out, n - 1);
  out[k > 0 ? (size_t)k : 0] = '\0';
}
