/* memory.c - MemoryUsedPercent from /proc/meminfo, as SageMaker computes
 * it: (MemTotal - MemAvailable) / MemTotal.  Kernels before 3.14 have no
 * MemAvailable; there MemFree + Buffers + Cached stands in for it. */
#include <stdlib.h>
#include <string.h>

#include "monitor/samplers.h"

/* The kB value of "Key:   123 kB", or -1 when absent. */
static long long field_kb(const char *text, const char *key) {
  size_t k = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
    if (strncmp(p, key, k) == 0 && p[k] == ':')
      return strtoll(p + k + 1, NULL, 10);
  return -1;
}

void smr_memory_sample(smr_procfile *meminfo, smr_mon_round *r) {
  const char *text = smr_procfile_read(meminfo);
  if (!text)
    return;
  long long total = field_kb(text, "MemTotal");
  long long avail = field_kb(text, "MemAvailable");
  if (avail < 0) {
    long long fr = field_kb(text, "MemFree"), bu = field_kb(text, "Buffers"),
              ca = field_kb(text, "Cached");
    avail = fr < 0 ? -1 : fr + (bu > 0 ? bu : 0) + (ca > 0 ? ca : 0);
  }
  if (total <= 0 || avail < 0 || avail > total)
    return;
  smr_mon_emit(r, "memory", "MemoryUsedPercent", "",
               100.0 * (double)(total - avail) / (double)total);
}
