// One file over 600 lines: the gate's tests share one fixture (a pack, model and run on disk).
#include "gate/gate.h"

#include <dirent.h>
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <functional>
#include <map>

#include "ckpt/checkpoint.h"
#include "ckpt/test_util.h"
#include "core/fault_env.h"
#include "core/file.h"
#include "gate/isolation.h"
#include "pack/packer.h"
#include "packfile/manifest.h"
#include "run/plan.h"
#include "tokenize/tiny_tokenizer_testing.h"

namespace ek::gate {
namespace {

using run::FormatBytes;

class GateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_gate_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/tokenizer.json", tokenize::testing::TinyJson()).ok());
    std::string body;
    for (int i = 0; i < 60; ++i)
      body += "{\"text\": \"hello world number " + std::to_string(i) + std::string(i % 7, 'x') +
              "\"}\n";
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/in.jsonl", body).ok());
    MakePack("uneven", pack::ShardMode::kContiguous);
    MakePack("even", pack::ShardMode::kBalanced);
    env_.env = &machine_;
    machine_.SetHostName("test-host");
    vars_["TORCH_FR_BUFFER_SIZE"] = "2000";
  }

  void MakePack(const std::string& name, pack::ShardMode mode) {
    pack::PackOptions o;
    o.tokenizer_path = dir_ + "/tokenizer.json";
    o.inputs = {dir_ + "/in.jsonl"};
    o.out_dir = dir_ + "/" + name;
    o.world = 4;
    o.seq_len = 8;
    o.shard = mode;
    o.eos_token = "<|x|>";
    auto m = pack::Pack(o);
    ASSERT_TRUE(m.ok()) << m.status().message();
  }

  RunFile Run(const std::string& pack) {
    RunFile r;
    r.name = "t";
    r.nodes = 2;
    r.gpus_per_node = 2;
    r.pack_dir = dir_ + "/" + pack;
    r.seq_len = 8;
    r.micro_batch = 1;
    r.grad_accum = 2;
    r.save_every = 3;
    r.params = 1e6;
    r.memory_gb = 80;
    r.checkpoint_dir = dir_ + "/ckpt";
    r.watchdog_timeout_min = 30;
    // The fixture's model is a parameter count, which the isolation probe cannot build:
    // the isolation check's own tests (GateIsolationTest) set "isolated" and a config.
    r.attention = "cross";
    return r;
  }

  Check Get(const GateReport& rep, const std::string& name) {
    for (const auto& c : rep.checks) {
      if (c.name == name) return c;
    }
    static Check none;
    ADD_FAILURE() << "no check " << name;
    return none;
  }

  GateReport Gate(const RunFile& r, int node = -1) {
    machine_.SetVars(vars_);
    if (free_bytes_) machine_.SetFreeBytes(free_bytes_());
    auto rep = RunGate(r, node, env_);
    EXPECT_TRUE(rep.ok()) << rep.status().message();
    return rep.ok() ? *rep : GateReport{};
  }

  std::string dir_;
  std::map<std::string, std::string> vars_;
  std::function<std::optional<double>()> free_bytes_;  // unset: the disk's
  FaultInjectionEnv machine_{Env::Default()};
  GateEnv env_;
};

TEST_F(GateTest, BalancedPackPassesEverything) {
  GateReport rep = Gate(Run("even"));
  EXPECT_EQ(rep.checks.size(), 7u);
  for (const auto& c : rep.checks)
    EXPECT_EQ(c.verdict, Verdict::kPass) << c.name << ": " << c.reason;
  EXPECT_EQ(rep.overall(), Verdict::kPass);
  // The pass log round-trips.
  auto back = GateReportFromJson(GateReportToJson(rep), "log.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(GateReportToJson(*back), GateReportToJson(rep));
}

TEST_F(GateTest, UnevenPackWarnsWithEvenfixTargetUnderMaxDropPct) {
  RunFile r = Run("uneven");
  r.evenfix_max_drop_pct = 100;
  GateReport rep = Gate(r);
  const Check b = Get(rep, "balance");
  EXPECT_EQ(b.verdict, Verdict::kWarn);
  EXPECT_NE(b.reason.find("evenfix pins every rank to"), std::string::npos) << b.reason;
  EXPECT_GT(b.numbers.at("spread"), 0);
  EXPECT_EQ(rep.overall(), Verdict::kWarn);
  EXPECT_EQ(rep.global_min_blocks, static_cast<uint64_t>(b.numbers.at("global_min_blocks")));
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0], b.reason);
}

// The drop is the plan's (run::MakePlan over the manifest's ranks); above
// evenfix.max_drop_pct it is a FAIL that says what to do, at or below a WARN.
TEST_F(GateTest, EvenfixDropAboveMaxDropPctFailsWithTheAdvice) {
  RunFile r = Run("uneven");
  auto manifest = pack::ReadManifest(r.pack_dir);
  ASSERT_TRUE(manifest.ok());
  auto plan = run::MakePlan(r, run::ModelShape{}, &*manifest);
  ASSERT_TRUE(plan.ok());
  const double pct = 100 * plan->schedule.dropped_fraction;
  ASSERT_GT(pct, 1.0) << "the uneven fixture should drop more than the default 1%";
  // The default: 1%.
  const Check over = Get(Gate(r), "balance");
  EXPECT_EQ(over.verdict, Verdict::kFail) << over.reason;
  EXPECT_NE(over.reason.find(fmt::format("({:.3f}% of the data)", pct)), std::string::npos)
      << over.reason;
  EXPECT_NE(over.reason.find("more than evenfix.max_drop_pct 1%"), std::string::npos)
      << over.reason;
  EXPECT_NE(over.reason.find("re-pack with --shard balanced"), std::string::npos) << over.reason;
  EXPECT_NE(over.reason.find("evenfix.mode = \"pad\""), std::string::npos) << over.reason;
  EXPECT_DOUBLE_EQ(over.numbers.at("evenfix_dropped_pct"), pct);
  EXPECT_EQ(over.numbers.at("evenfix_dropped_tokens"),
            static_cast<double>(plan->schedule.dropped_tokens));
  // Just above the drop: a WARN; just below: a FAIL.
  r.evenfix_max_drop_pct = pct + 0.001;
  EXPECT_EQ(Get(Gate(r), "balance").verdict, Verdict::kWarn);
  r.evenfix_max_drop_pct = pct - 0.001;
  EXPECT_EQ(Get(Gate(r), "balance").verdict, Verdict::kFail);
  // Pad drops nothing: no FAIL even with a limit of 0.
  r.evenfix_max_drop_pct = 0;
  r.evenfix = EvenfixMode::kPad;
  const Check pad = Get(Gate(r), "balance");
  EXPECT_EQ(pad.verdict, Verdict::kWarn) << pad.reason;
  EXPECT_NE(pad.reason.find("evenfix pad repeats"), std::string::npos) << pad.reason;
  // A balanced pack drops nothing either.
  RunFile even = Run("even");
  even.evenfix_max_drop_pct = 0;
  EXPECT_EQ(Get(Gate(even), "balance").verdict, Verdict::kPass);
}

TEST_F(GateTest, UnevenPackWithoutEvenfixFails) {
  RunFile r = Run("uneven");
  r.evenfix = EvenfixMode::kOff;
  const Check b = Get(Gate(r), "balance");
  EXPECT_EQ(b.verdict, Verdict::kFail);
  EXPECT_NE(b.reason.find("deadlock"), std::string::npos);
}

TEST_F(GateTest, DataFailures) {
  // A flipped byte: checksum mismatch.
  std::string f = dir_ + "/even/rank-00001.i32";
  std::string data = *ReadFile(f);
  data[5] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(f, data).ok());
  const Check c = Get(Gate(Run("even")), "data");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.reason.find("checksum"), std::string::npos) << c.reason;
  // A missing file.
  ::unlink(f.c_str());
  EXPECT_NE(Get(Gate(Run("even")), "data").reason.find("rank-00001.i32"), std::string::npos);
  // No manifest at all.
  RunFile none = Run("nowhere");
  GateReport rep = Gate(none);
  EXPECT_EQ(Get(rep, "data").verdict, Verdict::kFail);
  EXPECT_EQ(rep.overall(), Verdict::kFail);
  // A seq_len that does not match the pack.
  RunFile seq = Run("uneven");
  seq.seq_len = 16;
  EXPECT_NE(Get(Gate(seq), "data").reason.find("seq_len"), std::string::npos);
}

// The docs files are checked as the masks are: size, checksum, order, count,
// each failure naming the file (and the byte of the first bad entry).
TEST_F(GateTest, DamagedDocsFilesFailTheDataCheckNamingThem) {
  const Check ok = Get(Gate(Run("even")), "data");
  EXPECT_EQ(ok.verdict, Verdict::kPass) << ok.reason;
  EXPECT_NE(ok.reason.find("document boundaries"), std::string::npos) << ok.reason;
  EXPECT_GT(ok.numbers.at("documents"), 0);
  std::string f = dir_ + "/even/rank-00002.docs";
  const std::string good = *ReadFile(f);
  ASSERT_GE(good.size(), 16u);
  ASSERT_TRUE(WriteFileAtomic(f, good.substr(0, good.size() - 4)).ok());
  Check c = Get(Gate(Run("even")), "data");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  ASSERT_EQ(c.problems.size(), 2u) << c.reason;
  EXPECT_EQ(c.problems[0].find("rank-00002.docs: checksum"), 0u) << c.problems[0];
  EXPECT_EQ(c.problems[1].find("rank-00002.docs: "), 0u) << c.problems[1];
  EXPECT_NE(c.problems[1].find("is not a whole number of 8-byte entries"), std::string::npos)
      << c.problems[1];
  std::string swapped = good;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
  ASSERT_TRUE(WriteFileAtomic(f, swapped).ok());
  c = Get(Gate(Run("even")), "data");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  bool named = false;
  for (const auto& p : c.problems) named |= p.find("rank-00002.docs: byte 8: entry 1") == 0;
  EXPECT_TRUE(named) << c.reason;
  ::unlink(f.c_str());
  c = Get(Gate(Run("even")), "data");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.reason.find("rank-00002.docs"), std::string::npos) << c.reason;
}

TEST_F(GateTest, OutOfVocabularyTokenFails) {
  std::string f = dir_ + "/even/rank-00002.i32";
  std::string data = *ReadFile(f);
  int32_t big = 1 << 20;
  std::memcpy(data.data(), &big, 4);
  ASSERT_TRUE(WriteFileAtomic(f, data).ok());
  const Check c = Get(Gate(Run("even")), "data");
  EXPECT_EQ(c.verdict, Verdict::kFail);
}

TEST_F(GateTest, ScheduleFailures) {
  RunFile world = Run("even");
  world.gpus_per_node = 4;  // world 8, pack world 4
  EXPECT_NE(Get(Gate(world), "schedule").reason.find("pack was made for world 4"),
            std::string::npos);
  RunFile zero = Run("even");
  zero.grad_accum = 1000;
  EXPECT_NE(Get(Gate(zero), "schedule").reason.find("0 steps per epoch"), std::string::npos);
  RunFile warm = Run("even");
  warm.warmup_steps = 1000;
  const Check w = Get(Gate(warm), "schedule");
  EXPECT_EQ(w.verdict, Verdict::kFail);
  EXPECT_NE(w.reason.find("warmup"), std::string::npos);
  RunFile nosave = Run("even");
  nosave.save_every = 0;
  EXPECT_EQ(Get(Gate(nosave), "schedule").verdict, Verdict::kWarn);
  RunFile late = Run("even");
  late.save_every = 100000;
  EXPECT_EQ(Get(Gate(late), "schedule").verdict, Verdict::kWarn);
}

TEST_F(GateTest, MemoryPaths) {
  RunFile big = Run("even");
  big.params = 70e9;
  const Check c = Get(Gate(big), "memory");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.reason.find("exceeds"), std::string::npos);
  RunFile unknown = Run("even");
  unknown.memory_gb = 0;
  EXPECT_EQ(Get(Gate(unknown), "memory").verdict, Verdict::kWarn);
  // NVML's figure wins over the run file.
  env_.gpus.available = true;
  env_.gpus.memory_bytes = 1e3;
  EXPECT_EQ(Get(Gate(Run("even")), "memory").verdict, Verdict::kFail);
}

TEST_F(GateTest, StoragePaths) {
  RunFile file_as_dir = Run("even");
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/afile", "x").ok());
  file_as_dir.checkpoint_dir = dir_ + "/afile/ckpt";
  EXPECT_EQ(Get(Gate(file_as_dir), "storage").verdict, Verdict::kFail);
  RunFile huge = Run("even");
  huge.params = 1e17;  // 200 PB per checkpoint
  const Check c = Get(Gate(huge), "storage");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.reason.find("free"), std::string::npos) << c.reason;
}

// The rule: a save writes a whole checkpoint before the oldest is pruned, so keep + 1
// copies at the peak, less the verified ones already there as the saves prune them.
TEST(SaveSpaceTest, KeepPlusOneLessWhatThePrunesFree) {
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(10, 2, {}), 30);    // 3 x S
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(10, 2, {10}), 20);  // (2 + 1 - 1) x S
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(10, 2, {10, 10}),
                   10);  // (2 + 1 - 2) x S: the first save's own copy
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(10, 1, {}), 20);
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(10, 3, {10, 10}), 20);
  // A large one already there is pruned only at the second save: the first two need 2 x S.
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(10, 2, {50}), 20);
  // Small ones free little: at the third save all are gone, 3 x S less their 4.
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(10, 2, {2, 2}), 26);
  EXPECT_DOUBLE_EQ(SaveSpaceNeeded(0, 2, {5}), 0);
}

// A run whose model directory has a large tokenizer.json: every checkpoint copies it,
// so the storage check must plan it (the field's plan counted 2 B/param alone).
TEST_F(GateTest, StoragePlansTheCheckpointAsWrittenAndKeepPlusOneCopies) {
  const std::string model = dir_ + "/model";
  ASSERT_TRUE(MakeDirs(model).ok());
  ASSERT_TRUE(WriteFileAtomic(model + "/config.json", R"({"model_type": "qwen3", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": true})")
                  .ok());
  // The pack's own tokenizer (so the data check passes), made 4 MB by trailing spaces.
  ASSERT_TRUE(WriteFileAtomic(model + "/tokenizer.json",
                              tokenize::testing::TinyJson() + std::string(4'000'000, ' '))
                  .ok());
  ASSERT_TRUE(WriteFileAtomic(model + "/model.safetensors", std::string(64, '\0')).ok());
  RunFile r = Run("even");
  r.params = 0;
  r.model_path = model;
  double free_bytes = 0;
  free_bytes_ = [&free_bytes] { return std::optional<double>(free_bytes); };
  auto plan = run::MakePlan(r, *run::ModelForRun(r), nullptr);
  ASSERT_TRUE(plan.ok());
  const double size = plan->checkpoint_bytes;
  EXPECT_GT(size, 4e6 + plan->checkpoint_weight_bytes);  // the tokenizer is in it
  EXPECT_GT(plan->checkpoint_weight_bytes, 2 * plan->params);

  free_bytes = 3 * size - 1;  // enough for keep 2, not for the third copy a save writes first
  Check c = Get(Gate(r), "storage");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  const std::string s = FormatBytes(size);
  EXPECT_NE(c.reason.find(fmt::format("needs 3 x {} (keep 2 + 1 during a save) = {}, {} free", s,
                                      FormatBytes(3 * size), FormatBytes(3 * size - 1))),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("tokenizer.json 4.00 MB"), std::string::npos) << c.reason;
  EXPECT_DOUBLE_EQ(c.numbers["checkpoint_bytes"], size);
  EXPECT_DOUBLE_EQ(c.numbers["checkpoint_need_bytes"], 3 * size);
  EXPECT_DOUBLE_EQ(c.numbers["checkpoint_free_bytes"], 3 * size - 1);
  EXPECT_DOUBLE_EQ(c.numbers["checkpoints_existing"], 0);
  free_bytes = 3 * size;
  c = Get(Gate(r), "storage");
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.reason;
  EXPECT_NE(c.reason.find("needs 3 x " + s), std::string::npos) << c.reason;
  // The distributed check's save time is the whole checkpoint's.
  EXPECT_DOUBLE_EQ(Get(Gate(r), "distributed").numbers["checkpoint_write_s"], size / 1e9);

  // A verified checkpoint already in checkpoint.dir (a resumed run's) is pruned as the
  // saves land: it counts at its real size. A newer one that does not verify counts nothing.
  const std::string ckpt = r.checkpoint_dir;
  ckpt::testing::WriteTrainerFiles(ckpt + "/.step-00000010.tmp-1");
  ASSERT_TRUE(ckpt::FinalizeCheckpoint(ckpt + "/.step-00000010.tmp-1", ckpt + "/step-00000010",
                                       ckpt::testing::SampleMeta(10))
                  .ok());
  ckpt::testing::WriteTrainerFiles(ckpt + "/step-00000020");  // no manifest: not verified
  auto listed = ckpt::ListCheckpoints(ckpt, ckpt::VerifyLevel::kStructure);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  const double existing = static_cast<double>((*listed)[0].bytes);
  free_bytes = 3 * size - existing;  // less than (2 + 1 - 1) x S + ... : the rule's need
  c = Get(Gate(r), "storage");
  EXPECT_DOUBLE_EQ(c.numbers["checkpoints_existing"], 1);
  EXPECT_DOUBLE_EQ(c.numbers["checkpoint_existing_bytes"], existing);
  EXPECT_DOUBLE_EQ(c.numbers["checkpoint_need_bytes"], SaveSpaceNeeded(size, 2, {existing}));
  EXPECT_DOUBLE_EQ(c.numbers["checkpoint_need_bytes"],
                   3 * size - existing);  // small: freed only at the third save
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.reason;
  EXPECT_NE(c.reason.find("less the 1 verified checkpoint(s) already there (step-00000010, "),
            std::string::npos)
      << c.reason;
  free_bytes -= 1;
  EXPECT_EQ(Get(Gate(r), "storage").verdict, Verdict::kFail);
  // Free space that cannot be known is said, not taken for enough.
  free_bytes_ = [] { return std::optional<double>(); };
  c = Get(Gate(r), "storage");
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_NE(c.reason.find("free space unknown"), std::string::npos) << c.reason;
}

TEST_F(GateTest, DistributedSafetyPaths) {
  RunFile low = Run("even");
  low.watchdog_timeout_min = 10;
  const Check t = Get(Gate(low), "distributed");
  EXPECT_EQ(t.verdict, Verdict::kFail);
  EXPECT_NE(t.reason.find("below the floor"), std::string::npos);
  RunFile slow = Run("even");
  slow.params = 2e12;   // 4 TB checkpoint
  slow.write_gbps = 1;  // ~4000 s > 30 min
  EXPECT_NE(Get(Gate(slow), "distributed").reason.find("checkpoint write"), std::string::npos);
  vars_.erase("TORCH_FR_BUFFER_SIZE");
  EXPECT_NE(Get(Gate(Run("even")), "distributed").reason.find("flight recorder off"),
            std::string::npos);
  vars_["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "1000";
  EXPECT_EQ(Get(Gate(Run("even")), "distributed").verdict, Verdict::kPass);
  vars_["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "0";
  EXPECT_EQ(Get(Gate(Run("even")), "distributed").verdict, Verdict::kFail);
  vars_.erase("TORCH_NCCL_DUMP_ON_TIMEOUT");
  env_.gpus.available = true;
  env_.gpus.memory_bytes = 80e9;
  env_.gpus.foreign_processes = 2;
  EXPECT_NE(Get(Gate(Run("even")), "distributed").reason.find("2 foreign process"),
            std::string::npos);
}

TEST_F(GateTest, NodePartsMergeIntoOneVerdict) {
  RunFile r = Run("uneven");
  r.evenfix_max_drop_pct = 100;
  GateReport p0 = Gate(r, 0), p1 = Gate(r, 1);
  EXPECT_EQ(p0.ranks_checked, (std::vector<int>{0, 1}));
  EXPECT_EQ(p1.ranks_checked, (std::vector<int>{2, 3}));
  auto p0b = GateReportFromJson(GateReportToJson(p0), "p0.json");
  auto p1b = GateReportFromJson(GateReportToJson(p1), "p1.json");
  ASSERT_TRUE(p0b.ok() && p1b.ok());
  auto merged = MergeGateReports({*p0b, *p1b}, &r);
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->ranks_checked, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(merged->overall(), Verdict::kWarn);
  EXPECT_EQ(Get(*merged, "balance").verdict, Verdict::kWarn);
  // One node failing fails the run.
  std::string f = dir_ + "/uneven/rank-00003.i32";
  ::unlink(f.c_str());
  auto merged2 = MergeGateReports({Gate(r, 0), Gate(r, 1)}, &r);
  EXPECT_EQ(merged2->overall(), Verdict::kFail);
  EXPECT_EQ(Get(*merged2, "data").verdict, Verdict::kFail);
  EXPECT_EQ(Get(*merged2, "data").problems,
            (std::vector<std::string>{"test-host: rank-00003.i32: " + f +
                                      ": No such file or directory"}));
}

TEST_F(GateTest, MergeOfOneNodeOfTwoFailsNamingTheMissingNodeAndItsRanks) {
  RunFile r = Run("even");
  GateReport p0 = Gate(r, 0), p1 = Gate(r, 1);
  ASSERT_EQ(p0.overall(), Verdict::kPass);
  for (const RunFile* rp :
       {static_cast<const RunFile*>(&r),
        static_cast<const RunFile*>(nullptr)}) {  // with the run file, and from the parts alone
    SCOPED_TRACE(rp ? "with the run file" : "from the parts");
    auto merged = MergeGateReports({p0}, rp);
    ASSERT_TRUE(merged.ok()) << merged.status().message();
    EXPECT_EQ(merged->overall(), Verdict::kFail);
    const Check d = Get(*merged, "data");
    EXPECT_EQ(d.verdict, Verdict::kFail);
    ASSERT_FALSE(d.problems.empty());
    EXPECT_EQ(d.problems[0], "node 1 (ranks 2-3) sent no gate part: 2 of 4 ranks checked");
    EXPECT_EQ(d.reason.rfind("node 1 (ranks 2-3) sent no gate part", 0), 0u) << d.reason;
    auto back = GateReportFromJson(GateReportToJson(*merged), "log.json");
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(Get(*back, "data").problems, d.problems);
  }
  // Hosts named in the run file name the missing node's host too.
  r.hosts = {"node-a", "node-b"};
  auto named = MergeGateReports({Gate(r, 1)}, &r);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(Get(*named, "data").problems[0],
            "node 0 (ranks 0-1, host node-a) sent no gate part: 2 of 4 ranks checked");
  // Consecutive missing nodes are one problem; every gap is named.
  r.hosts.clear();
  GateReport n1 = p1;
  n1.nodes = 5;
  auto gaps = MergeGateReports({n1});
  ASSERT_TRUE(gaps.ok()) << gaps.status().message();
  EXPECT_EQ(
      Get(*gaps, "data").problems,
      (std::vector<std::string>{"node 0 (ranks 0-1) sent no gate part: 2 of 10 ranks checked",
                                "nodes 2-4 (ranks 4-9) sent no gate part: 2 of 10 ranks checked"}));
  // Both parts: the merge is the run's.
  auto both = MergeGateReports({p1, p0}, &r);
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->overall(), Verdict::kPass);
  EXPECT_TRUE(Get(*both, "data").problems.empty());
  EXPECT_EQ(both->ranks_checked, (std::vector<int>{0, 1, 2, 3}));
  // A whole-run log covers every node by itself.
  auto whole = MergeGateReports({Gate(r)}, &r);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->overall(), Verdict::kPass);
}

TEST_F(GateTest, MergeRefusesPartsThatClaimTheSameNodeOrAnotherLayout) {
  RunFile r = Run("even");
  GateReport p0 = Gate(r, 0), p1 = Gate(r, 1);
  GateReport again = p0;
  again.host = "other-host";
  auto dup = MergeGateReports({p0, p1, again}, &r);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dup.status().message(),
            "gate merge: two parts claim node 0: the part of test-host and the part of other-host");
  auto whole_and_part = MergeGateReports({Gate(r), p1}, &r);
  ASSERT_FALSE(whole_and_part.ok());
  EXPECT_NE(whole_and_part.status().message().find("two parts claim node 1"), std::string::npos);
  GateReport beyond = p1;
  beyond.node_rank = 2;
  auto out_of_range = MergeGateReports({p0, beyond}, &r);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_EQ(out_of_range.status().message(),
            "gate merge: the part of test-host is for node 2, but the run has 2 node(s) (0-1)");
  GateReport bigger = p1;
  bigger.nodes = 4;
  auto layout = MergeGateReports({p0, bigger});
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().message(),
            "gate merge: the part of test-host was checked for 4 node(s) x 2 GPU(s), the part of "
            "test-host has 2 x 2");
  // Parts that do not record the layout (an older evenkeel) need the run file.
  GateReport old0 = p0, old1 = p1;
  old0.nodes = old1.nodes = 0;
  old0.gpus_per_node = old1.gpus_per_node = 0;
  auto unknown = MergeGateReports({old0, old1});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("pass --run RUN.toml"), std::string::npos)
      << unknown.status().message();
  EXPECT_TRUE(MergeGateReports({old0, old1}, &r).ok());
}

// A check reports every problem it found: each in the JSON log (and node
// parts), one line each on the terminal up to a cap, with the count past it.
TEST_F(GateTest, EveryProblemOfACheckIsInTheLogAndOnItsOwnLine) {
  for (const char* f : {"rank-00001.i32", "rank-00003.i32"})
    ::unlink((dir_ + "/even/" + f).c_str());
  std::string f2 = dir_ + "/even/rank-00002.i32";
  std::string data = *ReadFile(f2);
  data[5] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(f2, data).ok());
  RunFile r = Run("even");
  r.seq_len = 16;  // and a seq_len that does not match the pack
  GateReport rep = Gate(r);
  const Check d = Get(rep, "data");
  EXPECT_EQ(d.verdict, Verdict::kFail);
  ASSERT_EQ(d.problems.size(), 4u) << d.reason;
  EXPECT_EQ(d.problems[0], "the pack has seq_len 8, the run 16");
  auto missing = [&](const char* f) {
    return fmt::format("{}: {}/even/{}: No such file or directory", f, dir_, f);
  };
  EXPECT_EQ(d.problems[1], missing("rank-00001.i32"));
  EXPECT_NE(d.problems[2].find("rank-00002.i32"), std::string::npos) << d.problems[2];
  EXPECT_EQ(d.problems[3], missing("rank-00003.i32"));
  EXPECT_EQ(d.reason, "the pack has seq_len 8, the run 16 (and 3 more problem(s))");
  EXPECT_EQ(d.numbers.at("problems"), 4);
  // The log holds all of them and reads back.
  auto back = GateReportFromJson(GateReportToJson(rep), "log.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(Get(*back, "data").problems, d.problems);
  // Text: the reason line, then each problem on its own line.
  std::string text = GateReportToText(rep);
  for (const auto& p : d.problems)
    EXPECT_NE(text.find("\n     - " + p + "\n"), std::string::npos) << text;
  // Schedule: both failures, not just the first.
  RunFile two = Run("even");
  two.gpus_per_node = 4;      // world 8, the pack's 4
  two.warmup_steps = 100000;  // longer than the run
  const Check s = Get(Gate(two), "schedule");
  ASSERT_EQ(s.problems.size(), 2u) << s.reason;
  EXPECT_NE(s.problems[0].find("pack was made for world 4"), std::string::npos);
  EXPECT_NE(s.problems[1].find("warmup"), std::string::npos);
  // A passing check lists none.
  EXPECT_TRUE(Get(rep, "memory").problems.empty());
}

TEST(GateReportTest, TextCapsAProblemListWithTheCount) {
  GateReport r;
  r.run_name = "r";
  Check c;
  c.name = "data";
  c.verdict = Verdict::kFail;
  for (int i = 0; i < 25; ++i) c.problems.push_back(fmt::format("rank-{:05d}.i32: missing", i));
  c.reason = "rank-00000.i32: missing (and 24 more problem(s))";
  r.checks.push_back(c);
  std::string text = GateReportToText(r);
  EXPECT_NE(text.find("     - rank-00019.i32: missing\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("rank-00020.i32"), std::string::npos) << text;
  EXPECT_NE(text.find("     ... and 5 more (all in the JSON log)\n"), std::string::npos) << text;
  std::string all = GateReportToText(r, 100);
  EXPECT_NE(all.find("     - rank-00024.i32: missing\n"), std::string::npos) << all;
  EXPECT_EQ(all.find("more (all in the JSON log)"), std::string::npos) << all;
  auto back = GateReportFromJson(GateReportToJson(r), "log.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->checks[0].problems.size(), 25u);
}

// Regression: a part whose rank_blocks key is not a number aborted `gate merge`
// (std::stoi threw out of the library, exit 134).
TEST(GateReportTest, ABadRankBlocksKeyIsAnErrorNamingIt) {
  GateReport r;
  r.run_name = "r";
  r.host = "h";
  std::string json = GateReportToJson(r);
  auto at = json.find("\"rank_blocks\": {}");
  ASSERT_NE(at, std::string::npos) << json;
  json.replace(at, 17, "\"rank_blocks\": {\"x\": 3}");
  auto bad = GateReportFromJson(json, "part.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "part.json: rank_blocks.x: the key is not a rank number");
  json.replace(json.find("\"x\": 3"), 6, "\"2\": -1");
  auto neg = GateReportFromJson(json, "part.json");
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(), "part.json: rank_blocks.2: not a non-negative integer");
}

// Every field of a gate part is read strictly: a missing required field, a
// mistyped one or one nested wrongly is an error naming the file and the field,
// never a default.
TEST(GateReportTest, MissingMistypedOrMisnestedFieldsAreNamed) {
  GateReport r;
  r.run_name = "r";
  r.host = "h";
  r.node_rank = 0;
  r.hosts = {"h"};
  r.ranks_checked = {0, 1};
  r.rank_blocks = {{0, 5}, {1, 6}};
  r.nodes = 2;
  r.gpus_per_node = 2;
  Check c;
  c.name = "data";
  c.numbers["blocks"] = 11;
  c.verdict = Verdict::kFail;
  c.problems = {"a", "b"};
  r.checks.push_back(c);
  const std::string good = GateReportToJson(r);
  ASSERT_TRUE(GateReportFromJson(good, "p.json").ok());
  auto with = [&](std::string_view from, std::string_view to) {
    std::string j = good;
    size_t at = j.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) j.replace(at, from.size(), to);
    auto back = GateReportFromJson(j, "p.json");
    return back.ok() ? std::string("ok") : back.status().message();
  };
  EXPECT_EQ(with("\"run\": \"r\",", ""), "p.json: run: missing");
  EXPECT_EQ(with("\"run\": \"r\"", "\"run\": 3"), "p.json: run: not a string");
  EXPECT_EQ(with("\"node_rank\": 0", "\"node_rank\": \"0\""), "p.json: node_rank: not an integer");
  EXPECT_EQ(with("\"host\": \"h\",", ""), "p.json: host: missing");
  EXPECT_EQ(with("\"hosts\": [\"h\"]", "\"hosts\": \"h\""), "p.json: hosts: not an array");
  EXPECT_EQ(with("\"hosts\": [\"h\"]", "\"hosts\": [1]"), "p.json: hosts[0]: not a string");
  EXPECT_EQ(with("\"ranks_checked\": [0, 1]", "\"ranks_checked\": [0, \"1\"]"),
            "p.json: ranks_checked[1]: not an integer");
  EXPECT_EQ(with("\"rank_blocks\": {\"0\": 5, \"1\": 6}", "\"rank_blocks\": [5, 6]"),
            "p.json: rank_blocks: not an object");
  EXPECT_EQ(with("\"0\": 5", "\"0\": {\"x\": 3}"),
            "p.json: rank_blocks.0: not a non-negative integer");
  EXPECT_EQ(with("\"0\": 5", "\"x\": 3"), "p.json: rank_blocks.x: the key is not a rank number");
  EXPECT_EQ(with("\"checks\": [", "\"checks\": 3, \"old\": ["), "p.json: checks: not an array");
  EXPECT_EQ(with("{\"name\": \"data\", ", "{"), "p.json: checks[0].name: missing");
  EXPECT_EQ(with("\"nodes\": 2", "\"nodes\": 0"), "p.json: nodes: 0 is out of range [1, 16777216]");
  EXPECT_EQ(with("\"nodes\": 2,", ""), "p.json: nodes: missing");
  EXPECT_EQ(with("\"nodes\": 2", "\"nodes\": 16777216"),
            "p.json: gpus_per_node: 16777216 nodes x 2 GPUs is more than 16777216 ranks");
  EXPECT_EQ(with("\"gpus_per_node\": 2", "\"gpus_per_node\": \"2\""),
            "p.json: gpus_per_node: not an integer");
  EXPECT_EQ(with("\"problems\": [\"a\", \"b\"]", "\"problems\": \"a\""),
            "p.json: checks[0].problems: not an array");
  EXPECT_EQ(with("\"problems\": [\"a\", \"b\"]", "\"problems\": [\"a\", 2]"),
            "p.json: checks[0].problems[1]: not a string");
  EXPECT_EQ(with("\"verdict\": \"FAIL\"", "\"verdict\": \"MAYBE\""),
            "p.json: checks[0].verdict: 'MAYBE' is not PASS, WARN or FAIL");
  EXPECT_EQ(with("\"blocks\": 11", "\"blocks\": \"11\""),
            "p.json: checks[0].numbers.blocks: not a number");
  EXPECT_EQ(with("\"numbers\": {", "\"numbers\": 1, \"n\": {"),
            "p.json: checks[0].numbers: not an object");
  EXPECT_EQ(with("\"xxh3\": \"0000000000000000\"", "\"xxh3\": 7"),
            "p.json: run_file.xxh3: not a string");
  EXPECT_EQ(with("\"global_min_blocks\": 0", "\"global_min_blocks\": -1"),
            "p.json: global_min_blocks: not a non-negative integer");
  EXPECT_EQ(with("\"seconds\": 0.000", "\"seconds\": true"), "p.json: seconds: not a number");
  EXPECT_EQ(with("{\n  \"run\"", "[{\n  \"run\"").substr(0, 12), "p.json: malf");
  auto not_object = GateReportFromJson("[1]", "p.json");
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.status().message(), "p.json: not a JSON object");
}

// Regression (fuzz_gate): a check name read from a part was written back
// unescaped, so a name holding a control character or a quote made a pass log
// that its own reader refused ("control character in string").
TEST(GateReportTest, CheckNamesAreEscapedWhenWritten) {
  GateReport r;
  r.run_name = "r";
  r.host = "h";
  r.checks.push_back({std::string("bal\0an\"ce\n", 11), Verdict::kPass, "fine", {}, {}});
  auto back = GateReportFromJson(GateReportToJson(r), "log.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->checks.size(), 1u);
  EXPECT_EQ(back->checks[0].name, std::string("bal\0an\"ce\n", 11));
}

std::vector<std::string> TempFilesIn(const std::string& dir) {
  std::vector<std::string> temps;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return temps;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.find(".tmp.") != std::string::npos) temps.push_back(n);
  }
  ::closedir(d);
  return temps;
}

// The pass log and a node part under each way a write fails: the error names
// the file and the operation, the previous log stays whole, a re-run writes.
TEST_F(GateTest, PassLogAndNodePartSurviveEveryWriteFault) {
  RunFile r = Run("even");
  const std::string ckpt = dir_ + "/ckpt";
  struct Target {
    std::string path;
    GateReport report;
    std::string what;
  };
  std::vector<Target> targets = {{ckpt + "/gate-log.json", Gate(r), "gate: pass log"},
                                 {ckpt + "/gate-node-1.json", Gate(r, 1), "gate: node part"}};
  for (Target& t : targets) {
    std::string name = t.path.substr(t.path.rfind('/') + 1);
    for (const WriteFault& fault : WriteFaults(name)) {
      SCOPED_TRACE(name + " " + fault.name);
      t.report.host = "old-host";
      ASSERT_TRUE(WriteGateLog(t.path, t.report).ok());
      FaultInjectionEnv env(Env::Default());
      env.Add(fault.rule);
      t.report.host = "new-host";
      Status st = WriteGateLog(t.path, t.report, &env);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.message().rfind(t.what + ": " + t.path + ": ", 0), 0u) << st.message();
      for (const auto& e : fault.expect)
        EXPECT_NE(st.message().find(e), std::string::npos) << st.message();
      auto text = ReadFile(t.path);
      ASSERT_TRUE(text.ok());
      auto back = GateReportFromJson(*text, t.path);
      ASSERT_TRUE(back.ok()) << back.status().message();
      EXPECT_EQ(back->host, "old-host");
      EXPECT_EQ(back->node_rank, t.report.node_rank);
      EXPECT_TRUE(TempFilesIn(ckpt).empty());
      env.Clear();
      ASSERT_TRUE(WriteGateLog(t.path, t.report, &env).ok());
      EXPECT_EQ(GateReportFromJson(*ReadFile(t.path), t.path)->host, "new-host");
    }
  }
}

TEST_F(GateTest, StorageProbeThatCannotBeWrittenFails) {
  FaultInjectionEnv files(&machine_);
  files.Add(FaultRule::Fail(FileOp::kAppend, ".evenkeel-gate-probe", ENOSPC));
  env_.env = &files;
  const Check c = Get(Gate(Run("even")), "storage");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.reason.find("not writable: " + dir_ + "/ckpt/.evenkeel-gate-probe"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("No space left on device"), std::string::npos) << c.reason;
  files.Clear();
  EXPECT_EQ(Get(Gate(Run("even")), "storage").verdict, Verdict::kPass);
  EXPECT_TRUE(TempFilesIn(dir_ + "/ckpt").empty());
  EXPECT_FALSE(FileExists(dir_ + "/ckpt/.evenkeel-gate-probe"));
}

// The isolation check through GateEnv's probe seam: the verdicts the probe can give, a
// probe that cannot run, an answer that cannot be read, and the cases that run none.
class GateIsolationTest : public GateTest {
 protected:
  void SetUp() override {
    GateTest::SetUp();
    env_.python = "/venv/bin/python";
    env_.isolation_probe = [this](const std::vector<std::string>& argv, double timeout_s) {
      argv_ = argv;
      timeout_s_ = timeout_s;
      ++calls_;
      return answer_;
    };
  }
  RunFile Isolated() {
    RunFile r = Run("even");
    r.attention = "isolated";
    r.config = EK_SOURCE_DIR "/testdata/gate/qwen3-32b-config.json";
    return r;
  }
  static std::string Verdict(const std::string& verdict, const std::string& extra = "") {
    return fmt::format(
        R"({{"verdict": "{}", "model_type": "qwen3", "implementation": "evenkeel_document", )"
        R"("layer": "{}", "layer_index": {}, "max_loss_diff": {}, "max_layer_diff": 1e-7, )"
        R"("tolerance": 1e-5, "message": "m{}", "cached": {}, "seconds": 3.5}})",
        verdict, verdict == "leak" ? "sliding_attention" : "", verdict == "leak" ? 2 : -1,
        verdict == "leak" ? "0.25" : "4e-7", extra, extra == "cached" ? "true" : "false");
  }
  Result<std::string> answer_ = std::string();
  std::vector<std::string> argv_;
  double timeout_s_ = 0;
  int calls_ = 0;
};

TEST_F(GateIsolationTest, CrossPassesWithANoteAndRunsNoProbe) {
  GateReport rep = Gate(Run("even"));
  const Check c = Get(rep, "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kPass);
  EXPECT_NE(c.reason.find("documents attend across boundaries by choice"), std::string::npos)
      << c.reason;
  EXPECT_EQ(calls_, 0);
  EXPECT_EQ(rep.checks.back().name, "isolation");
}

TEST_F(GateIsolationTest, APassingProbeIsAPassAndItsCommandLineIsTheRunsModel) {
  answer_ = "some warning on stderr\n" + Verdict("pass") + "\n";
  GateReport rep = Gate(Isolated());
  const Check c = Get(rep, "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kPass) << c.reason;
  EXPECT_NE(c.reason.find("qwen3 through evenkeel_document"), std::string::npos) << c.reason;
  EXPECT_EQ(c.reason.find("cache"), std::string::npos) << c.reason;
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(argv_,
            (std::vector<std::string>{"/venv/bin/python", "-m", "evenkeel.isolation", "--config",
                                      EK_SOURCE_DIR "/testdata/gate/qwen3-32b-config.json",
                                      "--seq-len", "8", "--attention", "isolated", "--json"}));
  EXPECT_EQ(timeout_s_, kIsolationProbeTimeoutS);
  EXPECT_DOUBLE_EQ(c.numbers.at("probe_seconds"), 3.5);
  EXPECT_EQ(c.numbers.at("cached"), 0);
  answer_ = Verdict("pass", "cached");
  const Check cached = Get(Gate(Isolated()), "isolation");
  EXPECT_NE(cached.reason.find("(verdict from the cache)"), std::string::npos) << cached.reason;
}

TEST_F(GateIsolationTest, ALeakFailsNamingTheModelTheLayerAndWhatToDo) {
  answer_ = Verdict("leak");
  GateReport rep = Gate(Isolated());
  const Check c = Get(rep, "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("qwen3: packing would leak attention across documents"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("first at layer 2, sliding_attention"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("data.attention = \"cross\""), std::string::npos) << c.reason;
  EXPECT_EQ(rep.overall(), ek::gate::Verdict::kFail);
}

TEST_F(GateIsolationTest, ARefusalFailsWithTheProbesMessage) {
  answer_ = Verdict("refused", ": layer 0 is 'linear_attention'");
  const Check c = Get(Gate(Isolated()), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_EQ(c.reason, "m: layer 0 is 'linear_attention'");
}

TEST_F(GateIsolationTest, AProbeThatCannotRunOrDecideIsAFailNeverAPass) {
  answer_ = UnavailableError("python -m evenkeel.isolation: exit 1: ModuleNotFoundError: torch");
  Check c = Get(Gate(Isolated()), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("the isolation probe could not run: python -m evenkeel.isolation: exit "
                          "1: ModuleNotFoundError: torch"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("launch.python"), std::string::npos) << c.reason;
  answer_ = std::string(R"({"verdict": "error", "message": "KeyError: x", "cached": false, )"
                        R"("seconds": 1})");
  c = Get(Gate(Isolated()), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("could not decide: KeyError: x"), std::string::npos) << c.reason;
}

TEST_F(GateIsolationTest, AnUnreadableAnswerIsAFailNamingTheField) {
  answer_ = std::string("Traceback (most recent call last):\nSegmentation fault\n");
  Check c = Get(Gate(Isolated()), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("printed no JSON verdict (last line: Segmentation fault)"),
            std::string::npos)
      << c.reason;
  answer_ = std::string(R"({"verdict": "pass", "message": "m", "cached": "no", "seconds": 1})");
  c = Get(Gate(Isolated()), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("cached"), std::string::npos) << c.reason;
  answer_ = std::string(R"({"verdict": "maybe", "message": "m", "cached": false, "seconds": 1})");
  c = Get(Gate(Isolated()), "isolation");
  EXPECT_NE(c.reason.find("'maybe' is not pass, leak, refused or error"), std::string::npos)
      << c.reason;
  answer_ =
      std::string(R"({"verdict": "pass", "message": "m", "cached": false, "seconds": 1, )"
                  R"("model_type": "qwen3", "layer": "", "layer_index": -1, "tolerance": 1e-5})");
  c = Get(Gate(Isolated()), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("implementation"), std::string::npos) << c.reason;
}

TEST_F(GateIsolationTest, NoModelConfigWarnsNoPythonFailsAndOtherNodesLeaveItToNodeZero) {
  RunFile r = Isolated();
  r.config.clear();
  Check c = Get(Gate(r), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kWarn);
  EXPECT_NE(c.reason.find("isolation not proved: the run names no model config"), std::string::npos)
      << c.reason;
  env_.python.clear();
  r = Isolated();
  r.launch_python = "/no/such/python";
  c = Get(Gate(r), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("the isolation probe cannot run: "), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("launch.python '/no/such/python'"), std::string::npos) << c.reason;
  EXPECT_EQ(calls_, 0);
  answer_ = Verdict("leak");
  c = Get(Gate(Isolated(), 1), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kPass);
  EXPECT_NE(c.reason.find("checked on node 0"), std::string::npos) << c.reason;
  EXPECT_EQ(calls_, 0);
}

TEST_F(GateIsolationTest, AnOlderPackWithoutBoundariesFailsBeforeAnyProbe) {
  // The fixture's packs have docs files; an older pack has neither them nor the fields.
  RunFile r = Isolated();
  const std::string old = dir_ + "/old";
  ASSERT_EQ(std::system(fmt::format("cp -r {}/even {}", dir_, old).c_str()), 0);
  auto text = ReadFile(old + "/manifest.json");
  ASSERT_TRUE(text.ok());
  std::string m = *text;
  // Each rank's , "docs_file": ..., "docs_xxh3": ..., "documents": N (written in that order).
  for (size_t at; (at = m.find("\"docs_file\"")) != std::string::npos;) {
    size_t end = m.find_first_of(",}", m.find("\"documents\"", at));
    ASSERT_NE(end, std::string::npos);
    ASSERT_EQ(m.compare(at - 2, 2, ", "), 0);
    m.erase(at - 2, end - (at - 2));  // with the ", " before it; the ',' or '}' after stays
  }
  ASSERT_TRUE(WriteFileAtomic(old + "/manifest.json", m).ok());
  r.pack_dir = old;
  answer_ = Verdict("pass");
  const Check c = Get(Gate(r), "isolation");
  EXPECT_EQ(c.verdict, ek::gate::Verdict::kFail);
  EXPECT_NE(c.reason.find("the pack has no document boundaries"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("repack it"), std::string::npos) << c.reason;
  EXPECT_EQ(calls_, 0);
  r.attention = "cross";
  EXPECT_EQ(Get(Gate(r), "isolation").verdict, ek::gate::Verdict::kPass);
}

TEST(IsolationProbeSpawn, OutputOnSuccessAndTheExitAndLastLineOtherwise) {
  auto ok = SpawnIsolationProbe({"/bin/sh", "-c", "echo warn >&2; echo '{\"a\": 1}'"}, 30,
                                Clock::Default());
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_NE(ok->find("{\"a\": 1}"), std::string::npos);
  EXPECT_NE(ok->find("warn"), std::string::npos);
  auto bad = SpawnIsolationProbe({"/bin/sh", "-c", "echo 'ImportError: no torch'; exit 3"}, 30,
                                 Clock::Default());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "/bin/sh -m evenkeel.isolation: exit 3: ImportError: no torch");
  auto slow = SpawnIsolationProbe({"/bin/sh", "-c", "sleep 30"}, 0.5, Clock::Default());
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.status().message().find("did not answer within 0.5 s"), std::string::npos)
      << slow.status().message();
}

}  // namespace
}  // namespace ek::gate
