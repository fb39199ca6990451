#include "run/pack_sources.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

namespace ek::run {

std::string SourceName(const DataSource& source) {
  if (!source.name.empty()) return source.name;
  return std::filesystem::path(source.path).filename().string();
}

std::vector<std::string> PackSourceProblems(const RunFile& run, const pack::Manifest& m) {
  std::vector<std::string> out;
  if (run.sources.empty()) return out;
  if (m.sources.size() != run.sources.size()) {
    out.push_back(
        fmt::format("the pack has {} source(s), the run file {} ([[data.source]]): re-pack with "
                    "`evenkeel pack {}`",
                    m.sources.size(), run.sources.size(), run.path));
    return out;
  }
  for (size_t i = 0; i < run.sources.size(); ++i) {
    const DataSource& want = run.sources[i];
    const pack::SourceInfo& got = m.sources[i];
    const std::string name = SourceName(want);
    if (got.name != name) {
      out.push_back(
          fmt::format("source {}: the pack's is '{}', the run file's '{}'", i, got.name, name));
      continue;
    }
    if (std::fabs(got.weight - want.weight) > 1e-12 * std::max(1.0, want.weight) ||
        got.epochs != want.epochs) {
      out.push_back(fmt::format(
          "source '{}': the pack took weight {} / epochs {}, the run file says weight {} / "
          "epochs {}",
          name, got.weight, got.epochs, want.weight, want.epochs));
    }
    if (want.weight > 0 && std::fabs(got.realized_share - got.target_share) > 0.001) {
      out.push_back(fmt::format("source '{}': {:.3f}% of the tokens against a target of {:.3f}%",
                                name, 100 * got.realized_share, 100 * got.target_share));
    }
  }
  if (run.sources[0].weight > 0 && m.mixture_seed != static_cast<uint64_t>(run.mixture_seed)) {
    out.push_back(fmt::format("the pack's mixture seed is {}, the run file's data.mixture_seed {}",
                              m.mixture_seed, run.mixture_seed));
  }
  if (run.sources[0].weight > 0 && m.mixture_tokens != static_cast<uint64_t>(run.mixture_tokens)) {
    out.push_back(
        fmt::format("the pack's mixture asked for {} tokens, the run file's data.mixture_tokens {}",
                    m.mixture_tokens, run.mixture_tokens));
  }
  if (pack::ShardModeName(m.shard) != run.shard) {
    out.push_back(fmt::format("the pack's shard mode is {}, the run file's data.shard {}",
                              pack::ShardModeName(m.shard), run.shard));
  }
  if (m.loss_mask != run.loss_mask) {
    out.push_back(fmt::format("the pack's loss mask is {}, the run file's data.loss_mask {}",
                              m.loss_mask, run.loss_mask));
  }
  if (pack::PackingName(m.packing) != run.packing) {
    out.push_back(fmt::format("the pack's packing is {}, the run file's data.packing {}",
                              pack::PackingName(m.packing), run.packing));
  } else if (m.packing == pack::Packing::kBfd &&
             m.packing_seed != static_cast<uint64_t>(run.packing_seed)) {
    out.push_back(fmt::format("the pack's packing seed is {}, the run file's data.packing_seed {}",
                              m.packing_seed, run.packing_seed));
  }
  return out;
}

}  // namespace ek::run
