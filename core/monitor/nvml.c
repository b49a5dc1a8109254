/* nvml.c - the few NVML calls the monitor needs, declared here with the
 * library's documented types (nvml.h of the CUDA toolkit): a device is an
 * opaque pointer, every call returns nvmlReturn_t (0 = NVML_SUCCESS). */
#include "monitor/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlUtilization_st {
  unsigned int gpu;    /* percent of time a kernel was running */
  unsigned int memory; /* percent of time memory was read or written */
} nvmlUtilization_t;
typedef struct nvmlMemory_st {
  unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

/* More devices than this are not sampled (bounds the handle table). */
#define MAX_GPUS 64

struct smr_nvml {
  void *lib;
  nvmlReturn_t (*shutdown)(void);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
  unsigned n;
  nvmlDevice_t dev[MAX_GPUS];
};

/* dlsym into a function pointer without a cast ISO C forbids. */
#define LOAD(lib, sym, dst)                                                    \
  (*(void **)(&(dst)) = dlsym((lib), (sym)), (dst) != NULL)

static smr_nvml *fail(smr_nvml *g, char *why, size_t n, const char *what) {
  snprintf(why, n, "%s", what);
  if (g) {
    if (g->shutdown && g->n != (unsigned)-1)
      g->shutdown();
    dlclose(g->lib);
    free(g);
  }
  return NULL;
}

smr_nvml *smr_nvml_open(char *why, size_t why_len) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return fail(NULL, why, why_len,
                "no NVIDIA management library (libnvidia-ml.so.1)");
  smr_nvml *g = smr_xcalloc(1, sizeof *g);
  g->lib = lib;
  g->n = (unsigned)-1; /* not initialised yet: no shutdown on failure */
  nvmlReturn_t (*init)(void);
  nvmlReturn_t (*count)(unsigned int *);
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
  if (!LOAD(lib, "nvmlInit_v2", init) ||
      !LOAD(lib, "nvmlDeviceGetCount_v2", count) ||
      !LOAD(lib, "nvmlDeviceGetHandleByIndex_v2", handle) ||
      !LOAD(lib, "nvmlDeviceGetUtilizationRates", g->utilization) ||
      !LOAD(lib, "nvmlDeviceGetMemoryInfo", g->memory) ||
      !LOAD(lib, "nvmlShutdown", g->shutdown))
    return fail(g, why, why_len, "libnvidia-ml.so.1 lacks an NVML entry point");
  if (init() != 0)
    return fail(g, why, why_len, "NVML did not initialise (no driver?)");
  g->n = 0;
  unsigned int n = 0;
  if (count(&n) != 0 || n == 0)
    return fail(g, why, why_len, "NVML reports no GPU");
  if (n > MAX_GPUS)
    n = MAX_GPUS;
  for (unsigned int i = 0; i < n; i++)
    if (handle(i, &g->dev[i]) != 0)
      g->dev[i] = NULL;
  g->n = n;
  return g;
}

unsigned smr_nvml_count(const smr_nvml *g) {
  return g ? g->n : 0;
}

void smr_nvml_sample(smr_nvml *g, smr_mon_round *r) {
  for (unsigned i = 0; g && i < g->n; i++) {
    nvmlUtilization_t u;
    nvmlMemory_t m;
    if (!g->dev[i])
      continue;
    char name[16];
    snprintf(name, sizeof name, "gpu%u", i);
    if (g->utilization(g->dev[i], &u) == 0)
      smr_mon_emit(r, "gpu", name, "GPUUtilization", (double)u.gpu);
    if (g->memory(g->dev[i], &m) == 0 && m.total > 0)
      smr_mon_emit(r, "gpu", name, "GPUMemoryUtilization",
                   100.0 * (double)m.used / (double)m.total);
  }
}

void smr_nvml_close(smr_nvml *g) {
  if (!g)
    return;
  g->shutdown();
  dlclose(g->lib);
  free(g);
}
