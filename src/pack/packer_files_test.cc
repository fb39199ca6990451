// The packer's files (block files, max_id, docs, bfd bins) against damage and write
// faults; routing, sharding and inputs are packer_test.cc's.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <set>

#include "core/fault_env.h"
#include "core/file.h"
#include "pack/packer.h"
#include "pack/packer_testing.h"
#include "packfile/inspect.h"
#include "packfile/layout.h"

namespace ek::pack {
namespace {

using testing::PackerTest;

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

}  // namespace
}  // namespace ek::pack
