#include "core/random.h"

#include <numeric>
#include <utility>

namespace ek {
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

}  // namespace ek
