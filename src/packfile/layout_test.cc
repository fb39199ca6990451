#include "packfile/layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace ek::pack {
namespace {

std::string DocsBytes(const std::vector<uint64_t>& entries) {
  std::string s(entries.size() * kDocEntryBytes, '\0');
  for (size_t i = 0; i < entries.size(); ++i) std::memcpy(&s[i * 8], &entries[i], 8);
  return s;
}

std::string CheckError(const std::vector<uint64_t>& entries, uint64_t blocks = 3, int seq_len = 4) {
  auto c = CheckDocEntries(DocsBytes(entries), blocks, seq_len, "rank-00000.docs");
  EXPECT_FALSE(c.ok());
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), StatusCode::kCorrupt);
  return c.status().message();
}

TEST(DocsLayoutTest, CountsDocumentsAndPads) {
  // Blocks of 4: [d d d d][d d p p][d d d p]
  auto c = CheckDocEntries(DocsBytes({0, 2, 4, 6 | kDocPadBit, 8, 11 | kDocPadBit}), 3, 4, "x");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->entries, 6u);
  EXPECT_EQ(c->documents, 4u);
  EXPECT_EQ(c->pads, 2u);
  EXPECT_EQ(c->padding_tokens, 3u);
  auto none = CheckDocEntries("", 3, 4, "x");  // a rank inside one long document
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->entries, 0u);
}

TEST(DocsLayoutTest, APartialEntryNamesTheFileAndTheByte) {
  std::string bytes = DocsBytes({0, 5});
  bytes.pop_back();
  auto c = CheckDocEntries(bytes, 3, 4, "rank-00000.docs");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "rank-00000.docs: 15 bytes is not a whole number of 8-byte entries (a partial entry "
            "at byte 8)");
}

TEST(DocsLayoutTest, EveryBadEntryIsNamedByItsByteOffset) {
  EXPECT_EQ(CheckError({0, 12}),
            "rank-00000.docs: byte 8: entry 1 (12): offset beyond the rank's 12 tokens (3 blocks "
            "x 4)");
  EXPECT_EQ(CheckError({0, 5, 5}),
            "rank-00000.docs: byte 16: entry 2 (5): not after the previous entry's offset 5 "
            "(entries ascend)");
  EXPECT_NE(CheckError({0, 6, 3}).find("byte 16: entry 2 (3): not after"), std::string::npos);
  EXPECT_EQ(CheckError({0, 2 | kDocPadBit, 3}),
            "rank-00000.docs: byte 16: entry 2 (3): inside the padding that begins at 2 (padding "
            "runs to the block's end)");
  EXPECT_EQ(CheckError({0, 4 | kDocPadBit}),
            "rank-00000.docs: byte 8: entry 1 (4, padding): padding at a block's start (a block "
            "of padding only)");
  // Offsets too large for the rank, with or without the pad bit.
  EXPECT_NE(CheckError({UINT64_MAX}).find("byte 0: entry 0"), std::string::npos);
}

TEST(DocsLayoutTest, PaddingEndsAtItsBlock) {
  // After a block's padding, the next block starts a segment: a document may begin there.
  auto c = CheckDocEntries(DocsBytes({0, 3 | kDocPadBit, 4, 7 | kDocPadBit, 9}), 3, 4, "x");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->documents, 3u);
}

TEST(DocsLayoutTest, HasDocsReadsTheRanks) {
  Manifest m;
  EXPECT_FALSE(HasDocs(m));
  m.ranks.resize(2);
  EXPECT_FALSE(HasDocs(m));
  m.ranks[0].docs_file = DocsFileName(0);
  m.ranks[1].docs_file = DocsFileName(1);
  EXPECT_TRUE(HasDocs(m));
  EXPECT_EQ(DocsFileName(12), "rank-00012.docs");
}

}  // namespace
}  // namespace ek::pack
