// The order in which a rank visits its blocks in one epoch, and the exact
// position to resume from. Pure functions of their arguments: the same on every
// machine, compiler and run, so a resumed or re-run job sees the same tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/status.h"

namespace ek::loader {

// The generator and the permutation (core/random.h), as the loader has always named them.
using ek::EpochState;
using ek::Permutation;
using ek::SplitMix64;
using ek::UniformBelow;

// One epoch of one rank: `count` positions over a rank that holds
// `local_blocks` blocks. Position p holds block Permutation(...)[p % local_blocks]:
// with count <= local_blocks (evenfix "min") a prefix of the permutation, with
// count > local_blocks (evenfix "pad") the permutation repeated cyclically from
// its start, so every block is seen and the first ones again.
class EpochOrder {
 public:
  // Fails when count > 0 and local_blocks == 0 (nothing to repeat).
  static Result<EpochOrder> Make(uint64_t seed, uint64_t epoch, uint64_t local_blocks,
                                 uint64_t count, bool shuffle);

  uint64_t count() const { return count_; }
  uint64_t epoch() const { return epoch_; }
  // The block index at `position` (precondition: position < count()).
  uint64_t At(uint64_t position) const { return permutation_[position % permutation_.size()]; }
  // All count() block indices in order.
  std::vector<uint64_t> Blocks() const;

 private:
  std::vector<uint64_t> permutation_;
  uint64_t count_ = 0;
  uint64_t epoch_ = 0;
};

// Where an epoch resumes after `step` optimizer steps of that epoch, each of
// `grad_accum` micro-batches of `micro_batch` blocks: position step *
// micro_batch * grad_accum, and the block there (when the epoch has one left).
struct ResumePoint {
  uint64_t position = 0;
  bool exhausted = false;  // position == count: the epoch is done, go to the next
  uint64_t block = 0;      // order.At(position) unless exhausted
};

// Fails on a zero micro_batch or grad_accum, on overflow, and when the steps
// consumed more blocks than the epoch has.
Result<ResumePoint> Resume(const EpochOrder& order, uint64_t step, uint64_t micro_batch,
                           uint64_t grad_accum);

}  // namespace ek::loader
