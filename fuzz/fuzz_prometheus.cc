// Prometheus text exposition from dcgm-exporter (telemetry/prometheus.h:
// ParseDcgmExposition), as the live Prometheus source reads one scrape.
#include "fuzz/fuzz_util.h"
#include "telemetry/prometheus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<ek::telemetry::Problem> problems;
  auto samples = ek::telemetry::ParseDcgmExposition(ek::fuzz::Bytes(data, size), "node-a", 1.7e9,
                                                    "http://node-a:9400/metrics", &problems);
  (void)samples;
  return 0;
}
