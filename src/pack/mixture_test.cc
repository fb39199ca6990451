#include "pack/mixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/random.h"

namespace ek::pack {
namespace {

// Record sizes as a corpus has them: mostly short, some long.
std::vector<uint32_t> Sizes(uint64_t seed, size_t n, uint32_t lo, uint32_t hi) {
  std::vector<uint32_t> out(n);
  uint64_t state = seed;
  for (auto& t : out) t = lo + static_cast<uint32_t>(UniformBelow(state, hi - lo + 1));
  return out;
}

uint64_t Sum(const std::vector<uint32_t>& v) {
  return std::accumulate(v.begin(), v.end(), uint64_t{0});
}

// What a plan gives, counted from its passes and remainder, not from its own totals.
uint64_t Given(const MixtureSource& s, const SourceTake& t) {
  uint64_t tokens = t.passes * Sum(s.tokens);
  for (uint64_t k : t.remainder) tokens += s.tokens[k];
  return tokens;
}

TEST(Mixture, WholePassesGiveExactShares) {
  std::vector<MixtureSource> s = {{"a", Sizes(1, 100, 1, 50), 0, 2},
                                  {"b", Sizes(2, 30, 10, 90), 0, 0}};
  s[1].tokens[3] = 0;  // a skipped record: never taken
  auto plan = PlanMixture(s, {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const uint64_t a = 2 * Sum(s[0].tokens), b = Sum(s[1].tokens);
  EXPECT_EQ((*plan)[0].passes, 2u);
  EXPECT_EQ((*plan)[1].passes, 1u);  // epochs 0: one pass
  EXPECT_EQ((*plan)[0].tokens, a);
  EXPECT_EQ((*plan)[1].records, 29u);
  EXPECT_DOUBLE_EQ((*plan)[0].realized_share, static_cast<double>(a) / static_cast<double>(a + b));
  EXPECT_DOUBLE_EQ((*plan)[0].realized_share, (*plan)[0].target_share);
}

TEST(Mixture, WeightsWithoutATotalTakeTheLimitingSourceOnceAndTheOthersToTheirShare) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<MixtureSource> s = {{"chat", Sizes(seed, 3000, 20, 400), 0.7, 0},
                                    {"code", Sizes(seed + 100, 5000, 50, 800), 0.2, 0},
                                    {"math", Sizes(seed + 200, 400, 10, 200), 0.1, 0}};
    auto plan = PlanMixture(s, {0, seed});
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    uint64_t sum = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(Given(s[i], (*plan)[i]), (*plan)[i].tokens);
      sum += (*plan)[i].tokens;
      EXPECT_TRUE(std::is_sorted((*plan)[i].remainder.begin(), (*plan)[i].remainder.end()));
    }
    bool limiting_whole = false;
    for (size_t i = 0; i < s.size(); ++i) {
      const SourceTake& t = (*plan)[i];
      EXPECT_LE(t.passes, 1u) << "no source repeats without a total";
      limiting_whole |= t.passes == 1 || t.tokens == Sum(s[i].tokens);
      EXPECT_NEAR(static_cast<double>(t.tokens) / static_cast<double>(sum), t.target_share, 0.001)
          << "seed " << seed << " source " << s[i].name;
      EXPECT_DOUBLE_EQ(t.realized_share, static_cast<double>(t.tokens) / static_cast<double>(sum));
    }
    EXPECT_TRUE(limiting_whole) << "seed " << seed;
  }
}

TEST(Mixture, ATotalRepeatsSmallSourcesInWholePassesPlusASeededRemainder) {
  std::vector<MixtureSource> s = {{"big", Sizes(7, 4000, 20, 300), 1, 0},
                                  {"small", Sizes(8, 200, 20, 300), 1, 0}};
  const uint64_t big = Sum(s[0].tokens), small = Sum(s[1].tokens);
  const uint64_t total = big;  // half each: big gives half of itself, small repeats
  auto plan = PlanMixture(s, {total, 3});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ((*plan)[1].passes, static_cast<uint32_t>(total / 2 / small));
  EXPECT_FALSE((*plan)[1].remainder.empty());
  EXPECT_EQ((*plan)[0].passes, 0u);
  EXPECT_NEAR((*plan)[0].realized_share, 0.5, 0.001);
  // Deterministic for a seed; another seed draws other records.
  auto again = PlanMixture(s, {total, 3});
  auto other = PlanMixture(s, {total, 4});
  ASSERT_TRUE(again.ok() && other.ok());
  EXPECT_EQ((*plan)[0].remainder, (*again)[0].remainder);
  EXPECT_NE((*plan)[0].remainder, (*other)[0].remainder);
}

TEST(Mixture, RefusalsNameTheSource) {
  std::vector<MixtureSource> mixed = {{"a", {5, 5}, 1, 0}, {"b", {5}, 0, 2}};
  auto m = PlanMixture(mixed, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "mixture: source 1 ('b'): every source takes a weight or every source whole passes "
            "(epochs), not a mix");
  std::vector<MixtureSource> empty = {{"a", {5, 5}, 1, 0}, {"b", {0, 0}, 1, 0}};
  auto e = PlanMixture(empty, {});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "mixture: source 1 ('b') has no tokens to give (2 record(s), none packed)");
  // Two records of 1,000 tokens cannot make 10% of a 2,000-token mixture within 0.1 point.
  std::vector<MixtureSource> coarse = {{"a", std::vector<uint32_t>(1800, 1), 0.9, 0},
                                       {"b", {1000, 1000}, 0.1, 0}};
  auto c = PlanMixture(coarse, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("mixture: source 1 ('b') would be"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("give data.source epochs"), std::string::npos);
}

TEST(Mixture, TheInterleaveKeepsEveryStretchNearTheShares) {
  std::vector<SourceTake> takes(2);
  takes[0].tokens = 7000;
  takes[0].records = 700;
  takes[1].tokens = 3000;
  takes[1].records = 300;
  MixtureInterleave mix(takes);
  uint64_t left[2] = {700, 300}, got[2] = {0, 0};
  for (int n = 0; n < 1000; ++n) {
    const int s = mix.Next();
    ASSERT_GE(s, 0);
    ASSERT_GT(left[s], 0u);
    --left[s];
    got[s] += 10;
    mix.Took(s, 10, left[s] == 0);
    if (n >= 9) {  // after the first few records, each source within a record of its share
      const double at = static_cast<double>(got[0] + got[1]);
      EXPECT_NEAR(static_cast<double>(got[0]) / at, 0.7, 10.0 / at + 0.01) << n;
    }
  }
  EXPECT_EQ(mix.Next(), -1);
}

}  // namespace
}  // namespace ek::pack
