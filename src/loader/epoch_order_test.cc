#include "loader/epoch_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace ek::loader {
namespace {

TEST(EpochOrderTest, SplitMix64MatchesReferenceVectors) {
  // Outputs of Vigna's splitmix64.c seeded with 1234567.
  uint64_t state = 1234567;
  EXPECT_EQ(SplitMix64(state), 6457827717110365317ULL);
  EXPECT_EQ(SplitMix64(state), 3203168211198807973ULL);
  EXPECT_EQ(SplitMix64(state), 9817491932198370423ULL);
}

TEST(EpochOrderTest, PermutationIsPinned) {
  // Golden values: a change here reorders every pack ever trained on, breaking
  // bit-exact resume of runs started with an older evenkeel. Also pinned in
  // tests/trainer/test_loader.py against a Python implementation.
  EXPECT_EQ(Permutation(0, 0, 10, true), (std::vector<uint64_t>{1, 2, 5, 7, 0, 8, 4, 3, 9, 6}));
  EXPECT_EQ(Permutation(7, 3, 10, true), (std::vector<uint64_t>{9, 4, 0, 6, 8, 1, 2, 3, 7, 5}));
}

TEST(EpochOrderTest, PermutationIsAPermutationAndDependsOnSeedAndEpoch) {
  auto a = Permutation(1, 0, 1000, true);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(a, Permutation(1, 0, 1000, true));
  EXPECT_NE(a, Permutation(2, 0, 1000, true));
  EXPECT_NE(a, Permutation(1, 1, 1000, true));
  auto identity = Permutation(1, 0, 1000, false);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(identity[i], i);
  EXPECT_TRUE(Permutation(5, 5, 0, true).empty());
  EXPECT_EQ(Permutation(5, 5, 1, true), std::vector<uint64_t>{0});
}

TEST(EpochOrderTest, ShuffleIsUniformOverSmallN) {
  // All 6 orders of 3 elements over 60,000 epochs: each expected 10,000; a
  // biased bounded-integer step (plain modulo of a small range) would still
  // pass this, but a wrong Fisher-Yates loop bound would not.
  std::map<std::vector<uint64_t>, int> seen;
  for (uint64_t e = 0; e < 60000; ++e) ++seen[Permutation(42, e, 3, true)];
  ASSERT_EQ(seen.size(), 6u);
  for (const auto& [order, n] : seen) EXPECT_NEAR(n, 10000, 400);
}

TEST(EpochOrderTest, UniformBelowStaysInRange) {
  uint64_t state = 9;
  for (uint64_t bound : {1ULL, 2ULL, 3ULL, 1000ULL, (1ULL << 63) + 1, ~0ULL}) {
    for (int i = 0; i < 1000; ++i) ASSERT_LT(UniformBelow(state, bound), bound);
  }
}

TEST(EpochOrderTest, MinTakesAPrefixPadRepeatsFromTheStart) {
  auto perm = Permutation(3, 1, 5, true);
  auto min = EpochOrder::Make(3, 1, 5, 3, true);
  ASSERT_TRUE(min.ok());
  EXPECT_EQ(min->Blocks(), (std::vector<uint64_t>{perm[0], perm[1], perm[2]}));
  auto pad = EpochOrder::Make(3, 1, 5, 12, true);
  ASSERT_TRUE(pad.ok());
  std::vector<uint64_t> want;
  for (int i = 0; i < 12; ++i) want.push_back(perm[i % 5]);
  EXPECT_EQ(pad->Blocks(), want);
}

TEST(EpochOrderTest, PadFromNoBlocksFails) {
  auto bad = EpochOrder::Make(0, 0, 0, 4, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no blocks"), std::string::npos);
  EXPECT_TRUE(EpochOrder::Make(0, 0, 0, 0, true).ok());
}

TEST(EpochOrderTest, ResumeIsTheNextUnconsumedBlock) {
  auto order = EpochOrder::Make(11, 2, 100, 96, true);
  ASSERT_TRUE(order.ok());
  auto r = Resume(*order, 5, 2, 4);  // 5 steps x 8 blocks consumed
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->position, 40u);
  EXPECT_FALSE(r->exhausted);
  EXPECT_EQ(r->block, order->At(40));
  auto end = Resume(*order, 12, 2, 4);
  ASSERT_TRUE(end.ok());
  EXPECT_TRUE(end->exhausted);
  auto past = Resume(*order, 13, 2, 4);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("past the epoch's 96 blocks"), std::string::npos);
  EXPECT_FALSE(Resume(*order, 1, 0, 4).ok());
  EXPECT_FALSE(Resume(*order, ~0ULL, ~0ULL, 2).ok());  // overflow is an error, not a wrap
}

}  // namespace
}  // namespace ek::loader
