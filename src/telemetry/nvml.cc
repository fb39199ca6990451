#include "telemetry/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace ek::telemetry {

namespace {

// The few NVML declarations used, from nvml.h (NVML API v12; the _v2/_v3
// entry points exist since driver 450/510). Declared here so that the build
// never needs the header or the library.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr int NVML_CLOCK_SM = 1;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t, what the _v3 query fills
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

class DlNvml : public NvmlApi {
 public:
  ~DlNvml() override {
    if (initialized_) shutdown_();
    if (handle_) ::dlclose(handle_);
  }

  Status Load(const std::string& library) {
    handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) return UnavailableError(fmt::format("NVML unavailable: {}", ::dlerror()));
    EK_RETURN_IF_ERROR(Sym("nvmlInit_v2", &init_));
    EK_RETURN_IF_ERROR(Sym("nvmlShutdown", &shutdown_));
    EK_RETURN_IF_ERROR(Sym("nvmlErrorString", &error_string_));
    EK_RETURN_IF_ERROR(Sym("nvmlDeviceGetCount_v2", &count_));
    EK_RETURN_IF_ERROR(Sym("nvmlDeviceGetHandleByIndex_v2", &handle_by_index_));
    // Optional queries: absent on old drivers, then the field is missing.
    Optional("nvmlDeviceGetPowerUsage", &power_);
    Optional("nvmlDeviceGetTotalEnergyConsumption", &energy_);
    Optional("nvmlDeviceGetUtilizationRates", &util_);
    Optional("nvmlDeviceGetMemoryInfo", &memory_);
    Optional("nvmlDeviceGetClockInfo", &clock_);
    Optional("nvmlDeviceGetCurrentClocksThrottleReasons", &throttle_);
    Optional("nvmlDeviceGetComputeRunningProcesses_v3", &processes_);
    nvmlReturn_t rc = init_();
    if (rc != NVML_SUCCESS) {
      return UnavailableError(fmt::format("NVML unavailable: nvmlInit_v2: {}", Error(rc)));
    }
    initialized_ = true;
    return Status::Ok();
  }

  Result<int> DeviceCount() override {
    unsigned int n = 0;
    nvmlReturn_t rc = count_(&n);
    if (rc != NVML_SUCCESS) return UnavailableError("nvmlDeviceGetCount: " + Error(rc));
    return static_cast<int>(n);
  }

  Result<NvmlReading> Read(int index) override {
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t rc = handle_by_index_(static_cast<unsigned>(index), &dev);
    if (rc != NVML_SUCCESS) {
      return UnavailableError(fmt::format("nvmlDeviceGetHandleByIndex({}): {}", index, Error(rc)));
    }
    NvmlReading r;
    unsigned int u = 0;
    unsigned long long ull = 0;
    if (power_ && power_(dev, &u) == NVML_SUCCESS) r.power_w = u / 1000.0;
    if (energy_ && energy_(dev, &ull) == NVML_SUCCESS)
      r.energy_j = static_cast<double>(ull) / 1000.0;
    nvmlUtilization_t util{};
    if (util_ && util_(dev, &util) == NVML_SUCCESS) r.util_pct = util.gpu;
    nvmlMemory_t mem{};
    if (memory_ && memory_(dev, &mem) == NVML_SUCCESS) {
      r.mem_used_mib = static_cast<double>(mem.used) / (1024.0 * 1024.0);
      r.mem_total_mib = static_cast<double>(mem.total) / (1024.0 * 1024.0);
    }
    if (clock_ && clock_(dev, NVML_CLOCK_SM, &u) == NVML_SUCCESS) r.sm_clock_mhz = u;
    if (throttle_ && throttle_(dev, &ull) == NVML_SUCCESS) r.throttle_reasons = ull;
    if (processes_) {
      unsigned int count = 0;
      rc = processes_(dev, &count, nullptr);
      if (rc == NVML_SUCCESS) {
        r.processes = 0;
      } else if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        std::vector<nvmlProcessInfo_t> infos(count + 8);
        count = static_cast<unsigned>(infos.size());
        if (processes_(dev, &count, infos.data()) == NVML_SUCCESS)
          r.processes = static_cast<int>(count);
      }
    }
    return r;
  }

 private:
  template <typename F>
  Status Sym(const char* name, F** fn) {
    *fn = reinterpret_cast<F*>(::dlsym(handle_, name));
    if (!*fn) return UnavailableError(fmt::format("NVML unavailable: no symbol {}", name));
    return Status::Ok();
  }
  template <typename F>
  void Optional(const char* name, F** fn) {
    *fn = reinterpret_cast<F*>(::dlsym(handle_, name));
  }
  std::string Error(nvmlReturn_t rc) {
    const char* s = error_string_ ? error_string_(rc) : nullptr;
    return s ? s : fmt::format("error {}", rc);
  }

  void* handle_ = nullptr;
  bool initialized_ = false;
  nvmlReturn_t (*init_)() = nullptr;
  nvmlReturn_t (*shutdown_)() = nullptr;
  const char* (*error_string_)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count_)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_by_index_)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*power_)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*energy_)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*util_)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory_)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*clock_)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*throttle_)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*processes_)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
};

}  // namespace

Result<std::unique_ptr<NvmlApi>> LoadNvml(const std::string& library) {
  auto nvml = std::make_unique<DlNvml>();
  EK_RETURN_IF_ERROR(nvml->Load(library.empty() ? "libnvidia-ml.so.1" : library));
  return std::unique_ptr<NvmlApi>(std::move(nvml));
}

NvmlSource::NvmlSource(std::unique_ptr<NvmlApi> api, Clock* clock, std::string host)
    : api_(std::move(api)), clock_(clock), host_(std::move(host)) {}

Status NvmlSource::Poll(double, Batch* out) {
  EK_ASSIGN_OR_RETURN(int n, api_->DeviceCount());
  if (static_cast<size_t>(n) > last_.size()) last_.resize(static_cast<size_t>(n));
  double now = clock_->Now();
  for (int i = 0; i < n; ++i) {
    Result<NvmlReading> r = api_->Read(i);
    if (!r.ok()) {
      out->problems.push_back({"nvml", r.status().message()});
      continue;
    }
    Sample s;
    s.time = now;
    s.host = host_;
    s.gpu = i;
    s.util_pct = r->util_pct;
    s.power_w = r->power_w;
    s.mem_used_mib = r->mem_used_mib;
    s.energy_j = r->energy_j;
    s.sm_clock_mhz = r->sm_clock_mhz;
    s.throttle_reasons = r->throttle_reasons;
    s.processes = r->processes;
    Last& last = last_[static_cast<size_t>(i)];
    // The energy counter gives the exact average power since the last
    // reading; the instant reading can miss the dips between samples.
    if (s.energy_j && last.energy_j && now - last.time > 0.1 && *s.energy_j >= *last.energy_j) {
      s.power_w = (*s.energy_j - *last.energy_j) / (now - last.time);
    }
    last.time = now;
    last.energy_j = s.energy_j;
    DropAbsurdValues(&s, fmt::format("nvml:{}", i), &out->problems);
    out->samples.push_back(std::move(s));
  }
  return Status::Ok();
}

}  // namespace ek::telemetry
