// The agent's view of the checkpoint dir, by ek_ckpt's rule (checkpoint_scan.h).
// Ported from the watcher's own scanner, which also judged other trainers'
// layouts; where its rules differed from ek_ckpt's, ek_ckpt's win, and the case
// says so.
#include "agent/checkpoint_scan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "core/file.h"
#include "core/scratch_dir_testing.h"

namespace ek::watch {
namespace {

// A safetensors file with one tensor `name` of `bytes` bytes; `cut` bytes short.
std::string Safetensors(const std::string& name, uint64_t bytes, uint64_t cut = 0) {
  std::string header = "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" +
                       std::to_string(bytes / 4) + "],\"data_offsets\":[0," +
                       std::to_string(bytes) + "]}}";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out += std::string(bytes - cut, 'x');
  return out;
}

ckpt::CheckpointManifest Meta(int64_t step) {
  ckpt::CheckpointManifest meta;
  meta.step = step;
  meta.dtype = "float32";
  return meta;
}

// Was: single .pt files complete and a "*.tmp*" file beside them in progress.
// ek_ckpt's rule: a checkpoint is a step-NNNNNNNN directory; other files are not
// checkpoints, complete or in progress.
TEST(CheckpointScan, OtherTrainersFilesAreNotCheckpoints) {
  testing::ScratchDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "step-00000500.pt", "weights").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "step-00001000.pt", "weights2").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "step-00001500.pt.tmp.4242", "part").ok());
  auto scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  EXPECT_EQ(scan.complete_count, 0);
  EXPECT_FALSE(scan.in_progress);
}

// Was: a directory with a safetensors index (checkpoint-3854) complete once every
// shard is there at its header's size and the index's total matches. ek_ckpt's
// rule: only a finalized step directory counts, and it is checked the same way
// (shards at their header sizes), so a shard cut short makes it incomplete.
TEST(CheckpointScan, AShardedCheckpointNeedsEveryShardAtItsHeaderSize) {
  testing::ScratchDir dir;
  std::string temp = dir / (".step-00003854.tmp-" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs(temp).ok());
  ASSERT_TRUE(
      WriteFileAtomic(
          temp + "/model.safetensors.index.json",
          R"({"metadata":{"total_size":96},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors"}})")
          .ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/m-1.safetensors", Safetensors("a", 64)).ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/m-2.safetensors", Safetensors("b", 32)).ok());
  ASSERT_TRUE(ckpt::FinalizeCheckpoint(temp, dir / "step-00003854", Meta(3854)).ok());
  auto scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.newest_complete);
  EXPECT_EQ(scan.newest_complete->step, 3854);
  EXPECT_EQ(scan.newest_complete->files, 4);  // two shards, the index, the manifest
  ASSERT_TRUE(WriteFileAtomic(dir / "step-00003854/m-2.safetensors", Safetensors("b", 32, 8))
                  .ok());  // truncated
  scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  EXPECT_EQ(scan.complete_count, 0);
  // A damaged final directory is not a save in progress either.
  EXPECT_FALSE(scan.in_progress);
  auto listed = ckpt::ListCheckpoints(dir.path(), ckpt::VerifyLevel::kStructure);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_NE((*listed)[0].verdict.find("m-2.safetensors"), std::string::npos)
      << (*listed)[0].verdict;
}

TEST(CheckpointScan, EvenkeelCheckpointIsVerifiedAndItsTempDirectoryIsInProgress) {
  testing::ScratchDir dir;
  // A temp directory named after a live writer (this process) is a save in progress.
  std::string temp = dir / (".step-00000010.tmp-" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs(temp).ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/model.safetensors", Safetensors("w", 64)).ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/config.json", "{}").ok());
  auto scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  ASSERT_TRUE(scan.in_progress);
  EXPECT_EQ(scan.in_progress->step, 10);
  EXPECT_EQ(scan.in_progress->files, 2);
  ASSERT_TRUE(ckpt::FinalizeCheckpoint(temp, dir / "step-00000010", Meta(10)).ok());
  scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.newest_complete);
  EXPECT_EQ(scan.newest_complete->step, 10);
  EXPECT_EQ(scan.newest_complete->name, "step-00000010");
  EXPECT_FALSE(scan.in_progress);
  // A file the manifest lists goes missing: no longer complete.
  ASSERT_EQ(::unlink((dir / "step-00000010/config.json").c_str()), 0);
  scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  auto listed = ckpt::ListCheckpoints(dir.path(), ckpt::VerifyLevel::kStructure);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_NE((*listed)[0].verdict.find("config.json: missing"), std::string::npos)
      << (*listed)[0].verdict;
}

TEST(CheckpointScan, TheTrainingStateSubdirectoryIsCountedInProgressAndComplete) {
  testing::ScratchDir dir;
  std::string temp = dir / (".step-00000030.tmp-" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs(temp + "/train_state").ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/model.safetensors", Safetensors("w", 64)).ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/train_state/.metadata", "m").ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/train_state/__0_0.distcp", std::string(500, 'x')).ok());
  auto scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.in_progress);
  EXPECT_EQ(scan.in_progress->files, 3);  // the shard and the state's two
  EXPECT_GE(scan.in_progress->bytes, 501u + 64u);
  ckpt::CheckpointManifest meta = Meta(30);
  meta.train_state = ckpt::TrainStateRef{};
  meta.train_state->precision = "fp32";
  ASSERT_TRUE(ckpt::FinalizeCheckpoint(temp, dir / "step-00000030", meta).ok());
  scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.newest_complete);
  EXPECT_EQ(scan.newest_complete->files, 4);  // and the manifest
  EXPECT_GE(scan.newest_complete->bytes, 501u + 64u);
}

TEST(CheckpointScan, ATempDirectoryOfADeadWriterIsNotASaveInProgress) {
  // ek_ckpt's rule, the launcher's and `ckpt list`'s: the writer's PID is gone, so the
  // save was abandoned (a crash), and the agent must not report a save under way.
  testing::ScratchDir dir;
  std::string temp = dir / ".step-00000020.tmp-999999999";
  ASSERT_TRUE(MakeDirs(temp).ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/model.safetensors", Safetensors("w", 64)).ok());
  auto scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.in_progress);
  EXPECT_FALSE(scan.newest_complete);
}

TEST(CheckpointScan, AStepDirectoryWithoutTheManifestIsNotCompleteForTheAgentEither) {
  // A step-NNNNNNNN directory is evenkeel's: without evenkeel-checkpoint.json it is not a
  // checkpoint the launcher would resume from, so the agent does not count it complete.
  testing::ScratchDir dir;
  std::string ck = dir / "step-00000030";
  ASSERT_TRUE(MakeDirs(ck).ok());
  ASSERT_TRUE(WriteFileAtomic(ck + "/model.safetensors", Safetensors("w", 64)).ok());
  auto scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  EXPECT_EQ(scan.complete_count, 0);
}

// Was: a torch.distributed.checkpoint directory (step_200 with *.distcp) in
// progress until ".metadata" appears, then complete. ek_ckpt's rule: not a
// step-NNNNNNNN directory, so neither.
TEST(CheckpointScan, ADcpDirectoryIsNotACheckpoint) {
  testing::ScratchDir dir;
  std::string ck = dir / "step_200";
  ASSERT_TRUE(MakeDirs(ck).ok());
  ASSERT_TRUE(WriteFileAtomic(ck + "/__0_0.distcp", "shard").ok());
  ASSERT_TRUE(WriteFileAtomic(ck + "/.metadata", "meta").ok());
  auto scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  EXPECT_FALSE(scan.in_progress);
}

TEST(CheckpointScan, TheNewestOfSeveralIsReported) {
  testing::ScratchDir dir;
  for (int64_t step : {500, 1000}) {
    std::string temp = dir / ("." + ckpt::StepDirName(step) + ".tmp-" + std::to_string(::getpid()));
    ASSERT_TRUE(MakeDirs(temp).ok());
    ASSERT_TRUE(WriteFileAtomic(temp + "/model.safetensors", Safetensors("w", 64)).ok());
    ASSERT_TRUE(ckpt::FinalizeCheckpoint(temp, dir / ckpt::StepDirName(step), Meta(step)).ok());
  }
  auto scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.newest_complete);
  EXPECT_EQ(scan.newest_complete->step, 1000);
  EXPECT_EQ(scan.complete_count, 2);
  EXPECT_FALSE(scan.in_progress);
}

TEST(CheckpointScan, MissingDirIsEmpty) {
  auto scan = ScanCheckpoints("/nonexistent/evenkeel/ckpt");
  EXPECT_FALSE(scan.newest_complete);
  EXPECT_EQ(scan.complete_count, 0);
  EXPECT_FALSE(ScanCheckpoints("").newest_complete);
}

}  // namespace
}  // namespace ek::watch
