// Recorded dcgm-exporter scrapes (report/inputs.h: ParseDcgmRecording), the
// run report's DCGM input: "# evenkeel-scrape TIME" lines, each followed by
// one scrape in Prometheus text.
#include "fuzz/fuzz_util.h"
#include "report/inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<ek::telemetry::Problem> problems;
  auto samples = ek::report::ParseDcgmRecording(ek::fuzz::Bytes(data, size), "node-a",
                                                "node-a.prom", &problems);
  (void)samples;
  return 0;
}
