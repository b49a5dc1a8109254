/* fake_nvml.c - a stand-in for NVIDIA's libnvidia-ml.so.1 used by the
 * monitor tests: the six NVML entry points smrules calls, with readings
 * fixed by the environment (FAKE_NVML_GPUS devices, FAKE_NVML_UTIL percent
 * utilization, FAKE_NVML_MEM_USED of FAKE_NVML_MEM_TOTAL bytes; each GPU i
 * reports utilization + i).  Built by tests/cli/test_monitor.py. */
#include <stdlib.h>

typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

static long env(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? atol(v) : dflt;
}

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned int *n) {
  *n = (unsigned int)env("FAKE_NVML_GPUS", 2);
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev) {
  *dev = (void *)(unsigned long)(i + 1); /* opaque, never dereferenced */
  return 0;
}

int nvmlDeviceGetUtilizationRates(void *dev, nvmlUtilization_t *u) {
  u->gpu = (unsigned int)(env("FAKE_NVML_UTIL", 5) + (long)dev - 1);
  u->memory = 1;
  return 0;
}

int nvmlDeviceGetMemoryInfo(void *dev, nvmlMemory_t *m) {
  m->total = (unsigned long long)env("FAKE_NVML_MEM_TOTAL", 16000);
  m->used = (unsigned long long)env("FAKE_NVML_MEM_USED", 4000);
  m->free = m->total - m->used;
  return 0;
}
