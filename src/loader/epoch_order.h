// The order in which a rank visits its blocks in one epoch, and the exact
// position to resume from. Pure functions of their arguments: the same on every
// machine, compiler and run, so a resumed or re-run job sees the same tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace ek::loader {

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014; the constants of Vigna's reference splitmix64.c).
// Advances `state` and returns the next output.
uint64_t SplitMix64(uint64_t& state);

// The generator state for (seed, epoch): both pass through the SplitMix64
// finalizer so that neighbouring seeds and epochs give unrelated streams.
uint64_t EpochState(uint64_t seed, uint64_t epoch);

// A uniform integer in [0, bound) from the stream (bound > 0), by Lemire's
// multiply-shift with rejection ("Fast random integer generation in an
// interval", ACM TOMACS 2019): unbiased, and exact in integer arithmetic.
uint64_t UniformBelow(uint64_t& state, uint64_t bound);

// A permutation of [0, n): Fisher-Yates (Durstenfeld), for i = n-1 down to 1
// swap element i with element UniformBelow(state, i + 1), state =
// EpochState(seed, epoch). Without `shuffle`, the identity. Depends only on
// (seed, epoch, n, shuffle).
std::vector<uint64_t> Permutation(uint64_t seed, uint64_t epoch, uint64_t n, bool shuffle);

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
