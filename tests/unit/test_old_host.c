/* test_old_host.c - a plugin loaded by an older host, whose function table
 * is shorter than the one the plugin was built with, reads only what that
 * table has.  ProfilerReport once built a table for its sub-rules by
 * copying the plugin's sizeof(smrules_api) bytes from the host's, past the
 * end of an older host's table; it now hands them the host's own table
 * and tests SMRULES_API_HAS(api, sub_rule) before it runs them.  The old
 * table here is a 1.0 host's: it ends before sub_rule, the first member
 * appended after the 1.0 layout, and it ends exactly where an inaccessible
 * page begins: a read past it faults in every build (not only under ASan),
 * and the fault is caught and reported as a failed check. */
#include <dlfcn.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "host/rulectx.h"
#include "smrules/smrules.h"
#include "unit.h"

/* build/plugins/<name>, next to this binary's build/tests/ */
static char *plugin_path(const char *name) {
  static char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0)
    return NULL;
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (!slash)
    return NULL;
  snprintf(slash, sizeof path - (size_t)(slash - path), "/../plugins/%s", name);
  return path;
}

/* `size` bytes that end where a PROT_NONE page begins (NULL on failure). */
static unsigned char *before_a_guard_page(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t span = (size + page - 1) / page * page;
  unsigned char *base = mmap(NULL, span + page, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return NULL;
  if (mprotect(base + span, page, PROT_NONE) != 0)
    return NULL;
  return base + span - size;
}

static sigjmp_buf fault_jump;

static void on_fault(int sig) {
  siglongjmp(fault_jump, sig);
}

static void test_profiler_report_on_an_old_host(void) {
  const char *path = plugin_path("profiler_report.so");
  void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  CHECK(h != NULL);
  if (!h)
    return;
  smrules_plugin_init_fn init;
  void *sym = dlsym(h, "smrules_plugin_init");
  CHECK(sym != NULL);
  if (!sym)
    return;
  memcpy(&init, &sym, sizeof init); /* POSIX: a function pointer */
  size_t old = offsetof(smrules_api, sub_rule);
  unsigned char *table = before_a_guard_page(old); /* the old table's bytes */
  CHECK(table != NULL);
  if (!table)
    return;
  memcpy(table, smr_host_api(), old);
  uint32_t size = (uint32_t)old;
  memcpy(table + offsetof(smrules_api, struct_size), &size, sizeof size);
  struct sigaction sa, was_segv, was_bus;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fault;
  sigaction(SIGSEGV, &sa, &was_segv);
  sigaction(SIGBUS, &sa, &was_bus);
  const smrules_rule *volatile r = NULL; /* kept across siglongjmp */
  int fault = sigsetjmp(fault_jump, 1);
  if (fault == 0)
    r = init((const smrules_api *)(void *)table);
  sigaction(SIGSEGV, &was_segv, NULL);
  sigaction(SIGBUS, &was_bus, NULL);
  int read_past_the_old_table = fault != 0;
  CHECK(!read_past_the_old_table);
  CHECK(r != NULL);
  CHECK_STR(r ? r->name : NULL, "ProfilerReport");
  /* the plugin keeps using the table: it stays mapped until the end */
}

int main(void) {
  TEST_RUN(test_profiler_report_on_an_old_host);
  return TEST_REPORT("test_old_host");
}
