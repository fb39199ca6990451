#include "loader/epoch_order.h"

#include <fmt/format.h>

#include <numeric>
#include <utility>

namespace ek::loader {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t SplitMix64(uint64_t& state) {
  state += kGolden;
  return Mix64(state);
}

uint64_t EpochState(uint64_t seed, uint64_t epoch) { return Mix64(seed) ^ Mix64(epoch + kGolden); }

uint64_t UniformBelow(uint64_t& state, uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(SplitMix64(state)) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    while (low < threshold) {
      m = static_cast<unsigned __int128>(SplitMix64(state)) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

std::vector<uint64_t> Permutation(uint64_t seed, uint64_t epoch, uint64_t n, bool shuffle) {
  std::vector<uint64_t> p(n);
  std::iota(p.begin(), p.end(), uint64_t{0});
  if (!shuffle || n < 2) return p;
  uint64_t state = EpochState(seed, epoch);
  for (uint64_t i = n - 1; i > 0; --i) {
    std::swap(p[i], p[UniformBelow(state, i + 1)]);
  }
  return p;
}

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
