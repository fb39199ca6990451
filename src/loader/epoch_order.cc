#include "loader/epoch_order.h"

#include <fmt/format.h>

#include <utility>

namespace ek::loader {
Result<EpochOrder> EpochOrder::Make(uint64_t seed, uint64_t epoch, uint64_t local_blocks,
                                    uint64_t count, bool shuffle) {
  if (count > 0 && local_blocks == 0) {
    return InvalidArgumentError(
        fmt::format("loader: cannot fill {} positions from a rank with no blocks", count));
  }
  EpochOrder out;
  out.permutation_ = Permutation(seed, epoch, local_blocks, shuffle);
  out.count_ = count;
  out.epoch_ = epoch;
  return out;
}

std::vector<uint64_t> EpochOrder::Blocks() const {
  std::vector<uint64_t> out(count_);
  for (uint64_t p = 0; p < count_; ++p) out[p] = At(p);
  return out;
}

Result<ResumePoint> Resume(const EpochOrder& order, uint64_t step, uint64_t micro_batch,
                           uint64_t grad_accum) {
  if (micro_batch == 0 || grad_accum == 0) {
    return InvalidArgumentError(
        fmt::format("loader: resume: micro_batch ({}) and grad_accum ({}) must be positive",
                    micro_batch, grad_accum));
  }
  unsigned __int128 position = static_cast<unsigned __int128>(step) * micro_batch * grad_accum;
  if (position > order.count()) {
    return InvalidArgumentError(fmt::format(
        "loader: resume: step {} of epoch {} at {} blocks/step is past the epoch's {} blocks", step,
        order.epoch(), micro_batch * grad_accum, order.count()));
  }
  ResumePoint point;
  point.position = static_cast<uint64_t>(position);
  point.exhausted = point.position == order.count();
  if (!point.exhausted) point.block = order.At(point.position);
  return point;
}

}  // namespace ek::loader
