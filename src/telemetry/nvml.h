// NVML, loaded with dlopen at run time: evenkeel never needs the NVIDIA
// driver to build, and says "unavailable" (with dlerror's reason) where there
// is none.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/sample.h"

namespace ek::telemetry {

// One device's reading; a field NVML does not support on the device is absent.
struct NvmlReading {
  std::optional<double> power_w;        // nvmlDeviceGetPowerUsage (instant)
  std::optional<double> energy_j;       // nvmlDeviceGetTotalEnergyConsumption (since driver load)
  std::optional<double> util_pct;       // nvmlDeviceGetUtilizationRates().gpu
  std::optional<double> mem_used_mib;   // nvmlDeviceGetMemoryInfo().used
  std::optional<double> mem_total_mib;  // nvmlDeviceGetMemoryInfo().total
  std::optional<double> sm_clock_mhz;   // nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
  std::optional<uint64_t> throttle_reasons;  // nvmlDeviceGetCurrentClocksThrottleReasons
  std::optional<int> processes;              // nvmlDeviceGetComputeRunningProcesses_v3
};

// The NVML seam: the dlopen'ed library in production, a fake in tests.
class NvmlApi {
 public:
  virtual ~NvmlApi() = default;
  virtual Result<int> DeviceCount() = 0;
  virtual Result<NvmlReading> Read(int index) = 0;
};

// dlopens `library` (default libnvidia-ml.so.1) and calls nvmlInit_v2.
// Unavailable, with the reason, when the library or a symbol is missing or
// NVML will not initialise. nvmlShutdown and dlclose run on destruction.
Result<std::unique_ptr<NvmlApi>> LoadNvml(const std::string& library = "");

// Reads every device once per Poll. Power is the exact average over the last
// interval from the energy counter when the device has one (two readings
// apart), else NVML's power reading.
class NvmlSource : public Source {
 public:
  NvmlSource(std::unique_ptr<NvmlApi> api, Clock* clock, std::string host);
  Status Poll(double deadline, Batch* out) override;
  std::vector<std::string> hosts() const override { return {host_}; }
  bool live() const override { return true; }

 private:
  std::unique_ptr<NvmlApi> api_;
  Clock* clock_;
  std::string host_;
  struct Last {
    double time = 0;
    std::optional<double> energy_j;
  };
  std::vector<Last> last_;
};

}  // namespace ek::telemetry
