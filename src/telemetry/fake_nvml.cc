// A stand-in for libnvidia-ml.so.1 with the entry points NvmlSource uses, so
// the dlopen/dlsym path and the struct layouts are exercised without a GPU.
// Device 0 is busy (700 W, energy counter +700 J per read); device 1 supports
// neither power nor energy.
#include <cstring>

extern "C" {

struct nvmlDevice_st {
  int index;
};
static nvmlDevice_st g_devices[2] = {{0}, {1}};
static unsigned long long g_energy_mj = 1000000;

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) { return rc == 3 ? "Not Supported" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_st** dev) {
  if (i >= 2) return 2;
  *dev = &g_devices[i];
  return 0;
}
int nvmlDeviceGetPowerUsage(nvmlDevice_st* dev, unsigned int* mw) {
  if (dev->index != 0) return 3;
  *mw = 690000;
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_st* dev, unsigned long long* mj) {
  if (dev->index != 0) return 3;
  g_energy_mj += 700000;
  *mj = g_energy_mj;
  return 0;
}
struct Util {
  unsigned int gpu, memory;
};
int nvmlDeviceGetUtilizationRates(nvmlDevice_st* dev, Util* u) {
  u->gpu = dev->index == 0 ? 100 : 0;
  u->memory = 0;
  return 0;
}
struct Memory {
  unsigned long long total, free, used;
};
int nvmlDeviceGetMemoryInfo(nvmlDevice_st*, Memory* m) {
  m->total = 80ull << 30;
  m->used = 60ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetClockInfo(nvmlDevice_st*, int type, unsigned int* mhz) {
  if (type != 1) return 2;
  *mhz = 1980;
  return 0;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_st*, unsigned long long* r) {
  *r = 0x4;  // SW power cap
  return 0;
}
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used;
  unsigned int gi, ci;
};
int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_st* dev, unsigned int* count,
                                            ProcessInfo* infos) {
  unsigned int have = dev->index == 0 ? 1 : 0;
  if (*count < have || (infos == nullptr && have > 0)) {
    *count = have;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  if (have) std::memset(infos, 0, sizeof(ProcessInfo) * have);
  *count = have;
  return 0;
}

}  // extern "C"
