// Flight-recorder dumps as `evenkeel fr` reads them: up to four ranks' dumps in
// one input, separated by kRankSeparator (rank i is the i-th part), each
// through ParseDump (pickle when it starts with 0x80, JSON when with '{'),
// then Analyze over those that parsed and the report `evenkeel fr` prints.
#pragma once

#include <string>
#include <vector>

#include "flightrec/analyzer.h"
#include "flightrec/dump.h"
#include "flightrec/loader.h"
#include "flightrec/report.h"
#include "fuzz/fuzz_util.h"

namespace ek::fuzz {

inline constexpr std::string_view kRankSeparator = "\n#EK-RANK#\n";

inline void FuzzDumps(std::string_view in) {
  flightrec::LoadResult load;
  load.prefix = "rank";
  auto parts = Split(in, kRankSeparator, 4);
  for (size_t i = 0; i < parts.size(); ++i) {
    auto dump = flightrec::ParseDump(parts[i], "rank" + std::to_string(i), static_cast<int64_t>(i));
    if (dump.ok()) {
      load.dumps.push_back(std::move(*dump));
    } else {
      load.bad.push_back({"rank" + std::to_string(i), static_cast<int64_t>(i), dump.status()});
    }
  }
  if (load.dumps.empty()) return;
  load.world_size = static_cast<int64_t>(load.dumps[0].WorldRanks().size());
  flightrec::AnalyzeOptions options;
  options.mismatch_cap = 4;
  flightrec::Analysis a = flightrec::Analyze(load.dumps, options);
  (void)flightrec::RenderText("dir", load, a);
  (void)flightrec::RenderJson("dir", load, a);
}

}  // namespace ek::fuzz
