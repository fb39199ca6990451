#include "run/plan.h"

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "core/file.h"

namespace ek::run {
namespace {

// The report's run: Qwen3-32B, 2 nodes x 8 GPUs, seq 2048, micro-batch 1,
// accumulation 8, and a pack whose shortest rank has 30,835 blocks.
RunFile ReportRun() {
  RunFile r;
  r.nodes = 2;
  r.gpus_per_node = 8;
  r.seq_len = 2048;
  r.micro_batch = 1;
  r.grad_accum = 8;
  r.save_every = 500;
  r.params = 32.76e9;
  return r;
}

pack::Manifest ReportManifest() {
  pack::Manifest m;
  m.world = 16;
  m.seq_len = 2048;
  for (int r = 0; r < 16; ++r) {
    pack::RankInfo info;
    info.rank = r;
    info.blocks = 30849;
    m.ranks.push_back(info);
  }
  m.ranks[3].blocks = 30835;   // the short rank of the field report's deadlock
  m.ranks[11].blocks = 30888;  // 53 blocks more
  return m;
}

// The training state's bytes per parameter as the plan counts them (0 until checkpoints
// hold it: kCheckpointsHoldTrainState).
const double kPlanTestStateBytes = kCheckpointsHoldTrainState ? kTrainStateBytesPerParam : 0;

TEST(PlanTest, ReproducesTheReportsFigures) {
  RunFile run = ReportRun();
  auto model = ModelForRun(run);
  ASSERT_TRUE(model.ok());
  pack::Manifest m = ReportManifest();
  auto p = MakePlan(run, *model, &m);
  ASSERT_TRUE(p.ok());
  // 525 GB of states (the report rounds 32.76B x 16 B = 524.2 GB up), 32.8 GB per GPU.
  EXPECT_NEAR(p->state_bytes / 1e9, 525, 1.0);
  EXPECT_EQ(FormatBytes(p->state_bytes_per_gpu), "32.8 GB");
  EXPECT_EQ(p->tokens_per_step, 262144u);
  EXPECT_EQ(p->schedule.steps_per_epoch, 3854u);
  EXPECT_EQ(p->schedule.global_min_blocks, 30835u);
  EXPECT_EQ(Thousands(p->tokens_per_step), "262,144");
  // Checkpoint: bf16 consolidated, 2 B/param (the report's ~62 GB is GiB); with only
  // model.params, 14 shards of 5 GB and the manifest's chunk hashes beside them; and
  // the training state (format 2), 12 B/param: 393 GB more.
  EXPECT_NEAR((p->checkpoint_weight_bytes + p->checkpoint_extra_bytes) / (1ull << 30), 61.0, 0.1);
  EXPECT_DOUBLE_EQ(p->checkpoint_state_bytes, kPlanTestStateBytes * p->params);
  EXPECT_NEAR(p->checkpoint_bytes / (1ull << 30),
              61.0 + kPlanTestStateBytes * p->params / (1ull << 30), 0.1);
  EXPECT_EQ(p->checkpoint_shards, 14);
  EXPECT_FALSE(p->checkpoint_copies_measured);
  // Saves at 500, 1000, ..., 3500 and at the epoch end 3854.
  EXPECT_EQ(p->schedule.save_steps.size(), 8u);
  EXPECT_EQ(p->schedule.save_steps.back(), 3854u);
  // evenfix drops (30849-30835) x 14 + 0 + (30888-30835) blocks.
  EXPECT_EQ(p->schedule.dropped_blocks, 14u * 14 + 53);
}

TEST(PlanTest, ParamsFromConfigJson) {
  auto text = ReadFile(EK_SOURCE_DIR "/testdata/gate/qwen3-32b-config.json");
  ASSERT_TRUE(text.ok());
  auto m = ModelFromConfigJson(*text, "config.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_NEAR(m->params / 1e9, 32.76, 0.005);
  RunFile run = ReportRun();
  auto p = MakePlan(run, *m, nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->has_activations);
  // Recomputation must save most of the activation memory.
  EXPECT_LT(p->activation_bytes_ckpt * 5, p->activation_bytes);
  // The report measured 82 GB live per GPU with checkpointing off: the
  // estimate must land in the same range (states 32.8 GB + activations).
  EXPECT_GT(p->per_gpu_bytes / 1e9, 60);
  EXPECT_LT(p->per_gpu_bytes / 1e9, 100);
  EXPECT_FALSE(p->has_pack);
}

// A model directory as a run names it: a small Qwen3-shaped config.json, a large
// tokenizer.json and files a checkpoint does not copy.
class CheckpointPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_plan_ckpt.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Put("config.json", R"({"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
      "vocab_size": 1000, "tie_word_embeddings": true})");
    Put("tokenizer.json",
        "{\"model\": {}}" + std::string(3'000'000, ' '));  // 3 MB: a real vocabulary's size
    Put("tokenizer_config.json", std::string(9675, ' '));
    Put("model.safetensors", std::string(4096, '\0'));  // the model's own weights: not copied
    Put("README.md", std::string(50'000, 'x'));         // not copied
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Put(const std::string& name, const std::string& text) {
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/" + name, text).ok());
  }
  RunFile Run() {
    RunFile r = ReportRun();
    r.params = 0;
    r.model_path = dir_;
    return r;
  }
  uint64_t Planned(const Plan& p, const std::string& name) {
    for (const auto& f : p.checkpoint_files) {
      if (f.name == name) return f.bytes;
    }
    ADD_FAILURE() << name << " not planned";
    return 0;
  }
  std::string dir_;
};

TEST_F(CheckpointPlanTest, TheCheckpointIsPlannedAsWrittenWithTheCopiedFiles) {
  RunFile run = Run();
  auto model = ModelForRun(run);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto p = MakePlan(run, *model, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // Every file of a save and only those: the shard, the index, the manifest and the
  // model files the writer copies (not the model's own weights, not README.md).
  std::set<std::string> names;
  for (const auto& f : p->checkpoint_files) names.insert(f.name);
  EXPECT_EQ(names,
            (std::set<std::string>{
                "config.json", "evenkeel-checkpoint.json", "model-00001-of-00001.safetensors",
                "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"}));
  EXPECT_TRUE(p->checkpoint_copies_measured);
  // The copied files at their real sizes, the weights at 2 B/param (tied embeddings once)
  // plus a header of about 100 bytes a tensor.
  EXPECT_EQ(Planned(*p, "tokenizer.json"), 3'000'000u + 13);
  EXPECT_EQ(Planned(*p, "tokenizer_config.json"), 9675u);
  const double h = 64, q = 4 * 16, kv = 2 * 16, i = 128, v = 1000;
  const double params = v * h + 2 * (h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + 2 * 16) + h;
  EXPECT_DOUBLE_EQ(p->params, params);
  const double header = p->checkpoint_weight_bytes - 2 * params;
  EXPECT_GT(header, 24 * 60.0);  // 24 tensors
  EXPECT_LT(header, 24 * 140.0);
  EXPECT_EQ(header + 2 * params,
            static_cast<double>(Planned(*p, "model-00001-of-00001.safetensors")));
  // Beside the weights: the copies, and a few KB of index and manifest.
  const double copies = 3'000'013 + 9675 + Planned(*p, "config.json");
  EXPECT_GT(p->checkpoint_extra_bytes, copies);
  EXPECT_LT(p->checkpoint_extra_bytes, copies + 8'000);
  // The training state: fp32 parameters and AdamW's two moments, 12 B/param.
  EXPECT_DOUBLE_EQ(p->checkpoint_state_bytes, kPlanTestStateBytes * params);
  EXPECT_DOUBLE_EQ(p->checkpoint_bytes, p->checkpoint_weight_bytes + p->checkpoint_extra_bytes +
                                            p->checkpoint_state_bytes);
  // The save time is the whole checkpoint's, and the text and JSON say what it is made of.
  EXPECT_DOUBLE_EQ(p->checkpoint_write_s, p->checkpoint_bytes / 1e9);
  const std::string text = PlanToText(run, *p);
  EXPECT_NE(text.find(kCheckpointsHoldTrainState ? "checkpoint as written: 4.95 MB = weights "
                                                 : "checkpoint as written: 3."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tokenizer.json 3.00 MB"), std::string::npos) << text;
  const std::string json = PlanToJson(run, *p);
  EXPECT_NE(json.find("\"checkpoint_files\":[{\"name\":\"config.json\""), std::string::npos)
      << json;
  EXPECT_NE(
      json.find(fmt::format("\"checkpoint_state_bytes\":{:.0f},", kPlanTestStateBytes * params)),
      std::string::npos)
      << json;
  EXPECT_EQ(text.find(" + training state ") != std::string::npos, kCheckpointsHoldTrainState)
      << text;
  EXPECT_NE(json.find(fmt::format("\"checkpoint_extra_bytes\":{:.0f},", p->checkpoint_extra_bytes)),
            std::string::npos);
}

TEST_F(CheckpointPlanTest, UntiedEmbeddingsAddTheHeadAndShardsSplitAsTheWriterSplits) {
  Put("config.json", R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000})");
  RunFile run = Run();
  run.shard_size_gb = 100e3 / 1e9;  // 100 KB shards: the 128 KB embedding gets one of its own
  auto model = ModelForRun(run);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto p = MakePlan(run, *model, nullptr);
  ASSERT_TRUE(p.ok());
  const double layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64;
  EXPECT_DOUBLE_EQ(p->params, 2 * 1000 * 64 + 2 * layer + 64);
  // embed (128,000 B) | layer 0 + layer 1's attention (90,368 B) | layer 1's MLP and norms + the
  // final norm (49,536 B) | lm_head (128,000 B), as _plan_shards fills them in named_parameters
  // order
  EXPECT_EQ(p->checkpoint_shards, 4);
  EXPECT_GT(Planned(*p, "model-00001-of-00004.safetensors"), 128'000u);
  EXPECT_LT(Planned(*p, "model-00001-of-00004.safetensors"), 128'200u);
  EXPECT_GT(Planned(*p, "model-00004-of-00004.safetensors"), 128'000u);
  double shards = 0;
  for (const auto& f : p->checkpoint_files) {
    if (f.name.rfind("model-", 0) == 0) shards += static_cast<double>(f.bytes);
  }
  EXPECT_DOUBLE_EQ(shards, p->checkpoint_weight_bytes);
}

TEST_F(CheckpointPlanTest, WithoutAModelDirectoryTheCopiesAreNotCountedAndTheTextSaysSo) {
  RunFile run = ReportRun();  // model.params only
  auto p = MakePlan(run, *ModelForRun(run), nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->checkpoint_copies_measured);
  EXPECT_NE(PlanToText(run, *p).find("not counted: the run names no model.path"),
            std::string::npos);
  // An absurd parameter count is counted, not listed shard by shard.
  run.params = 1e17;
  p = MakePlan(run, *ModelForRun(run), nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->checkpoint_shards, 40'000'000);
  EXPECT_LT(p->checkpoint_files.size(), 4100u);
  EXPECT_NEAR((p->checkpoint_bytes - p->checkpoint_state_bytes) / 2e17, 1.0, 0.001);
  EXPECT_DOUBLE_EQ(p->checkpoint_state_bytes, kPlanTestStateBytes * 1e17);
}

TEST(PlanTest, PadModeKeepsEveryBlock) {
  RunFile run = ReportRun();
  run.evenfix = EvenfixMode::kPad;
  pack::Manifest m = ReportManifest();
  auto p = MakePlan(run, *ModelForRun(run), &m);
  EXPECT_EQ(p->schedule.target_blocks, 30888u);
  EXPECT_EQ(p->schedule.dropped_blocks, 0u);
  EXPECT_EQ(p->schedule.steps_per_epoch, 30888u / 8);
}

TEST(PlanTest, BadConfigIsAnError) {
  EXPECT_FALSE(ModelFromConfigJson("{\"hidden_size\": 8}", "c.json").ok());
  RunFile run;
  EXPECT_FALSE(ModelForRun(run).ok());  // neither params nor config
}

// config.json: extra fields are fine, but a field the plan needs, missing or
// mistyped, is an error naming it and the file (a mistyped optional one used
// to be ignored: tie_word_embeddings "yes" counted the embedding twice).
TEST(PlanTest, ABadConfigFieldIsAnErrorNamingItAndTheFile) {
  const std::string good = R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 300, "architectures": ["Qwen3ForCausalLM"], "rope_scaling": null)";
  auto error_for = [](const std::string& json) {
    auto m = ModelFromConfigJson(json, "model/config.json");
    EXPECT_FALSE(m.ok()) << json;
    if (m.ok()) return std::string();
    EXPECT_EQ(m.status().code(), StatusCode::kCorrupt);
    return m.status().message();
  };
  auto m = ModelFromConfigJson(good + "}", "model/config.json");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->kv_heads, 4);
  EXPECT_EQ(m->head_dim, 16);
  EXPECT_FALSE(m->tied_embeddings);
  // HF writes None as null: the default.
  auto nulls = ModelFromConfigJson(good + R"(, "head_dim": null, "num_key_value_heads": null})",
                                   "model/config.json");
  ASSERT_TRUE(nulls.ok()) << nulls.status().message();
  EXPECT_EQ(nulls->head_dim, 16);
  EXPECT_EQ(nulls->kv_heads, 4);
  EXPECT_DOUBLE_EQ(nulls->params, m->params);

  EXPECT_EQ(
      error_for(
          R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300})"),
      "model/config.json: intermediate_size: missing");
  EXPECT_EQ(error_for(R"({"hidden_size": "64"})"),
            "model/config.json: hidden_size: not an integer");
  EXPECT_EQ(error_for(R"({"text_config": {"hidden_size": 64}})"),
            "model/config.json: hidden_size: missing");
  EXPECT_EQ(error_for(good + R"(, "num_key_value_heads": "2"})"),
            "model/config.json: num_key_value_heads: not an integer");
  EXPECT_EQ(error_for(good + R"(, "head_dim": 0})"),
            "model/config.json: head_dim: 0 is not positive");
  EXPECT_EQ(error_for(good + R"(, "tie_word_embeddings": "yes"})"),
            "model/config.json: tie_word_embeddings: not true or false");
  EXPECT_EQ(error_for(good + R"(, "model_type": ["qwen3"]})"),
            "model/config.json: model_type: not a string");
  EXPECT_EQ(error_for("[1]"), "model/config.json: not a JSON object");
  std::string bad = error_for(R"({"hidden_size": 64,)");
  EXPECT_EQ(bad.rfind("model/config.json: malformed JSON: ", 0), 0u) << bad;
}

}  // namespace
}  // namespace ek::run

namespace ek::run {
namespace {

RunFile SmallRun(int world, int mb, int ga, int epochs, int64_t max_steps, int save_every) {
  RunFile r;
  r.nodes = 1;
  r.gpus_per_node = world;
  r.seq_len = 16;
  r.micro_batch = mb;
  r.grad_accum = ga;
  r.epochs = epochs;
  r.max_steps = max_steps;
  r.save_every = save_every;
  r.params = 1e6;
  return r;
}

// A manifest for `world` ranks holding the first `present` of them, 10 blocks each.
pack::Manifest TenBlocksEach(int world, int present) {
  pack::Manifest m;
  m.world = world;
  m.seq_len = 16;
  for (int r = 0; r < present; ++r) {
    pack::RankInfo info;
    info.rank = r;
    info.blocks = 10;
    m.ranks.push_back(info);
  }
  return m;
}

// The schedule's rules, written out longhand: the oracle the cases below check
// MakeSchedule against (saves: every save_every, each epoch end, the final step).
std::vector<uint64_t> SavesLonghand(uint64_t spe, int epochs, uint64_t total, int every) {
  std::vector<uint64_t> out;
  for (int e = 0; e < epochs; ++e) {
    for (uint64_t i = 1; i <= spe; ++i) {
      uint64_t g = e * spe + i;
      if (g > total) return out;
      if ((every > 0 && g % every == 0) || i == spe || g == total) out.push_back(g);
    }
  }
  return out;
}

TEST(ScheduleTest, MaxStepsCapsTheRunAndItsLastStepIsSaved) {
  // 40 blocks, 4 per step: 10 steps an epoch, 3 epochs = 30; capped at 14.
  RunFile run = SmallRun(2, 2, 2, 3, 14, 4);
  auto s = MakeSchedule(run, std::vector<uint64_t>{40, 41});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->steps_per_epoch, 10u);
  EXPECT_EQ(s->total_steps, 14u);
  EXPECT_EQ(s->epoch_steps, (std::vector<uint64_t>{10, 4, 0}));
  EXPECT_EQ(s->save_steps, (std::vector<uint64_t>{4, 8, 10, 12, 14}));
  EXPECT_EQ(s->decay_end_step, 14u);
  EXPECT_TRUE(s->IsSave(10));
  EXPECT_FALSE(s->IsSave(11));
  EXPECT_EQ(s->dropped_blocks, 1u);
  EXPECT_EQ(s->tokens_per_step, 2u * 4 * 16);
}

TEST(ScheduleTest, AMaxStepsAboveTheRunChangesNothing) {
  RunFile run = SmallRun(2, 1, 3, 2, 1000, 0);
  auto s = MakeSchedule(run, std::vector<uint64_t>{20, 20});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->steps_per_epoch, 6u);  // 20 / 3: the trailing partial window is dropped
  EXPECT_EQ(s->total_steps, 12u);
  EXPECT_EQ(s->save_steps, (std::vector<uint64_t>{6, 12}));
}

TEST(ScheduleTest, SavesMatchTheLonghandRuleOverManyShapes) {
  int cases = 0;
  for (int every : {0, 1, 3, 7}) {
    for (int epochs : {1, 2, 3}) {
      for (int64_t cap : {0, 1, 5, 9, 11, 100}) {
        for (int ga : {1, 2, 5}) {
          RunFile run = SmallRun(3, 1, ga, epochs, cap, every);
          auto s = MakeSchedule(run, std::vector<uint64_t>{21, 23, 22});
          ASSERT_TRUE(s.ok());
          uint64_t spe = 21 / ga, full = spe * epochs;
          uint64_t total = cap > 0 ? std::min<uint64_t>(full, cap) : full;
          EXPECT_EQ(s->total_steps, total);
          EXPECT_EQ(s->save_steps, SavesLonghand(spe, epochs, total, every))
              << every << " " << epochs << " " << cap;
          uint64_t sum = 0;
          for (uint64_t n : s->epoch_steps) sum += n;
          EXPECT_EQ(sum, total);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 3 * 6 * 3);
}

TEST(ScheduleTest, PadRunsToTheLongestRankAndOffKeepsEachRanksOwnCount) {
  RunFile run = SmallRun(2, 1, 2, 1, 0, 0);
  run.evenfix = EvenfixMode::kPad;
  auto pad = MakeSchedule(run, std::vector<uint64_t>{10, 15});
  ASSERT_TRUE(pad.ok());
  EXPECT_EQ(pad->steps_per_epoch, 7u);
  EXPECT_EQ(pad->padded_blocks, 5u);
  EXPECT_EQ(pad->dropped_blocks, 0u);
  run.evenfix = EvenfixMode::kOff;
  auto off = MakeSchedule(run, std::vector<uint64_t>{10, 15});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->steps_per_epoch, 5u);
  EXPECT_EQ(off->rank_steps_per_epoch, (std::vector<uint64_t>{5, 7}));
  EXPECT_EQ(off->rank_total_steps, (std::vector<uint64_t>{5, 7}));
  // Each rank saves at its own epoch end: the shorter one walks into the barrier alone.
  EXPECT_EQ(off->rank_save_steps, (std::vector<std::vector<uint64_t>>{{5}, {7}}));
  EXPECT_TRUE(pad->rank_save_steps.empty());
}

TEST(ScheduleTest, ANodeLocalManifestNamesTheRanksItLacks) {
  RunFile run = SmallRun(4, 1, 1, 1, 0, 0);
  pack::Manifest m = TenBlocksEach(4, 2);  // a node-local manifest: ranks 0-1 of 4
  auto s = MakeSchedule(run, m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("rank(s) 2-3 of world 4"), std::string::npos)
      << s.status().message();
  auto wrong = MakeSchedule(run, std::vector<uint64_t>{1, 2});
  EXPECT_FALSE(wrong.ok());
}

TEST(ScheduleTest, ThePlanCarriesTheScheduleAndItsJson) {
  RunFile run = SmallRun(2, 1, 2, 2, 7, 3);
  pack::Manifest m = TenBlocksEach(2, 2);
  auto model = ModelForRun(run);
  ASSERT_TRUE(model.ok());
  auto p = MakePlan(run, *model, &m);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->schedule.total_steps, 7u);
  ASSERT_EQ(p->schedule.save_steps.size(), 4u);
  std::string json = PlanToJson(run, *p);
  // The plan's summary fields are read from its schedule.
  EXPECT_NE(json.find("\"steps_per_epoch\":5,\"total_steps\":7,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"save_count\":4,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"save_steps\":[3,5,6,7]"), std::string::npos) << json;
  EXPECT_NE(PlanToText(run, *p).find("capped by max_steps = 7 of 10"), std::string::npos)
      << PlanToText(run, *p);
}

}  // namespace
}  // namespace ek::run
