// nvidia-smi CSV (telemetry/nvidia_smi_csv.h) line by line, each row through
// the per-host time aligner, as the replay source and the run report read a file.
#include <map>

#include "fuzz/fuzz_util.h"
#include "telemetry/nvidia_smi_csv.h"
#include "telemetry/replay.h"

using namespace ek;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = fuzz::Bytes(data, size);
  telemetry::NvidiaSmiCsvParser parser("fuzz.csv", "node-a", 1.0);
  std::map<std::string, telemetry::HostTimeAligner> aligners;
  std::vector<telemetry::Sample> row, aligned;
  std::vector<telemetry::Problem> problems;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    row.clear();
    parser.ParseLine(text.substr(pos, nl - pos), &row, &problems);
    pos = nl + 1;
    for (auto& s : row) {
      auto it = aligners.try_emplace(s.host, 1.0, telemetry::ReplayOptions().clock_jump_s).first;
      aligned.clear();
      it->second.Add(std::move(s),
                     telemetry::HostTimeAligner::Row{"fuzz.csv", parser.line_number()}, &aligned,
                     &problems);
    }
    if (problems.size() > 4096) problems.clear();  // bounded memory on long inputs
  }
  for (auto& [host, a] : aligners) a.Finish(&problems);
  for (const auto& p : problems) (void)p.ToString();
  return 0;
}
