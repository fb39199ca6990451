#include "pack/packer.h"

#include <dirent.h>
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <xxhash.h>
#include <zstd.h>

#include <map>
#include <set>
#include <tuple>

#include "core/fault_env.h"
#include "core/file.h"
#include "core/json_out.h"
#include "packfile/inspect.h"
#include "packfile/layout.h"
#include "tokenize/tiny_tokenizer_testing.h"
#include "tokenize/tokenizer.h"

namespace ek::pack {
namespace {

class PackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_pack_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    tok_path_ = dir_ + "/tokenizer.json";
    ASSERT_TRUE(WriteFileAtomic(tok_path_, tokenize::testing::TinyJson()).ok());
    tok_ = std::move(tokenize::Tokenizer::FromFile(tok_path_)).value();
  }

  std::string WriteInput(const std::string& name, const std::vector<std::string>& texts) {
    std::string body;
    for (const auto& t : texts) body += "{\"text\": " + JsonString(t) + "}\n";
    std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(path, body).ok());
    return path;
  }

  PackOptions Options(const std::vector<std::string>& inputs, const std::string& out, int world,
                      int seq) {
    PackOptions o;
    o.tokenizer_path = tok_path_;
    o.inputs = inputs;
    o.out_dir = dir_ + "/" + out;
    o.world = world;
    o.seq_len = seq;
    o.eos_token = "<|x|>";
    return o;
  }

  std::vector<int32_t> ReadRank(const std::string& out, int rank) {
    auto f = ReadFile(dir_ + "/" + out + "/" + RankFileName(rank));
    EXPECT_TRUE(f.ok()) << f.status().message();
    std::vector<int32_t> v(f->size() / 4);
    std::memcpy(v.data(), f->data(), f->size());
    return v;
  }

  std::vector<uint64_t> ReadDocs(const std::string& out, int rank) {
    auto f = ReadFile(dir_ + "/" + out + "/" + DocsFileName(rank));
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok()) return {};
    std::vector<uint64_t> v(f->size() / 8);
    std::memcpy(v.data(), f->data(), v.size() * 8);
    return v;
  }

  // The reference packer: tokens of each record + EOS, concatenated.
  std::vector<int32_t> Stream(const std::vector<std::string>& texts,
                              const std::vector<size_t>& which) {
    std::vector<int32_t> s;
    for (size_t i : which) {
      auto ids = tok_->Encode(texts[i]);
      s.insert(s.end(), ids->begin(), ids->end());
      s.push_back(261);
    }
    return s;
  }

  std::vector<std::string> Texts(int n) {
    std::vector<std::string> t;
    for (int i = 0; i < n; ++i) {
      std::string s = "hello world " + std::to_string(i);
      for (int k = 0; k < i % 5; ++k) s += " more words héllo";
      t.push_back(s);
    }
    return t;
  }

  std::set<std::string> List(const std::string& sub) {
    std::set<std::string> names;
    DIR* d = ::opendir((dir_ + "/" + sub).c_str());
    if (!d) return names;
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.insert(n);
    }
    ::closedir(d);
    return names;
  }

  std::string dir_, tok_path_;
  std::unique_ptr<tokenize::Tokenizer> tok_;
};

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

TEST_F(PackerTest, InspectCatchesDamage) {
  auto texts = Texts(30);
  std::string in = WriteInput("a.jsonl", texts);
  PackOptions o = Options({in}, "dmg", 2, 8);
  ASSERT_TRUE(Pack(o).ok());
  std::string f0 = o.out_dir + "/" + RankFileName(0);
  std::string data = *ReadFile(f0);
  int32_t big = 100000;
  std::memcpy(data.data() + 4, &big, 4);
  ASSERT_TRUE(WriteFileAtomic(f0, data).ok());
  auto r = Inspect(o.out_dir);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->ranks[0].bad_tokens, 1u);
  EXPECT_EQ(r->ranks[0].first_bad_token_at, 1);
  ASSERT_TRUE(WriteFileAtomic(f0, data.substr(0, 20)).ok());
  EXPECT_FALSE(Inspect(o.out_dir)->ranks[0].problems.empty());
}

// tokenizer.max_id is the largest id the kept blocks hold (EOS and bfd's padding
// included), in every shard mode and packing, for a node's ranks as for the whole.
TEST_F(PackerTest, MaxIdIsTheLargestIdInTheBlocks) {
  auto texts = Texts(41);
  std::string in = WriteInput("a.jsonl", texts);
  for (Packing packing : {Packing::kSequential, Packing::kBfd}) {
    for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kStrided, ShardMode::kBalanced}) {
      SCOPED_TRACE(fmt::format("{} {}", PackingName(packing), ShardModeName(mode)));
      if (packing == Packing::kBfd && mode != ShardMode::kBalanced) continue;
      PackOptions o = Options({in}, "maxid", 3, 8);
      o.shard = mode;
      o.packing = packing;
      auto m = Pack(o);
      ASSERT_TRUE(m.ok()) << m.status().message();
      int32_t want = -1;
      for (int r = 0; r < 3; ++r) {
        for (int32_t v : ReadRank("maxid", r)) want = std::max(want, v);
      }
      EXPECT_EQ(m->max_id, want);
      EXPECT_LT(m->max_id, m->vocab_size);
      auto back = ReadManifest(o.out_dir);
      ASSERT_TRUE(back.ok()) << back.status().message();
      EXPECT_EQ(back->max_id, want);
      // A node's part: the largest id of its ranks' blocks.
      o.rank_lo = o.rank_hi = 1;
      o.out_dir = dir_ + "/maxid-node";
      auto part = Pack(o);
      ASSERT_TRUE(part.ok()) << part.status().message();
      int32_t part_want = -1;
      for (int32_t v : ReadRank("maxid-node", 1)) part_want = std::max(part_want, v);
      EXPECT_EQ(part->max_id, part_want);
    }
  }
}

// A manifest whose max_id is below an id its blocks hold is a corrupt pack:
// inspect names the file, the id and where it is.
TEST_F(PackerTest, InspectRefusesIdsAboveTheManifestsMaxId) {
  std::string in = WriteInput("a.jsonl", Texts(30));
  PackOptions o = Options({in}, "lie", 2, 8);
  auto m = Pack(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(Inspect(o.out_dir)->ok());
  const int32_t top = static_cast<int32_t>(m->max_id);
  Manifest lie = *m;
  lie.max_id = top - 1;
  ASSERT_TRUE(WriteManifest(o.out_dir, lie).ok());
  auto r = Inspect(o.out_dir);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->ok());
  std::vector<int32_t> ids = ReadRank("lie", 0);
  const auto first = std::find(ids.begin(), ids.end(), top) - ids.begin();
  const auto count = std::count(ids.begin(), ids.end(), top);
  ASSERT_GT(count, 0);
  EXPECT_EQ(r->ranks[0].bad_tokens, 0u);
  EXPECT_EQ(r->ranks[0].over_max_tokens, static_cast<uint64_t>(count));
  ASSERT_EQ(r->ranks[0].problems.size(), 1u);
  EXPECT_EQ(r->ranks[0].problems[0],
            fmt::format("rank-00000.i32: {} token(s) above the manifest's tokenizer.max_id {} "
                        "(first: {} at token {})",
                        count, top - 1, top, first));
}

// The docs file lists where every record placed in a rank's blocks starts, in
// the rank's token stream, and nothing else (no block start of a record's
// continuation, no record of a dropped block): recomputed from the reference
// stream for every shard mode.
TEST_F(PackerTest, DocsFilesListEveryRecordStartInTheRanksBlocks) {
  auto texts = Texts(61);
  std::string in = WriteInput("a.jsonl", texts);
  const uint64_t seq = 8, world = 3;
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kStrided, ShardMode::kBalanced}) {
    SCOPED_TRACE(std::string(ShardModeName(mode)));
    PackOptions o = Options({in}, "docs", static_cast<int>(world), static_cast<int>(seq));
    o.shard = mode;
    auto m = Pack(o);
    ASSERT_TRUE(m.ok()) << m.status().message();
    std::vector<std::vector<uint64_t>> expect(world);
    std::vector<uint64_t> split(world,
                                0);  // records cut at the end of the kept block they start in
    if (mode == ShardMode::kBalanced) {
      uint64_t g = 0;  // the record's first token in the one stream blocks are dealt from
      const uint64_t kept = m->min_blocks() * world;
      for (size_t i = 0; i < texts.size(); ++i) {
        const uint64_t block = g / seq, n = Stream(texts, {i}).size();
        if (block < kept) expect[block % world].push_back((block / world) * seq + g % seq);
        if (block < kept && (g + n - 1) / seq != block) ++split[block % world];
        g += n;
      }
    } else {
      std::vector<uint64_t> at(world, 0);
      for (size_t i = 0; i < texts.size(); ++i) {
        const int r = OwnerOf(mode, i, texts.size(), static_cast<int>(world));
        const uint64_t n = Stream(texts, {i}).size();
        if (at[r] < m->ranks[r].blocks * seq) expect[r].push_back(at[r]);
        if (at[r] < m->ranks[r].blocks * seq && (at[r] + n - 1) / seq != at[r] / seq) ++split[r];
        at[r] += n;
      }
    }
    uint64_t all_split = 0;
    for (int r = 0; r < static_cast<int>(world); ++r) {
      EXPECT_EQ(m->ranks[r].split_documents, split[r]) << "rank " << r;
      EXPECT_EQ(m->ranks[r].padding_tokens, 0u);
      all_split += split[r];
    }
    EXPECT_GT(all_split, 0u);
    EXPECT_EQ(m->total_split_documents, all_split);
    for (int r = 0; r < static_cast<int>(world); ++r) {
      EXPECT_EQ(ReadDocs("docs", r), expect[r]) << "rank " << r;
      EXPECT_EQ(m->ranks[r].docs_file, DocsFileName(r));
      EXPECT_EQ(m->ranks[r].documents, expect[r].size());
      std::string bytes = *ReadFile(o.out_dir + "/" + DocsFileName(r));
      EXPECT_EQ(m->ranks[r].docs_xxh3, XXH3_64bits(bytes.data(), bytes.size()));
    }
    auto report = Inspect(o.out_dir, 2);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok());
    for (const auto& rc : report->ranks) {
      EXPECT_EQ(rc.documents, m->ranks[static_cast<size_t>(rc.rank)].documents);
      EXPECT_EQ(rc.pads, 0u);  // sequential packing writes no padding
    }
  }
}

// A record longer than a block: its start is listed once; the blocks it runs
// on into begin their segments implicitly, with no entry of their own.
TEST_F(PackerTest, ARecordLongerThanABlockIsListedOnceAtItsStart) {
  std::string long_text;
  for (int k = 0; k < 12; ++k) long_text += "hello world ";
  std::vector<std::string> texts = {"hi", long_text, "hello"};
  std::string in = WriteInput("long.jsonl", texts);
  PackOptions o = Options({in}, "long", 1, 8);
  o.shard = ShardMode::kContiguous;
  auto m = Pack(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const uint64_t a = Stream(texts, {0}).size(), b = Stream(texts, {1}).size();
  ASSERT_GT(b, 16u);
  std::vector<uint64_t> expect = {0, a};
  if (a + b < m->ranks[0].blocks * 8) expect.push_back(a + b);
  EXPECT_EQ(ReadDocs("long", 0), expect);
}

// A bfd pack, split at its docs entries and block starts with the padding cut
// off: the segments are the records' pieces (a record, or seq_len pieces of a
// longer one and its rest), each exactly once; padding is EOS with mask 0.
TEST_F(PackerTest, BfdBlocksHoldEveryRecordsPiecesOncePaddedWithEos) {
  auto texts = Texts(80);
  for (int i = 0; i < 80; i += 9) {
    for (int k = 0; k < 6 + i % 4; ++k) texts[i] += " hello world héllo";
  }
  std::string in = WriteInput("a.jsonl", texts);
  const size_t seq = 16;
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kStrided, ShardMode::kBalanced}) {
    SCOPED_TRACE(std::string(ShardModeName(mode)));
    PackOptions o = Options({in}, "bfd", 3, static_cast<int>(seq));
    o.shard = mode;
    o.packing = Packing::kBfd;
    o.packing_seed = 4;
    o.loss_mask = LossMask::kAssistant;  // text trains everywhere: padding is the mask's 0s
    auto m = Pack(o);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->packing, Packing::kBfd);
    std::multiset<std::vector<int32_t>> got;
    uint64_t padding = 0, split = 0;
    for (int r = 0; r < 3; ++r) {
      const auto ids = ReadRank("bfd", r);
      const auto docs = ReadDocs("bfd", r);
      const std::string mask = *ReadFile(o.out_dir + "/" + MaskFileName(r));
      std::set<uint64_t> cuts, pads;
      for (uint64_t e : docs) (IsPadEntry(e) ? pads : cuts).insert(EntryOffset(e));
      for (uint64_t b = 0; b * seq < ids.size(); ++b) cuts.insert(b * seq);
      uint64_t rank_padding = 0;
      for (auto it = cuts.begin(); it != cuts.end(); ++it) {
        const uint64_t a = *it, block_end = (a / seq + 1) * seq;
        uint64_t e = std::next(it) == cuts.end() ? ids.size() : std::min(*std::next(it), block_end);
        auto pad = pads.lower_bound(a);
        if (pad != pads.end() && *pad < e) {
          for (uint64_t k = *pad; k < block_end; ++k) {
            EXPECT_EQ(ids[k], 261) << "a pad token that is not EOS at " << k;
            EXPECT_EQ(mask[k], 0) << "a pad token that trains at " << k;
          }
          rank_padding += block_end - *pad;
          e = *pad;
        }
        got.insert(std::vector<int32_t>(ids.begin() + a, ids.begin() + e));
      }
      EXPECT_EQ(m->ranks[r].padding_tokens, rank_padding);
      EXPECT_EQ(m->ranks[r].documents + pads.size(), docs.size());
      padding += rank_padding;
      split += m->ranks[r].split_documents;
    }
    EXPECT_EQ(m->total_padding_tokens, padding);
    std::multiset<std::vector<int32_t>> want;
    uint64_t want_split = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto rec = Stream(texts, {i});
      want_split += rec.size() > seq;
      for (size_t at = 0; at < rec.size(); at += seq) {
        want.insert(
            std::vector<int32_t>(rec.begin() + at, rec.begin() + std::min(rec.size(), at + seq)));
      }
    }
    ASSERT_GT(want_split, 5u);
    if (mode == ShardMode::kBalanced) {
      // Every segment is a piece; the pieces of the unfinished round are the tail.
      uint64_t missing = 0;
      for (const auto& seg : got) {
        auto it = want.find(seg);
        ASSERT_NE(it, want.end()) << "a segment that is no record's piece";
        want.erase(it);
      }
      for (const auto& p : want) missing += p.size();
      EXPECT_EQ(missing, m->total_dropped_tokens);
      EXPECT_LE(split, want_split);
    } else {
      EXPECT_EQ(got, want);
      EXPECT_EQ(split, want_split);
      EXPECT_EQ(m->total_dropped_tokens, 0u);  // every bin is kept, padded
    }
    EXPECT_EQ(m->total_split_documents, split);
    auto report = Inspect(o.out_dir, 2);
    ASSERT_TRUE(report.ok());
    for (const auto& rc : report->ranks) {
      for (const auto& p : rc.problems) ADD_FAILURE() << p;
    }
    EXPECT_TRUE(report->ok());
    EXPECT_EQ(List("bfd").count(".rank-spill.i32"), 0u);
    for (const auto& name : List("bfd")) EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  }
}

TEST_F(PackerTest, BfdIsDeterministicForASeedWhateverTheThreadCount) {
  auto texts = Texts(120);
  std::string in = WriteInput("a.jsonl", texts);
  PackOptions a = Options({in}, "s1", 2, 16), b = Options({in}, "s2", 2, 16),
              c = Options({in}, "s3", 2, 16);
  for (PackOptions* o : {&a, &b, &c}) o->packing = Packing::kBfd;
  a.threads = 1;
  b.threads = 2;
  b.chunk_bytes = 512;
  c.packing_seed = 1;
  auto ma = Pack(a), mb = Pack(b), mc = Pack(c);
  ASSERT_TRUE(ma.ok() && mb.ok() && mc.ok());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ReadRank("s1", r), ReadRank("s2", r));
    EXPECT_EQ(ReadDocs("s1", r), ReadDocs("s2", r));
    EXPECT_EQ(ma->ranks[r].padding_tokens, mc->ranks[r].padding_tokens);  // the same fill
  }
  EXPECT_NE(ReadRank("s1", 0), ReadRank("s3", 0));  // another seed: ties in another order
  EXPECT_EQ(mc->packing_seed, 1u);
}

TEST_F(PackerTest, BfdNodeRangesAreByteIdenticalToTheFullPack) {
  auto texts = Texts(90);
  std::string in = WriteInput("a.jsonl", texts);
  for (ShardMode mode : {ShardMode::kContiguous, ShardMode::kBalanced}) {
    PackOptions full = Options({in}, "bfull", 4, 16), n1 = Options({in}, "bn1", 4, 16);
    full.shard = n1.shard = mode;
    full.packing = n1.packing = Packing::kBfd;
    n1.rank_lo = 2, n1.rank_hi = 3;
    auto mf = Pack(full), m1 = Pack(n1);
    ASSERT_TRUE(mf.ok() && m1.ok());
    for (int r = 2; r < 4; ++r) {
      EXPECT_EQ(ReadRank("bn1", r), ReadRank("bfull", r));
      EXPECT_EQ(ReadDocs("bn1", r), ReadDocs("bfull", r));
      EXPECT_EQ(m1->ranks[static_cast<size_t>(r - 2)].padding_tokens, mf->ranks[r].padding_tokens);
    }
  }
}

// The spill goes through the Env like every write: a fault there names its
// file, leaves the previous pack whole and no temp file; a re-run completes.
TEST_F(PackerTest, ASpillWriteFaultKeepsTheOldPackAndLeavesNoTemp) {
  std::string in = WriteInput("a.jsonl", Texts(60));
  int n = 0;
  int injected = 0;
  for (const WriteFault& fault : WriteFaults(".rank-spill.i32")) {
    SCOPED_TRACE(fault.name);
    std::string out = "spill" + std::to_string(n++);
    PackOptions o = Options({in}, out, 2, 16);
    o.packing = Packing::kBfd;
    auto old_pack = Pack(o);
    ASSERT_TRUE(old_pack.ok()) << old_pack.status().message();
    FaultInjectionEnv env(Env::Default());
    env.Add(fault.rule);
    o.env = &env;
    auto m = Pack(o);
    if (env.injected() == 0) continue;  // (a rename the spill never makes)
    ++injected;
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find(".rank-spill.i32"), std::string::npos)
        << m.status().message();
    for (const auto& name : List(out)) EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
    EXPECT_TRUE(Inspect(o.out_dir)->ok());
    env.Clear();
    ASSERT_TRUE(Pack(o).ok());
  }
  EXPECT_GE(injected, 5);  // open, write ENOSPC and EIO, short write, fsync, close
}

TEST_F(PackerTest, SequentialCountsSplitDocumentsAndNoPadding) {
  auto texts = Texts(40);
  std::string in = WriteInput("a.jsonl", texts);
  PackOptions o = Options({in}, "seqc", 1, 8);
  o.shard = ShardMode::kContiguous;
  auto m = Pack(o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  uint64_t at = 0, split = 0;
  const uint64_t tokens = m->ranks[0].blocks * 8;
  for (size_t i = 0; i < texts.size(); ++i) {
    const uint64_t n = Stream(texts, {i}).size();
    // Starts in a kept block and reaches past that block's end.
    if (at < tokens && at / 8 != (at + n - 1) / 8) ++split;
    at += n;
  }
  EXPECT_EQ(m->ranks[0].split_documents, split);
  EXPECT_EQ(m->total_split_documents, split);
  EXPECT_EQ(m->total_padding_tokens, 0u);
  EXPECT_EQ(m->packing, Packing::kSequential);
}

TEST_F(PackerTest, InspectCatchesDamagedDocsNamingTheFileAndTheByte) {
  auto texts = Texts(30);
  std::string in = WriteInput("a.jsonl", texts);
  PackOptions o = Options({in}, "ddmg", 2, 8);
  ASSERT_TRUE(Pack(o).ok());
  const std::string path = o.out_dir + "/" + DocsFileName(1);
  const std::string good = *ReadFile(path);
  ASSERT_GE(good.size(), 24u);
  auto problems = [&](const std::string& bytes) {
    EXPECT_TRUE(WriteFileAtomic(path, bytes).ok());
    auto r = Inspect(o.out_dir);
    EXPECT_TRUE(r.ok());
    EXPECT_FALSE(r->ok());
    std::string all;
    for (const auto& p : r->ranks[1].problems) all += p + "\n";
    return all;
  };
  std::string swapped = good;  // entries 1 and 2 swapped: same count, out of order
  std::swap_ranges(swapped.begin() + 8, swapped.begin() + 16, swapped.begin() + 16);
  std::string msg = problems(swapped);
  EXPECT_NE(msg.find("rank-00001.docs: checksum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank-00001.docs: byte 16: entry 2"), std::string::npos) << msg;
  msg = problems(good.substr(0, good.size() - 3));
  EXPECT_NE(msg.find("is not a whole number of 8-byte entries"), std::string::npos) << msg;
  msg = problems(good.substr(0, good.size() - 8));
  EXPECT_NE(msg.find("document starts, manifest says"), std::string::npos) << msg;
  std::string padded = good;  // the last entry made a pad start: fewer documents
  padded[padded.size() - 1] = static_cast<char>(0x80);
  msg = problems(padded);
  EXPECT_NE(msg.find("rank-00001.docs: checksum"), std::string::npos) << msg;
  msg = problems("");
  EXPECT_NE(msg.find("rank-00001.docs: 0 document starts"), std::string::npos) << msg;
  ::unlink(path.c_str());
  auto r = Inspect(o.out_dir);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok());
  EXPECT_NE(r->ranks[1].problems.front().find("rank-00001.docs"), std::string::npos);
  EXPECT_TRUE(WriteFileAtomic(path, good).ok());
  EXPECT_TRUE(Inspect(o.out_dir)->ok());
}

// A failed write (rank file or manifest, each way a write fails) is an error
// naming the file and the operation; what it leaves is the previous pack whole
// or no manifest at all, never a manifest over ranks it does not describe, and
// no temp file; a re-run without the fault completes.
TEST_F(PackerTest, EveryWriteFaultLeavesNothingThatLooksComplete) {
  auto old_texts = Texts(30);
  auto new_texts = Texts(41);
  std::string old_in = WriteInput("old.jsonl", old_texts);
  std::string new_in = WriteInput("new.jsonl", new_texts);
  int n = 0;
  for (std::string target :
       {"rank-00001.i32", "rank-00001.mask", "rank-00001.docs", "manifest.json"}) {
    for (const WriteFault& fault : WriteFaults(target)) {
      SCOPED_TRACE(target + " " + fault.name);
      std::string out = "fault" + std::to_string(n++);
      PackOptions before = Options({old_in}, out, 4, 8);
      before.loss_mask = LossMask::kAssistant;
      auto old_pack = Pack(before);
      ASSERT_TRUE(old_pack.ok()) << old_pack.status().message();
      FaultInjectionEnv env(Env::Default());
      env.Add(fault.rule);
      PackOptions o = Options({new_in}, out, 4, 8);
      o.loss_mask = LossMask::kAssistant;  // the mask files are written (and faulted) too
      o.env = &env;
      auto m = Pack(o);
      ASSERT_FALSE(m.ok());
      EXPECT_EQ(env.injected(), 1);
      const std::string& msg = m.status().message();
      EXPECT_NE(msg.find(o.out_dir + "/" + target), std::string::npos) << msg;
      for (const auto& e : fault.expect) EXPECT_NE(msg.find(e), std::string::npos) << msg;
      // Either the old pack, whole, or no manifest; never a temp file. A rank file
      // that fails before its rename (every rank is fsynced before the old manifest
      // goes) leaves the old pack whole.
      for (const auto& name : List(out)) EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
      auto left = ReadManifest(o.out_dir);
      if (target != "manifest.json" && fault.name != "rename_eio") {
        EXPECT_TRUE(left.ok()) << "the old pack was lost: " << left.status().message();
      }
      if (left.ok()) {
        EXPECT_EQ(left->total_records, old_pack->total_records);
        auto report = Inspect(o.out_dir);
        ASSERT_TRUE(report.ok());
        EXPECT_TRUE(report->ok());
      } else {
        EXPECT_EQ(left.status().code(), StatusCode::kNotFound) << left.status().message();
      }
      env.Clear();
      auto again = Pack(o);
      ASSERT_TRUE(again.ok()) << again.status().message();
      EXPECT_EQ(again->total_records, new_texts.size());
      EXPECT_TRUE(Inspect(o.out_dir)->ok());
    }
  }
}

// Faults the packer meets before any rank is published keep the old pack.
TEST_F(PackerTest, FaultBeforePublishKeepsTheOldPack) {
  std::string in = WriteInput("a.jsonl", Texts(30));
  std::string other = WriteInput("b.jsonl", Texts(12));
  auto old_pack = Pack(Options({in}, "keep", 2, 8));
  ASSERT_TRUE(old_pack.ok());
  for (FaultRule rule : {FaultRule::ShortWrite("rank-00000", 5),
                         FaultRule::Fail(FileOp::kRemove, "/manifest.json", EACCES),
                         FaultRule::Fail(FileOp::kOpen, "rank-00001", ENOSPC)}) {
    SCOPED_TRACE(std::string(FileOpName(rule.op)));
    FaultInjectionEnv env(Env::Default());
    env.Add(rule);
    PackOptions o = Options({other}, "keep", 2, 8);
    o.env = &env;
    auto m = Pack(o);
    ASSERT_FALSE(m.ok());
    auto left = ReadManifest(o.out_dir);
    ASSERT_TRUE(left.ok()) << left.status().message();
    EXPECT_EQ(left->ranks[0].xxh3, old_pack->ranks[0].xxh3);
    EXPECT_EQ(left->ranks[1].xxh3, old_pack->ranks[1].xxh3);
    EXPECT_TRUE(Inspect(o.out_dir)->ok());
    EXPECT_EQ(List("keep"),
              (std::set<std::string>{"manifest.json", "rank-00000.docs", "rank-00000.i32",
                                     "rank-00001.docs", "rank-00001.i32"}));
  }
}

TEST_F(PackerTest, OutputDirectoryThatCannotBeMadeIsNamed) {
  std::string in = WriteInput("a.jsonl", Texts(3));
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kCreateDirs, "nodir", EACCES));
  PackOptions o = Options({in}, "nodir", 2, 8);
  o.env = &env;
  auto m = Pack(o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(o.out_dir + ": create directory: Permission denied"),
            std::string::npos)
      << m.status().message();
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
