/* nvml.h - GPU readings through NVIDIA's management library, loaded at run
 * time (dlopen "libnvidia-ml.so.1"), so smrules has no build-time or
 * install-time dependency on the driver.  Only NVML's documented C entry
 * points are used: nvmlInit_v2, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUtilizationRates,
 * nvmlDeviceGetMemoryInfo and nvmlShutdown. */
#ifndef SMR_MON_NVML_H
#define SMR_MON_NVML_H

#include "monitor/sysfile.h"

typedef struct smr_nvml smr_nvml;

/* Load the library and find the GPUs.  NULL when there is no library, it
 * lacks an entry point, initialisation fails or there is no GPU; `why`
 * then says which (for the one notice the monitor prints). */
smr_nvml *smr_nvml_open(char *why, size_t why_len);
unsigned smr_nvml_count(const smr_nvml *g);
/* GPUUtilization (NVML utilization.gpu) and GPUMemoryUtilization
 * (used / total × 100) of every device, named gpu0, gpu1, ... */
void smr_nvml_sample(smr_nvml *g, smr_mon_round *r);
void smr_nvml_close(smr_nvml *g);

#endif
