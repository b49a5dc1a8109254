/* test_old_host.c - a plugin loaded by an older host, whose function table
 * is shorter than the one the plugin was built with, reads only what that
 * table has.  ProfilerReport builds a table for its sub-rules from the
 * host's (plugins/profiler/profiler_report/rpt_shim.c); it copied the
 * plugin's sizeof(smrules_api) bytes, past the end of an older host's
 * table (the ASan build reports the over-read).  The old table here ends
 * before value_stats, the first member appended after version 1. */
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
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
  size_t old = offsetof(smrules_api, value_stats);
  unsigned char *table = malloc(old); /* exactly the old table's bytes */
  memcpy(table, smr_host_api(), old);
  uint32_t size = (uint32_t)old;
  memcpy(table + offsetof(smrules_api, struct_size), &size, sizeof size);
  const smrules_rule *r = init((const smrules_api *)(void *)table);
  CHECK(r != NULL);
  CHECK_STR(r ? r->name : NULL, "ProfilerReport");
  /* the plugin keeps using the table: it stays valid until the end */
}

int main(void) {
  TEST_RUN(test_profiler_report_on_an_old_host);
  return TEST_REPORT("test_old_host");
}
