// FinalizeCheckpoint and PruneCheckpoints when a write, fsync or rename fails
// (FaultInjectionEnv): the error names the path and the operation, the final
// name holds a complete checkpoint (the old one, or the new one when only the
// last fsync failed) or nothing, and a re-run without the fault completes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/test_util.h"
#include "core/fault_env.h"

namespace ek::ckpt {
namespace {

using testing::SampleMeta;
using testing::ScratchDir;
using testing::WriteTrainerFiles;

constexpr const char* kFaultShard1 = "model-00001-of-00002.safetensors";
constexpr int kOldSeed = 1, kNewSeed = 5;

enum class After { kOld, kNew };  // what the final name holds after the fault

struct Case {
  std::string name;
  FaultRule rule;
  std::vector<std::string> expect;
  After after = After::kOld;
};

// Every fault FinalizeCheckpoint can meet, in the order it meets them. Renames
// and directory fsyncs are told apart by their order (`had_old`: a step
// directory already there is moved aside first).
std::vector<Case> Cases(const ScratchDir& ckpt, bool had_old) {
  const std::string eio = "Input/output error";
  std::vector<Case> cases;
  for (const WriteFault& f : WriteFaults("evenkeel-checkpoint.json")) {
    cases.push_back({"manifest_" + f.name, f.rule, f.expect});
  }
  cases.push_back({"shard_fsync",
                   FaultRule::Fail(FileOp::kSyncFile, kFaultShard1, EIO),
                   {std::string(kFaultShard1) + ": fsync: " + eio}});
  // SyncDir calls: the manifest's directory (the temp dir), the temp dir once
  // the manifest is in, the parent after the rename.
  cases.push_back({"manifest_dir_fsync",
                   FaultRule::Fail(FileOp::kSyncDir, ckpt.path(), EIO),
                   {"fsync: " + eio}});
  cases.push_back({"temp_dir_fsync",
                   FaultRule::Fail(FileOp::kSyncDir, ckpt.path(), EIO).Nth(2),
                   {"fsync: " + eio}});
  if (had_old) {
    cases.push_back({"move_aside",
                     FaultRule::Fail(FileOp::kRename, ".old-", EIO),
                     {"move the existing checkpoint aside", "rename to", eio}});
  }
  // Renames matching "/step-00000010": moving the old one aside, then the
  // temp dir to the final name.
  cases.push_back({"rename_to_final",
                   FaultRule::Fail(FileOp::kRename, "/step-00000010", EIO).Nth(had_old ? 2 : 1),
                   {"rename to " + ckpt / "step-00000010", eio}});
  cases.push_back({"parent_fsync",
                   FaultRule::Fail(FileOp::kSyncDir, ckpt.path(), EIO).Nth(3),
                   {ckpt.path() + ": fsync: " + eio},
                   After::kNew});
  return cases;
}

std::string Shard(const std::string& dir) {
  auto r = ReadFile(dir + "/" + kFaultShard1);
  return r.ok() ? *r : "<missing>";
}

bool NoManifestTemps(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return true;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  }
  return true;
}

// Finalizes step 10 (over an older step 10 when `had_old`) under each fault.
void FinalizeUnderEveryFault(bool had_old) {
  ScratchDir probe;
  const size_t n = Cases(probe, had_old).size();
  for (size_t i = 0; i < n; ++i) {
    ScratchDir ckpt;
    const Case here = Cases(ckpt, had_old)[i];  // the rules name this directory
    SCOPED_TRACE(here.name + (had_old ? " (replacing step 10)" : " (first step 10)"));
    const std::string final_dir = ckpt / "step-00000010";
    const std::string temp = ckpt / fmt::format(".step-00000010.tmp-{}", ::getpid());
    std::string old_shard;
    if (had_old) {
      WriteTrainerFiles(temp, kOldSeed);
      ASSERT_TRUE(FinalizeCheckpoint(temp, final_dir, SampleMeta(10)).ok());
      old_shard = Shard(final_dir);
    }
    WriteTrainerFiles(temp, kNewSeed);
    const std::string new_shard = Shard(temp);
    ASSERT_NE(old_shard, new_shard);

    FaultInjectionEnv env(Env::Default());
    env.Add(here.rule);
    Status st = FinalizeCheckpoint(temp, final_dir, SampleMeta(10), &env);
    ASSERT_FALSE(st.ok());
    ASSERT_EQ(env.injected(), 1);
    EXPECT_EQ(st.code(), StatusCode::kIoError);
    EXPECT_EQ(st.message().rfind("finalize " + temp + ": ", 0), 0u) << st.message();
    for (const auto& e : here.expect)
      EXPECT_NE(st.message().find(e), std::string::npos) << st.message();

    // The final name: complete, or absent.
    if (here.after == After::kNew) {
      EXPECT_EQ(Shard(final_dir), new_shard);
    } else if (had_old) {
      EXPECT_EQ(Shard(final_dir), old_shard);
    } else {
      EXPECT_FALSE(std::filesystem::exists(final_dir));
    }
    if (std::filesystem::exists(final_dir)) {
      auto report = VerifyCheckpoint(final_dir, VerifyLevel::kFull);
      ASSERT_TRUE(report.ok());
      EXPECT_TRUE(report->ok) << report->problems.front();
    }
    EXPECT_TRUE(NoManifestTemps(temp));
    auto listed = ListCheckpoints(ckpt.path(), VerifyLevel::kStructure);
    ASSERT_TRUE(listed.ok());
    for (const auto& e : *listed) {
      if (!e.temp) {
        EXPECT_TRUE(e.ok) << e.name << ": " << e.verdict;
      }
    }

    // The re-run: from the temp dir if it is still there, else a new save.
    env.Clear();
    if (!std::filesystem::exists(temp)) WriteTrainerFiles(temp, kNewSeed);
    Status again = FinalizeCheckpoint(temp, final_dir, SampleMeta(10), &env);
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_EQ(Shard(final_dir), new_shard);
    auto report = VerifyCheckpoint(final_dir, VerifyLevel::kFull);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok);
    EXPECT_FALSE(std::filesystem::exists(temp));
  }
}

TEST(CheckpointFaults, ReplacingAStepUnderEveryFaultKeepsACompleteOne) {
  FinalizeUnderEveryFault(true);
}

TEST(CheckpointFaults, FirstSaveUnderEveryFaultLeavesNoneOrAComplete) {
  FinalizeUnderEveryFault(false);
}

TEST(CheckpointFaults, PruneThatCannotRenameKeepsTheStepWhole) {
  ScratchDir ckpt;
  for (int step : {1, 2, 3}) {
    std::string temp = ckpt / fmt::format(".step-{:08d}.tmp-{}", step, ::getpid());
    WriteTrainerFiles(temp);
    ASSERT_TRUE(FinalizeCheckpoint(temp, ckpt / StepDirName(step), SampleMeta(step)).ok());
  }
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kRename, "step-00000001", EIO));
  Status st = PruneCheckpoints(ckpt.path(), 2, nullptr, &env);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(ckpt / "step-00000001: rename to"), std::string::npos)
      << st.message();
  auto kept = VerifyCheckpoint(ckpt / "step-00000001", VerifyLevel::kFull);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->ok);
  env.Clear();
  std::vector<std::string> removed;
  ASSERT_TRUE(PruneCheckpoints(ckpt.path(), 2, &removed, &env).ok());
  EXPECT_EQ(removed, std::vector<std::string>{"step-00000001"});
}

}  // namespace
}  // namespace ek::ckpt
