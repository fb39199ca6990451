// Deterministic pseudo-random numbers and permutations: pure functions of their
// arguments, the same on every machine, compiler and run (no std:: distribution, whose
// output the standard leaves to the library). The loader's epoch order and the packer's
// mixtures draw from here, so a pack and a resumed run see the same records and tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace ek {

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

}  // namespace ek
