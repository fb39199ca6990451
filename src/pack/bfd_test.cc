#include "pack/bfd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/random.h"

namespace ek::pack {
namespace {

// Every document's tokens placed exactly once, its pieces in order (seq_len
// long but the last), no bin over seq_len or empty.
void ExpectSoundPlan(const BfdPlan& plan, const std::vector<uint32_t>& lengths, uint32_t seq) {
  std::map<uint64_t, std::vector<BfdPiece>> by_doc;
  for (uint64_t b = 0; b < plan.bins(); ++b) {
    ASSERT_LT(plan.bin_start[b], plan.bin_start[b + 1]) << "bin " << b << " is empty";
    EXPECT_LE(plan.fill(b), seq) << "bin " << b;
    for (uint64_t i = plan.bin_start[b]; i < plan.bin_start[b + 1]; ++i) {
      by_doc[plan.pieces[i].doc].push_back(plan.pieces[i]);
    }
  }
  uint64_t split = 0;
  for (uint64_t d = 0; d < lengths.size(); ++d) {
    auto& pieces = by_doc[d];
    std::sort(pieces.begin(), pieces.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
    uint32_t at = 0;
    for (size_t k = 0; k < pieces.size(); ++k) {
      EXPECT_EQ(pieces[k].offset, at) << "doc " << d;
      EXPECT_EQ(pieces[k].length, k + 1 < pieces.size() ? seq : lengths[d] - at) << "doc " << d;
      at += pieces[k].length;
    }
    EXPECT_EQ(at, lengths[d]) << "doc " << d;
    split += pieces.size() > 1;
  }
  EXPECT_EQ(plan.split_documents, split);
}

std::vector<uint32_t> MixedLengths(uint64_t n, uint32_t seq, uint64_t seed) {
  uint64_t st = seed;
  std::vector<uint32_t> v;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t kind = UniformBelow(st, 10);
    const uint64_t hi = kind < 6 ? seq / 8 : kind < 9 ? seq : 3 * seq;
    v.push_back(static_cast<uint32_t>(1 + UniformBelow(st, hi)));
  }
  return v;
}

TEST(BfdTest, EveryDocumentIsPlacedOnceInOrderedPiecesAndNoBinOverflows) {
  for (uint32_t seq : {1u, 7u, 64u, 100u}) {
    auto lengths = MixedLengths(500, seq, seq);
    BfdPlan plan = PlanBfd(lengths, seq, 3);
    ExpectSoundPlan(plan, lengths, seq);
  }
}

TEST(BfdTest, ChoosesTheBinWithTheLeastRoomThatFits) {
  // Sorted: 6, 5, 4, 3, 2 (seq 10). 6 -> bin 0 (room 4); 5 -> bin 1 (room 5);
  // 4 -> bin 0, the exact fit (room 0), not bin 1; 3 -> bin 1 (room 2); 2 -> bin 1.
  BfdPlan plan = PlanBfd({3, 6, 2, 5, 4}, 10, 0);
  ASSERT_EQ(plan.bins(), 2u);
  auto docs = [&](uint64_t b) {
    std::vector<uint64_t> d;
    for (uint64_t i = plan.bin_start[b]; i < plan.bin_start[b + 1]; ++i)
      d.push_back(plan.pieces[i].doc);
    return d;
  };
  EXPECT_EQ(docs(0), (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(docs(1), (std::vector<uint64_t>{3, 0, 2}));
  EXPECT_EQ(plan.fill(0), 10u);
  EXPECT_EQ(plan.fill(1), 10u);
  // The best fit, not the first: 7 (bin 0, room 3), 4 and 4 (bin 1, room 2); the 1
  // goes to bin 1, the least room, where first-fit would take bin 0.
  BfdPlan best = PlanBfd({1, 4, 7, 4}, 10, 0);
  ASSERT_EQ(best.bins(), 2u);
  EXPECT_EQ(best.fill(0), 7u);
  EXPECT_EQ(best.fill(1), 9u);
  EXPECT_EQ(best.pieces.back().doc, 0u);
}

TEST(BfdTest, ALongDocumentIsCutIntoSeqLenPiecesFirst) {
  BfdPlan plan = PlanBfd({25, 3}, 10, 0);
  EXPECT_EQ(plan.split_documents, 1u);
  // Pieces 10, 10 (bins 0, 1, in order), then 5 and 3 share bin 2.
  ASSERT_EQ(plan.bins(), 3u);
  EXPECT_EQ(plan.pieces[0].offset, 0u);
  EXPECT_EQ(plan.pieces[1].offset, 10u);
  EXPECT_EQ(plan.pieces[2].offset, 20u);
  EXPECT_EQ(plan.pieces[2].length, 5u);
  EXPECT_EQ(plan.pieces[3].doc, 1u);
  ExpectSoundPlan(plan, {25, 3}, 10);
  BfdPlan exact = PlanBfd({20}, 10, 0);  // two full pieces, no remainder
  EXPECT_EQ(exact.bins(), 2u);
  EXPECT_EQ(exact.split_documents, 1u);
  EXPECT_EQ(PlanBfd({10}, 10, 0).split_documents, 0u);  // exactly a block: not split
  EXPECT_EQ(PlanBfd({0, 4}, 10, 0).pieces.size(), 1u);  // nothing of an empty document
}

TEST(BfdTest, DeterministicForASeedAndSeedsDifferOnlyInTieOrder) {
  auto lengths = MixedLengths(2000, 64, 11);
  BfdPlan a = PlanBfd(lengths, 64, 5), b = PlanBfd(lengths, 64, 5), c = PlanBfd(lengths, 64, 6);
  ASSERT_EQ(a.bin_start, b.bin_start);
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    EXPECT_EQ(a.pieces[i].doc, b.pieces[i].doc);
    EXPECT_EQ(a.pieces[i].offset, b.pieces[i].offset);
  }
  // Another seed: the same bins, piece for piece of the same lengths, only
  // pieces of equal length trading places; and some do trade.
  ASSERT_EQ(a.bin_start, c.bin_start);
  size_t moved = 0;
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    EXPECT_EQ(a.pieces[i].length, c.pieces[i].length) << i;
    moved += a.pieces[i].doc != c.pieces[i].doc;
  }
  EXPECT_GT(moved, a.pieces.size() / 4);
  ExpectSoundPlan(c, lengths, 64);
}

TEST(BfdTest, PacksTighterThanSequentialBlocksOfTheSameDocuments) {
  auto lengths = MixedLengths(3000, 128, 2);
  BfdPlan plan = PlanBfd(lengths, 128, 0);
  uint64_t tokens = 0;
  for (uint32_t l : lengths) tokens += l;
  uint64_t padding = plan.bins() * 128 - tokens;
  // Best fit leaves well under a tenth of a block per bin empty on this mix.
  EXPECT_LT(static_cast<double>(padding) / static_cast<double>(plan.bins()), 12.8);
}

}  // namespace
}  // namespace ek::pack
