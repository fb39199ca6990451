// The packer's routing, sharding, determinism, inputs and skipped records; its files
// (docs, masks, bfd bins) and faults are packer_files_test.cc's.
#include "pack/packer.h"

#include <gtest/gtest.h>
#include <xxhash.h>
#include <zstd.h>

#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "core/file.h"
#include "core/json_out.h"
#include "pack/packer_testing.h"
#include "packfile/inspect.h"
#include "packfile/layout.h"

namespace ek::pack {
namespace {

using testing::PackerTest;

TEST_F(PackerTest, ContiguousAndStridedStreamsMatchReference) {
  auto texts = Texts(23);
  std::string in = WriteInput("a.jsonl", texts);
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kStrided}) {
    PackOptions o = Options({in}, "out", 4, 8);
    o.shard = mode;
    auto m = Pack(o);
    ASSERT_TRUE(m.ok()) << m.status().message();
    for (int r = 0; r < 4; ++r) {
      std::vector<size_t> which;
      for (size_t i = 0; i < texts.size(); ++i) {
        if (OwnerOf(mode, i, texts.size(), 4) == r) which.push_back(i);
      }
      auto stream = Stream(texts, which);
      stream.resize(stream.size() / 8 * 8);  // the trailing partial block is dropped
      EXPECT_EQ(ReadRank("out", r), stream) << "rank " << r;
      EXPECT_EQ(m->ranks[r].records, which.size());
      EXPECT_EQ(m->ranks[r].blocks, stream.size() / 8);
    }
    EXPECT_TRUE(Inspect(o.out_dir, 2)->ok());
  }
}

// The manifest's tokenizer.xxh3 is of the tokenizer.json bytes the pack was loaded from,
// with the tokenizer loaded on the main thread (one thread) and beside pass 1 (two).
TEST_F(PackerTest, TheManifestHashesTheTokenizerFileItLoaded) {
  auto texts = Texts(23);
  std::string in = WriteInput("a.jsonl", texts);
  auto file = ReadFile(tok_path_);
  ASSERT_TRUE(file.ok());
  for (int threads : {1, 2}) {
    PackOptions o = Options({in}, "h" + std::to_string(threads), 2, 8);
    o.threads = threads;
    auto m = Pack(o);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->tokenizer_xxh3, XXH3_64bits(file->data(), file->size())) << threads;
  }
}

TEST_F(PackerTest, BalancedHasZeroSpread) {
  auto texts = Texts(37);
  std::string in = WriteInput("a.jsonl", texts);
  PackOptions o = Options({in}, "bal", 3, 8);
  o.shard = ShardMode::kBalanced;
  auto m = Pack(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->max_blocks(), m->min_blocks());
  std::vector<size_t> all(texts.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  auto stream = Stream(texts, all);
  size_t blocks = stream.size() / 8 / 3 * 3;
  for (int r = 0; r < 3; ++r) {
    std::vector<int32_t> expect;
    for (size_t b = r; b < blocks; b += 3)
      expect.insert(expect.end(), stream.begin() + b * 8, stream.begin() + (b + 1) * 8);
    EXPECT_EQ(ReadRank("bal", r), expect);
  }
  EXPECT_EQ(m->total_dropped_tokens, stream.size() - blocks * 8);
}

TEST_F(PackerTest, SameOutputWhateverTheThreadCount) {
  auto texts = Texts(200);
  std::string in = WriteInput("a.jsonl", texts);
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kBalanced}) {
    PackOptions one = Options({in}, "t1", 4, 16), two = Options({in}, "t2", 4, 16);
    one.threads = 1;
    two.threads = 2;
    one.chunk_bytes = 512;  // many chunks
    one.shard = two.shard = mode;
    auto a = Pack(one), b = Pack(two);
    ASSERT_TRUE(a.ok() && b.ok());
    for (int r = 0; r < 4; ++r) EXPECT_EQ(ReadRank("t1", r), ReadRank("t2", r));
    for (int r = 0; r < 4; ++r) EXPECT_EQ(a->ranks[r].xxh3, b->ranks[r].xxh3);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(ReadDocs("t1", r), ReadDocs("t2", r));
    for (int r = 0; r < 4; ++r) EXPECT_EQ(a->ranks[r].docs_xxh3, b->ranks[r].docs_xxh3);
  }
}

// The default batch (chunk_bytes 0: 1 MiB on one thread) cuts a 3 MB input into
// several batches; the blocks are those of one batch holding it all.
TEST_F(PackerTest, DefaultBatchesOfAnInputOfMegabytesPackAsOneBatch) {
  auto texts = Texts(60000);
  std::string in = WriteInput("a.jsonl", texts);
  ASSERT_GT(std::filesystem::file_size(in), size_t{3} << 20);
  PackOptions cut = Options({in}, "cut", 2, 16), whole = Options({in}, "whole", 2, 16);
  cut.threads = whole.threads = 1;
  whole.chunk_bytes = size_t{64} << 20;
  auto a = Pack(cut), b = Pack(whole);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ReadRank("cut", r), ReadRank("whole", r));
    EXPECT_EQ(ReadDocs("cut", r), ReadDocs("whole", r));
    EXPECT_EQ(a->ranks[r].xxh3, b->ranks[r].xxh3);
  }
  EXPECT_EQ(a->total_records, 60000u);
}

TEST_F(PackerTest, NodeRangesAreByteIdenticalAndMerge) {
  auto texts = Texts(50);
  std::string in = WriteInput("a.jsonl", texts);
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kStrided, ShardMode::kBalanced}) {
    PackOptions full = Options({in}, "full", 4, 8), n0 = Options({in}, "n0", 4, 8),
                n1 = Options({in}, "n1", 4, 8);
    full.shard = n0.shard = n1.shard = mode;
    n0.rank_lo = 0, n0.rank_hi = 1;
    n1.rank_lo = 2, n1.rank_hi = 3;
    auto mf = Pack(full), m0 = Pack(n0), m1 = Pack(n1);
    ASSERT_TRUE(mf.ok() && m0.ok() && m1.ok());
    EXPECT_FALSE(m0->complete());
    EXPECT_EQ(List("n0").count(RankFileName(2)), 0u);
    EXPECT_EQ(ReadRank("n0", 1), ReadRank("full", 1));
    EXPECT_EQ(ReadRank("n1", 2), ReadRank("full", 2));
    auto merged = MergeManifests({*m0, *m1}, {"n0", "n1"});
    ASSERT_TRUE(merged.ok()) << merged.status().message();
    for (int r = 0; r < 4; ++r) EXPECT_EQ(merged->ranks[r].xxh3, mf->ranks[r].xxh3);
    EXPECT_EQ(List("n0").count(DocsFileName(2)), 0u);
    EXPECT_EQ(ReadDocs("n0", 1), ReadDocs("full", 1));
    EXPECT_EQ(ReadDocs("n1", 3), ReadDocs("full", 3));
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(merged->ranks[r].docs_xxh3, mf->ranks[r].docs_xxh3);
      EXPECT_EQ(merged->ranks[r].documents, mf->ranks[r].documents);
    }
    EXPECT_EQ(merged->total_tokens, mf->total_tokens);
  }
}

TEST_F(PackerTest, BadRecordPublishesNothing) {
  std::string path = dir_ + "/bad.jsonl";
  // Line 3 is bad; line 4 gives rank 1 its block when line 3 is skipped.
  ASSERT_TRUE(WriteFileAtomic(path,
                              "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"txt\": 1}\n"
                              "{\"text\": \"a record long enough for a block of its own\"}\n")
                  .ok());
  auto m = Pack(Options({path}, "bad", 2, 4));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("bad.jsonl:3"), std::string::npos) << m.status().message();
  EXPECT_TRUE(List("bad").empty());  // no rank file, no manifest, no temp file
  PackOptions skip = Options({path}, "bad", 2, 4);
  skip.skip_bad = true;
  auto s = Pack(skip);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->skipped_bad, 1u);
  EXPECT_EQ(s->bad_examples.at(0).line, 3u);
}

TEST_F(PackerTest, RerunAfterAKilledRunFinishesTheJob) {
  auto texts = Texts(30);
  std::string in = WriteInput("a.jsonl", texts);
  PackOptions o = Options({in}, "kill", 2, 8);
  auto first = Pack(o);
  ASSERT_TRUE(first.ok());
  // What a run killed mid-way leaves: hidden temps and no manifest.
  ::unlink((o.out_dir + "/manifest.json").c_str());
  ASSERT_TRUE(WriteFileAtomic(o.out_dir + "/.rank-00000.i32.tmp.999.0", "partial").ok());
  EXPECT_FALSE(ReadManifest(o.out_dir).ok());  // does not look complete
  auto again = Pack(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(List("kill"),
            (std::set<std::string>{"manifest.json", "rank-00000.docs", "rank-00000.i32",
                                   "rank-00001.docs", "rank-00001.i32"}));
  EXPECT_EQ(again->ranks[0].xxh3, first->ranks[0].xxh3);
  EXPECT_TRUE(Inspect(o.out_dir)->ok());
}

TEST_F(PackerTest, EdgeCases) {
  // Empty input: no rank gets a block, and nothing is published.
  std::string empty = WriteInput("empty.jsonl", {});
  auto e = Pack(Options({empty}, "empty", 2, 8));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find(
                "ranks 0-1 of a world of 2 would get no block: too little data for the world"),
            std::string::npos)
      << e.status().message();
  EXPECT_FALSE(ReadManifest(dir_ + "/empty").ok());
  // A record longer than a block spans blocks.
  std::string longrec(200, 'a');
  std::string lp = WriteInput("long.jsonl", {longrec});
  auto l = Pack(Options({lp}, "long", 1, 8));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->ranks[0].blocks, (200 + 1) / 8);
  // World larger than the record count: the ranks without a block are named
  // (contiguous: one record per rank, so ranks 0-1 have theirs).
  std::string few = WriteInput("few.jsonl", {"one", "two"});
  PackOptions fo = Options({few}, "few", 5, 2);
  fo.shard = ShardMode::kContiguous;
  auto f = Pack(fo);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("ranks 2-4 of a world of 5 would get no block"),
            std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find("2 record(s)"), std::string::npos) << f.status().message();
}

// With more than one thread the tokenizer loads while pass 1 counts the inputs; the
// errors still come in the order of one after the other: the tokenizer's, the EOS's, then
// an input's.
TEST_F(PackerTest, ErrorsComeInTheSameOrderWhateverTheThreadCount) {
  const std::string missing = dir_ + "/no-such-input.jsonl";
  std::string good = WriteInput("g.jsonl", Texts(20));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/broken.json", "{\"model\": 7").ok());
  for (size_t threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    PackOptions bad_tok = Options({missing}, "e1", 2, 8);
    bad_tok.threads = threads;
    bad_tok.tokenizer_path = dir_ + "/broken.json";
    auto a = Pack(bad_tok);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.status().message().find("broken.json"), std::string::npos) << a.status().message();
    PackOptions bad_eos = Options({missing}, "e2", 2, 8);
    bad_eos.threads = threads;
    bad_eos.eos_token = "<|not-a-token|>";
    auto b = Pack(bad_eos);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find("EOS token '<|not-a-token|>'"), std::string::npos)
        << b.status().message();
    PackOptions bad_input = Options({good, missing}, "e3", 2, 8);
    bad_input.threads = threads;
    auto c = Pack(bad_input);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("no-such-input.jsonl"), std::string::npos)
        << c.status().message();
    PackOptions fine = Options({good}, "e4", 2, 8);
    fine.threads = threads;
    EXPECT_TRUE(Pack(fine).ok());
  }
}

TEST_F(PackerTest, TheDefaultShardModeIsBalanced) {
  PackOptions o;
  EXPECT_EQ(o.shard, ShardMode::kBalanced);
  std::string in = WriteInput("default.jsonl", Texts(40));
  auto m = Pack(Options({in}, "default", 3, 8));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->shard, ShardMode::kBalanced);
  EXPECT_EQ(m->min_blocks(), m->max_blocks());
}

TEST_F(PackerTest, ReadsZstdInput) {
  auto texts = Texts(40);
  std::string plain = WriteInput("z.jsonl", texts);
  std::string body = *ReadFile(plain);
  std::string comp(ZSTD_compressBound(body.size()), '\0');
  comp.resize(ZSTD_compress(comp.data(), comp.size(), body.data(), body.size(), 3));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/z.jsonl.zst", comp).ok());
  auto a = Pack(Options({plain}, "zp", 2, 8));
  auto b = Pack(Options({dir_ + "/z.jsonl.zst"}, "zz", 2, 8));
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().message();
  EXPECT_EQ(a->ranks[1].xxh3, b->ranks[1].xxh3);
  // A truncated .zst is an error naming the file.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/cut.jsonl.zst", comp.substr(0, comp.size() / 2)).ok());
  auto c = Pack(Options({dir_ + "/cut.jsonl.zst"}, "zc", 2, 8));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cut.jsonl.zst"), std::string::npos);
}

// Two workers encode a batch while the packer routes the one before. A zstd input is
// read through a buffer the reader reuses, so its batches must be encoded before the
// next is read: many small chunks, the blocks equal to one thread's, and a bad record
// in a late batch named by its line, as one thread names it.
TEST_F(PackerTest, OverlappedBatchesFromAStreamingSourcePackTheSameBlocks) {
  auto texts = Texts(300);
  std::string plain = WriteInput("o.jsonl", texts);
  std::string body = *ReadFile(plain);
  auto zst = [&](const std::string& name, const std::string& data) {
    std::string comp(ZSTD_compressBound(data.size()), '\0');
    comp.resize(ZSTD_compress(comp.data(), comp.size(), data.data(), data.size(), 3));
    EXPECT_TRUE(WriteFileAtomic(dir_ + "/" + name, comp).ok());
    return dir_ + "/" + name;
  };
  const std::string good = zst("o.jsonl.zst", body);
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kBalanced}) {
    PackOptions one = Options({good}, "o1", 3, 16), two = Options({good}, "o2", 3, 16);
    one.threads = 1;
    two.threads = 2;
    one.chunk_bytes = two.chunk_bytes = 300;  // a batch of a few records
    one.shard = two.shard = mode;
    auto a = Pack(one), b = Pack(two);
    ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status().message() : a.status().message());
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(ReadRank("o1", r), ReadRank("o2", r));
      EXPECT_EQ(ReadDocs("o1", r), ReadDocs("o2", r));
    }
    EXPECT_EQ(a->total_tokens, b->total_tokens);
  }
  const std::string bad = zst("bad.jsonl.zst", body + "{\"text\": 7}\n" + body);
  for (size_t threads : {1u, 2u}) {
    PackOptions o = Options({bad}, "ob", 3, 16);
    o.threads = threads;
    o.chunk_bytes = 300;
    auto m = Pack(o);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("bad.jsonl.zst:301:"), std::string::npos)
        << m.status().message();
    EXPECT_FALSE(FileExists(o.out_dir + "/manifest.json"));
  }
}

// The packer's shard rule (OwnerOf).
TEST(ShardTest, ContiguousMatchesDatasetsFormula) {
  // 10 records over 4 shards: sizes 3,3,2,2 (first N % W get one more).
  std::vector<int> owners;
  for (uint64_t i = 0; i < 10; ++i) owners.push_back(OwnerOf(ShardMode::kContiguous, i, 10, 4));
  EXPECT_EQ(owners, (std::vector<int>{0, 0, 0, 1, 1, 1, 2, 2, 3, 3}));
  // Fewer records than ranks.
  EXPECT_EQ(OwnerOf(ShardMode::kContiguous, 1, 2, 4), 1);
  EXPECT_EQ(OwnerOf(ShardMode::kStrided, 9, 10, 4), 1);
}

}  // namespace
}  // namespace ek::pack

namespace ek::pack {
namespace {

// --skip-bad: skipped.jsonl lists each skipped record with its reason class, the
// manifest counts the classes, and (contiguous) the skipped records take no rank's
// share: the pack equals that of the file with those lines removed.
TEST_F(PackerTest, SkippedRecordsAreListedCountedAndOwnedByNoRank) {
  auto texts = Texts(21);
  std::string body, clean;
  std::vector<std::string> bad = {"{\"text\": \"cut", "{\"text\": \"a \xFF b\"}", "{\"txt\": 1}",
                                  "{\"text\": \"x\"} trailing"};
  std::vector<std::pair<uint64_t, std::string>> want;  // (line, reason)
  const char* reasons[] = {"invalid_json", "invalid_utf8", "shape", "invalid_json"};
  uint64_t line = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string rec = "{\"text\": " + JsonString(texts[i]) + "}\n";
    body += rec;
    clean += rec;
    ++line;
    if (i % 5 == 1) {
      body += bad[(i / 5) % bad.size()] + "\n";
      want.emplace_back(++line, reasons[(i / 5) % bad.size()]);
    }
  }
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/dirty.jsonl", body).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/clean.jsonl", clean).ok());
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kStrided, ShardMode::kBalanced}) {
    PackOptions d = Options({dir_ + "/dirty.jsonl"}, "d", 3, 8);
    d.shard = mode;
    d.skip_bad = true;
    PackOptions c = Options({dir_ + "/clean.jsonl"}, "c", 3, 8);
    c.shard = mode;
    auto md = Pack(d);
    auto mc = Pack(c);
    ASSERT_TRUE(md.ok()) << md.status().message();
    ASSERT_TRUE(mc.ok()) << mc.status().message();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(ReadRank("d", r), ReadRank("c", r)) << r;
    EXPECT_EQ(md->total_records, mc->total_records);
    EXPECT_EQ(md->skipped_bad, want.size());
    EXPECT_EQ(md->inputs.at(0).records, mc->inputs.at(0).records + want.size());
    std::map<std::string, uint64_t> counts;
    for (const auto& w : want) ++counts[w.second];
    EXPECT_EQ(md->skipped_reasons, counts);
    auto listed = ReadFile(dir_ + "/d/skipped.jsonl");
    ASSERT_TRUE(listed.ok());
    LineSplitter lines(*listed);
    size_t k = 0;
    for (TextLine l; lines.Next(&l); ++k) {
      ASSERT_LT(k, want.size());
      EXPECT_NE(l.text.find("\"file\":\"" + dir_ +
                            "/dirty.jsonl\",\"line\":" + std::to_string(want[k].first) +
                            ",\"reason\":\"" + want[k].second + "\",\"error\":\"" + dir_ +
                            "/dirty.jsonl:" + std::to_string(want[k].first) + ": "),
                std::string::npos)
          << l.text;
    }
    EXPECT_EQ(k, want.size());
    auto back = ReadManifest(dir_ + "/d");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->skipped_reasons, counts);
    // A later pack with nothing skipped leaves no list behind.
    PackOptions again = Options({dir_ + "/clean.jsonl"}, "d", 3, 8);
    ASSERT_TRUE(Pack(again).ok());
    EXPECT_FALSE(FileExists(dir_ + "/d/skipped.jsonl"));
    EXPECT_FALSE(FileExists(dir_ + "/c/skipped.jsonl"));
  }
}

TEST_F(PackerTest, ARecordErrorSaysHowToGetPastIt) {
  std::string path = dir_ + "/u.jsonl";
  ASSERT_TRUE(WriteFileAtomic(path, "{\"text\": \"ok\"}\n{\"text\": \"a \xFF\"}\n").ok());
  auto m = Pack(Options({path}, "u", 1, 4));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(path + ":2: byte "), std::string::npos);
  EXPECT_NE(m.status().message().find("pass --invalid-utf8 replace"), std::string::npos)
      << m.status().message();
  ASSERT_TRUE(WriteFileAtomic(path, "{\"text\": \"ok\"}\n{\"text\": \n").ok());
  m = Pack(Options({path}, "u", 1, 4));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("--skip-bad skips such records and lists them in "
                                      "skipped.jsonl"),
            std::string::npos)
      << m.status().message();
}

TEST_F(PackerTest, EveryInputKindPacksTheSameBlocks) {
  auto texts = Texts(40);
  std::string lines, array = "[\n";
  for (size_t i = 0; i < texts.size(); ++i) {
    lines += "{\"text\": " + JsonString(texts[i]) + "}\n";
    array += std::string(i ? ",\n" : "") + "{\"text\": " + JsonString(texts[i]) + "}";
  }
  array += "\n]\n";
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.jsonl", lines).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.json", "\xEF\xBB\xBF" + array).ok());
  std::string comp(ZSTD_compressBound(lines.size()), '\0');
  comp.resize(ZSTD_compress(comp.data(), comp.size(), lines.data(), lines.size(), 3));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.jsonl.zst", comp).ok());
  auto ref = Pack(Options({dir_ + "/a.jsonl"}, "ref", 2, 8));
  ASSERT_TRUE(ref.ok());
  for (const char* name : {"a.json", "a.jsonl.zst"}) {
    auto m = Pack(Options({dir_ + "/" + name}, "k", 2, 8));
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().message();
    EXPECT_EQ(m->inputs.at(0).records, 40u);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(ReadRank("k", r), ReadRank("ref", r)) << name;
  }
}

}  // namespace
}  // namespace ek::pack

namespace ek::pack {
namespace {

// Every node of a --ranks pack screens the whole corpus: its ranks equal the full
// pack's, its skip list is the same, and merge keeps one copy of the counts.
TEST_F(PackerTest, NodePacksWithSkipsEqualTheFullPackAndMergeCountsOnce) {
  auto texts = Texts(30);
  std::string body;
  for (size_t i = 0; i < texts.size(); ++i) {
    body += "{\"text\": " + JsonString(texts[i]) + "}\n";
    if (i % 4 == 0) body += "{\"text\": broken}\n";
  }
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/n.jsonl", body).ok());
  PackOptions full = Options({dir_ + "/n.jsonl"}, "full", 3, 8);
  full.shard = ShardMode::kStrided;
  full.skip_bad = true;
  auto mf = Pack(full);
  ASSERT_TRUE(mf.ok()) << mf.status().message();
  EXPECT_EQ(mf->skipped_bad, 8u);
  std::vector<Manifest> parts;
  for (auto [lo, hi, out] : {std::tuple{0, 0, "n0"}, std::tuple{1, 2, "n1"}}) {
    PackOptions o = full;
    o.out_dir = dir_ + "/" + out;
    o.rank_lo = lo;
    o.rank_hi = hi;
    auto m = Pack(o);
    ASSERT_TRUE(m.ok()) << m.status().message();
    for (int r = lo; r <= hi; ++r) EXPECT_EQ(ReadRank(out, r), ReadRank("full", r)) << r;
    EXPECT_EQ(*ReadFile(o.out_dir + "/skipped.jsonl"), *ReadFile(dir_ + "/full/skipped.jsonl"));
    parts.push_back(*m);
  }
  auto merged = MergeManifests(parts, {"n0", "n1"});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->skipped_bad, 8u);
  EXPECT_EQ(merged->skipped_reasons, mf->skipped_reasons);
  EXPECT_EQ(merged->total_records, mf->total_records);
}

}  // namespace
}  // namespace ek::pack
