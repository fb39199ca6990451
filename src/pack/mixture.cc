#include "pack/mixture.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/random.h"

namespace ek::pack {

Result<std::vector<SourceTake>> PlanMixture(const std::vector<MixtureSource>& sources,
                                            const MixtureOptions& opt) {
  if (sources.empty()) return InvalidArgumentError("mixture: no sources");
  const bool weighted = sources[0].weight > 0;
  std::vector<uint64_t> total(sources.size(), 0), count(sources.size(), 0);
  for (size_t i = 0; i < sources.size(); ++i) {
    const MixtureSource& s = sources[i];
    if ((s.weight > 0) != weighted || (weighted && s.epochs > 0) || s.weight < 0 || s.epochs < 0 ||
        !std::isfinite(s.weight)) {
      return InvalidArgumentError(fmt::format(
          "mixture: source {} ('{}'): every source takes a weight or every source whole passes "
          "(epochs), not a mix",
          i, s.name));
    }
    for (uint32_t t : s.tokens) {
      total[i] += t;
      count[i] += t > 0;
    }
    if (total[i] == 0) {
      return InvalidArgumentError(
          fmt::format("mixture: source {} ('{}') has no tokens to give ({} record(s), none packed)",
                      i, s.name, s.tokens.size()));
    }
  }
  std::vector<SourceTake> out(sources.size());
  if (!weighted) {
    uint64_t sum = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
      const uint32_t passes = static_cast<uint32_t>(std::max(1, sources[i].epochs));
      out[i].passes = passes;
      out[i].records = passes * count[i];
      out[i].tokens = passes * total[i];
      sum += out[i].tokens;
    }
    for (SourceTake& t : out) {
      t.target_share = t.realized_share = static_cast<double>(t.tokens) / static_cast<double>(sum);
    }
    return out;
  }

  double weights = 0;
  for (const MixtureSource& s : sources) weights += s.weight;
  // N: given, or the largest that repeats no source.
  long double n = static_cast<long double>(opt.total_tokens);
  if (opt.total_tokens == 0) {
    n = INFINITY;
    for (size_t i = 0; i < sources.size(); ++i) {
      const long double share = sources[i].weight / weights;
      n = std::min(n,
                   static_cast<long double>(total[i]) / share);  // the limiting one: want = total
    }
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const MixtureSource& s = sources[i];
    SourceTake& take = out[i];
    take.target_share = s.weight / weights;
    const uint64_t want = static_cast<uint64_t>(std::llround(take.target_share * n));
    take.passes = static_cast<uint32_t>(want / total[i]);
    const uint64_t rem = want - static_cast<uint64_t>(take.passes) * total[i];
    take.tokens = static_cast<uint64_t>(take.passes) * total[i];
    take.records = take.passes * count[i];
    if (rem > 0) {
      // Records in the seeded order of this source until the remainder is met, the last
      // one taken when it lands nearer the remainder than stopping short would.
      const std::vector<uint64_t> order =
          Permutation(opt.seed, i, static_cast<uint64_t>(s.tokens.size()), true);
      uint64_t got = 0;
      for (uint64_t k : order) {
        const uint64_t t = s.tokens[k];
        if (t == 0) continue;
        if (got + t <= rem) {
          got += t;
          take.remainder.push_back(k);
          if (got == rem) break;
          continue;
        }
        if (got + t - rem < rem - got) {
          got += t;
          take.remainder.push_back(k);
        }
        break;
      }
      std::sort(take.remainder.begin(), take.remainder.end());
      take.tokens += got;
      take.records += take.remainder.size();
    }
    sum += take.tokens;
  }
  if (sum == 0) return InvalidArgumentError("mixture: the weights give the pack no tokens");
  size_t worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    SourceTake& t = out[i];
    t.realized_share = static_cast<double>(t.tokens) / static_cast<double>(sum);
    if (std::fabs(t.realized_share - t.target_share) >
        std::fabs(out[worst].realized_share - out[worst].target_share)) {
      worst = i;
    }
  }
  {
    const size_t i = worst;
    const SourceTake& t = out[i];
    if (std::fabs(t.realized_share - t.target_share) > opt.tolerance) {
      return InvalidArgumentError(fmt::format(
          "mixture: source {} ('{}') would be {:.3f}% of the tokens against its weight's "
          "{:.3f}% (more than {:.1f} point off): its records are too large for a mixture of "
          "{} tokens; give data.source epochs (whole passes) or more data",
          i, sources[i].name, 100 * t.realized_share, 100 * t.target_share, 100 * opt.tolerance,
          sum));
    }
  }
  return out;
}

MixtureInterleave::MixtureInterleave(const std::vector<SourceTake>& takes)
    : total_(takes.size()), taken_(takes.size(), 0), done_(takes.size(), false) {
  for (size_t i = 0; i < takes.size(); ++i) {
    total_[i] = takes[i].tokens;
    done_[i] = takes[i].records == 0;
  }
}

int MixtureInterleave::Next() const {
  int best = -1;
  for (size_t i = 0; i < total_.size(); ++i) {
    if (done_[i]) continue;
    // taken_i / total_i < taken_b / total_b, in exact integer arithmetic.
    if (best < 0 || static_cast<unsigned __int128>(taken_[i]) * total_[best] <
                        static_cast<unsigned __int128>(taken_[best]) * total_[i]) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

void MixtureInterleave::Took(int source, uint64_t tokens, bool last_record) {
  taken_[static_cast<size_t>(source)] += tokens;
  if (last_record) done_[static_cast<size_t>(source)] = true;
}

}  // namespace ek::pack
