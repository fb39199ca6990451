// Weighted mixtures of sources: which records of each source a pack takes, so that each
// source's share of the pack's tokens is its target. Pure functions of their arguments
// (the per-record token counts, the weights or passes, the total and the seed): the same
// plan on every machine and run.
//
// Two ways to give a source its part (docs/run_format.md, [[data.source]]):
//  - epochs: whole passes over the source. Shares are exact by construction: a source
//    given e passes contributes e times its tokens, and its share is that over the sum.
//  - weight: a share of the tokens (weights are normalized). The mixture's size N is
//    `total_tokens`, or, when 0, the largest that repeats no source (N = min over sources
//    of tokens / share: the limiting source is taken once, whole). Source i gets
//    t = share x N tokens: floor(t / its tokens) whole passes plus a remainder, records
//    drawn in a seeded random order (core/random.h) until the remainder is met, to the
//    record nearest it. The realized share then differs from the target by less than one
//    record's tokens over N; a plan whose realized share misses the target by more than
//    0.1 percentage point is an error naming the source (too few tokens for its records:
//    give a larger total or whole passes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ek::pack {

struct MixtureSource {
  std::string name;
  std::vector<uint32_t> tokens;  // per record, EOS included; 0 = a record not packed (skipped)
  double weight = 0;             // > 0: weighted
  int epochs = 0;                // > 0: whole passes
};

struct MixtureOptions {
  uint64_t total_tokens = 0;  // weighted: N; 0 = the largest that repeats no source
  uint64_t seed = 0;
  double tolerance = 0.001;  // largest |realized - target| share allowed (0.1 point)
};

struct SourceTake {
  uint32_t passes = 0;               // whole passes over the source, in record order
  std::vector<uint64_t> remainder;   // then these records once more, ascending
  uint64_t records = 0, tokens = 0;  // what the source gives in all
  double target_share = 0, realized_share = 0;

  // The reads of the source pass 2 makes: its whole passes, and one more for the remainder.
  uint32_t rounds() const { return passes + (remainder.empty() ? 0 : 1); }
};

// Every source must have the same kind (all weights or all epochs) and at least one
// token; a weighted source is not given zero tokens unless its share rounds to zero.
Result<std::vector<SourceTake>> PlanMixture(const std::vector<MixtureSource>& sources,
                                            const MixtureOptions& options);

// The order in which the pack interleaves the sources' records: each next record comes
// from the source furthest behind its part (taken tokens / its tokens in all, lowest
// first; ties to the lower index), among those with records left. So every stretch of
// the pack holds the sources in about their shares, not one source after another.
class MixtureInterleave {
 public:
  explicit MixtureInterleave(const std::vector<SourceTake>& takes);
  // The source of the next record, or -1 when every source is done; then Took() with
  // the record's tokens.
  int Next() const;
  void Took(int source, uint64_t tokens, bool last_record);

 private:
  std::vector<uint64_t> total_, taken_;
  std::vector<bool> done_;
};

}  // namespace ek::pack
