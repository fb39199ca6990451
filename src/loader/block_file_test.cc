#include "loader/block_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/file.h"
#include "packfile/layout.h"

namespace ek::loader {
namespace {

// A pack of `blocks.size()` ranks with seq_len 4; block b of rank r holds
// r*1000 + b*10 + {0,1,2,3}.
class BlockFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_loader_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  void MakePack(const std::vector<uint64_t>& blocks) {
    manifest_ = pack::Manifest{};
    manifest_.seq_len = 4;
    manifest_.world = static_cast<int>(blocks.size());
    manifest_.vocab_size = 100000;
    for (int r = 0; r < manifest_.world; ++r) {
      std::vector<int32_t> tokens;
      for (uint64_t b = 0; b < blocks[r]; ++b) {
        for (int t = 0; t < 4; ++t) tokens.push_back(static_cast<int32_t>(r * 1000 + b * 10 + t));
      }
      ASSERT_TRUE(WriteFileAtomic(dir_ + "/" + pack::RankFileName(r),
                                  std::string_view(reinterpret_cast<const char*>(tokens.data()),
                                                   tokens.size() * 4))
                      .ok());
      manifest_.ranks.push_back(
          {r, 1, blocks[r] * 4, blocks[r], blocks[r] * 16, 0, 0, pack::RankFileName(r)});
    }
    ASSERT_TRUE(pack::WriteManifest(dir_, manifest_).ok());
  }

  std::string dir_;
  pack::Manifest manifest_;
};

TEST_F(BlockFileTest, MapsTheRanksBlocks) {
  MakePack({3, 5});
  auto f = BlockFile::Open(dir_, 1);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->blocks(), 5u);
  EXPECT_EQ(f->seq_len(), 4);
  EXPECT_EQ(f->size_bytes(), 80u);
  EXPECT_EQ(f->path(), dir_ + "/rank-00001.i32");
  auto b = f->Block(3);
  EXPECT_EQ(std::vector<int32_t>(b.begin(), b.end()),
            (std::vector<int32_t>{1030, 1031, 1032, 1033}));
  EXPECT_EQ(b.data(), f->data() + 12);  // a view into the mapping, not a copy
}

TEST_F(BlockFileTest, EmptyRankMapsToNoBlocks) {
  MakePack({0, 2});
  auto f = BlockFile::Open(dir_, 0);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->blocks(), 0u);
  EXPECT_EQ(f->size_bytes(), 0u);
}

TEST_F(BlockFileTest, TruncatedFileIsCorruptAndNamed) {
  MakePack({3, 5});
  ASSERT_EQ(::truncate((dir_ + "/rank-00001.i32").c_str(), 78), 0);
  auto f = BlockFile::Open(dir_, 1);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(f.status().message().find(dir_ + "/rank-00001.i32: 78 bytes"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find("truncated"), std::string::npos);
}

TEST_F(BlockFileTest, LongerFileIsCorrupt) {
  MakePack({3, 5});
  ASSERT_EQ(::truncate((dir_ + "/rank-00000.i32").c_str(), 64), 0);
  auto f = BlockFile::Open(dir_, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("longer than the manifest"), std::string::npos)
      << f.status().message();
}

TEST_F(BlockFileTest, MissingFileIsNamed) {
  MakePack({3, 5});
  ASSERT_EQ(::unlink((dir_ + "/rank-00000.i32").c_str()), 0);
  auto f = BlockFile::Open(dir_, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find(dir_ + "/rank-00000.i32"), std::string::npos)
      << f.status().message();
}

TEST_F(BlockFileTest, MissingManifestAndBadRankAreErrors) {
  auto none = BlockFile::Open(dir_, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(dir_ + "/manifest.json"), std::string::npos)
      << none.status().message();
  MakePack({3, 5});
  auto outside = BlockFile::Open(dir_, 2);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside the pack's world of 2"), std::string::npos);
  EXPECT_FALSE(BlockFile::Open(dir_, -1).ok());
}

TEST_F(BlockFileTest, RankMissingFromAPartialManifestIsNotFound) {
  MakePack({3, 5});
  manifest_.ranks.erase(manifest_.ranks.begin());
  ASSERT_TRUE(pack::WriteManifest(dir_, manifest_).ok());
  auto f = BlockFile::Open(dir_, 0);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("rank 0 is not in this pack"), std::string::npos)
      << f.status().message();
}

// Writes rank `rank`'s docs file with `entries` and lists it in the manifest
// (its checksum and the count of document starts recomputed from the entries).
void WriteDocsForBlockFileTest(const std::string& dir, pack::Manifest* m, int rank,
                               const std::vector<uint64_t>& entries) {
  std::string bytes(entries.size() * 8, '\0');
  if (!entries.empty()) std::memcpy(bytes.data(), entries.data(), bytes.size());
  ASSERT_TRUE(WriteFileAtomic(dir + "/" + pack::DocsFileName(rank), bytes).ok());
  pack::RankInfo& r = m->ranks[static_cast<size_t>(rank)];
  r.docs_file = pack::DocsFileName(rank);
  r.docs_xxh3 = XXH3_64bits(bytes.data(), bytes.size());
  r.documents = 0;
  for (uint64_t e : entries) r.documents += pack::IsPadEntry(e) ? 0 : 1;
}

TEST_F(BlockFileTest, MapsTheDocsFile) {
  MakePack({3, 5});
  WriteDocsForBlockFileTest(dir_, &manifest_, 0, {0, 3, 5});
  WriteDocsForBlockFileTest(dir_, &manifest_, 1, {2, 6 | pack::kDocPadBit, 8});
  ASSERT_TRUE(pack::WriteManifest(dir_, manifest_).ok());
  auto f = BlockFile::Open(dir_, 1);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_TRUE(f->has_docs());
  auto d = f->docs();
  EXPECT_EQ(std::vector<uint64_t>(d.begin(), d.end()),
            (std::vector<uint64_t>{2, 6 | pack::kDocPadBit, 8}));
  MakePack({3, 5});  // an older pack: no docs files
  auto old = BlockFile::Open(dir_, 1);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_FALSE(old->has_docs());
  EXPECT_TRUE(old->docs().empty());
}

TEST_F(BlockFileTest, AnEmptyDocsFileIsARankInsideOneDocument) {
  MakePack({3, 5});
  WriteDocsForBlockFileTest(dir_, &manifest_, 0, {});
  WriteDocsForBlockFileTest(dir_, &manifest_, 1, {1});
  ASSERT_TRUE(pack::WriteManifest(dir_, manifest_).ok());
  auto f = BlockFile::Open(dir_, 0);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->has_docs());
  EXPECT_TRUE(f->docs().empty());
}

class DocsFaultTest : public BlockFileTest {
 protected:
  std::string OpenError(const std::function<void()>& damage) {
    MakePack({3, 5});
    WriteDocsForBlockFileTest(dir_, &manifest_, 0, {0, 3, 5});
    WriteDocsForBlockFileTest(dir_, &manifest_, 1, {2, 7, 9});
    damage();
    EXPECT_TRUE(pack::WriteManifest(dir_, manifest_).ok());
    auto f = BlockFile::Open(dir_, 1);
    EXPECT_FALSE(f.ok());
    return f.ok() ? "" : f.status().message();
  }
  std::string docs_path() const { return dir_ + "/rank-00001.docs"; }
};

TEST_F(DocsFaultTest, ATruncatedDocsFileNamesTheFileAndTheByte) {
  std::string e = OpenError([&] {
    ASSERT_EQ(::truncate(docs_path().c_str(), 20), 0);
    manifest_.ranks[1].docs_xxh3 = XXH3_64bits(ReadFile(docs_path())->data(), 20);
  });
  EXPECT_NE(e.find(docs_path() + ": 20 bytes is not a whole number of 8-byte entries (a partial "
                                 "entry at byte 16)"),
            std::string::npos)
      << e;
}

TEST_F(DocsFaultTest, AChangedDocsFileFailsItsChecksum) {
  std::string e = OpenError([&] {
    std::string bytes = *ReadFile(docs_path());
    bytes[8] = 6;  // entry 1: 7 -> 6, still ascending
    ASSERT_TRUE(WriteFileAtomic(docs_path(), bytes).ok());
  });
  EXPECT_NE(e.find(docs_path() + ": checksum"), std::string::npos) << e;
  EXPECT_NE(e.find("the manifest says"), std::string::npos) << e;
}

TEST_F(DocsFaultTest, EntriesOutOfOrderOrRangeAreCorruptNamingTheByte) {
  std::string e = OpenError([&] { WriteDocsForBlockFileTest(dir_, &manifest_, 1, {2, 9, 7}); });
  EXPECT_NE(e.find(docs_path() + ": byte 16: entry 2 (7): not after"), std::string::npos) << e;
  e = OpenError([&] { WriteDocsForBlockFileTest(dir_, &manifest_, 1, {2, 20}); });
  EXPECT_NE(e.find(docs_path() + ": byte 8: entry 1 (20): offset beyond the rank's 20 tokens"),
            std::string::npos)
      << e;
}

TEST_F(DocsFaultTest, ACountThatDisagreesWithTheManifestIsCorrupt) {
  std::string e = OpenError([&] { manifest_.ranks[1].documents = 4; });
  EXPECT_NE(e.find(docs_path() + ": 3 document starts, the manifest says 4"), std::string::npos)
      << e;
}

TEST_F(DocsFaultTest, AMissingDocsFileIsNotFound) {
  std::string e = OpenError([&] { ASSERT_EQ(::unlink(docs_path().c_str()), 0); });
  EXPECT_NE(e.find(docs_path() + ": missing document-boundaries file of rank 1"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace ek::loader
