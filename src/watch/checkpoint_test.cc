#include "watch/checkpoint.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "core/file.h"
#include "watch/test_util.h"

namespace ek::watch {
namespace {

// A safetensors file with one tensor `name` of `bytes` bytes; `cut` bytes short.
std::string Safetensors(const std::string& name, uint64_t bytes, uint64_t cut = 0) {
  std::string header = "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(bytes / 4) +
                       "],\"data_offsets\":[0," + std::to_string(bytes) + "]}}";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out += std::string(bytes - cut, 'x');
  return out;
}

TEST(Checkpoint, SingleFileCheckpointsAndATempFileInProgress) {
  testing::ScratchDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "step-00000500.pt", "weights").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "step-00001000.pt", "weights2").ok());
  auto scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.newest_complete);
  EXPECT_EQ(scan.newest_complete->step, 1000);
  EXPECT_EQ(scan.complete_count, 2);
  EXPECT_FALSE(scan.in_progress);
  ASSERT_TRUE(WriteFileAtomic(dir / "step-00001500.pt.tmp.4242", "part").ok());
  scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.in_progress);
  EXPECT_EQ(scan.newest_complete->step, 1000);
}

TEST(Checkpoint, SafetensorsIndexNeedsEveryShardAtItsHeaderSize) {
  testing::ScratchDir dir;
  std::string ck = dir / "checkpoint-3854";
  ASSERT_TRUE(MakeDirs(ck).ok());
  ASSERT_TRUE(WriteFileAtomic(ck + "/model.safetensors.index.json",
                              R"({"metadata":{"total_size":96},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors"}})")
                  .ok());
  ASSERT_TRUE(WriteFileAtomic(ck + "/m-1.safetensors", Safetensors("a", 64)).ok());
  auto info = InspectCheckpoint(dir.path(), "checkpoint-3854");
  EXPECT_FALSE(info.complete);
  EXPECT_NE(info.why.find("m-2.safetensors missing"), std::string::npos) << info.why;
  ASSERT_TRUE(WriteFileAtomic(ck + "/m-2.safetensors", Safetensors("b", 32, 8)).ok());  // truncated
  info = InspectCheckpoint(dir.path(), "checkpoint-3854");
  EXPECT_FALSE(info.complete);
  EXPECT_NE(info.why.find("m-2.safetensors: truncated"), std::string::npos) << info.why;
  ASSERT_TRUE(WriteFileAtomic(ck + "/m-2.safetensors", Safetensors("b", 32)).ok());
  info = InspectCheckpoint(dir.path(), "checkpoint-3854");
  EXPECT_TRUE(info.complete) << info.why;
  EXPECT_EQ(info.step, 3854);
  // The index's total must match the tensors' bytes.
  ASSERT_TRUE(WriteFileAtomic(ck + "/model.safetensors.index.json",
                              R"({"metadata":{"total_size":100},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors"}})")
                  .ok());
  EXPECT_FALSE(InspectCheckpoint(dir.path(), "checkpoint-3854").complete);
}

TEST(Checkpoint, EvenkeelCheckpointIsVerifiedAndItsTempDirectoryIsInProgress) {
  testing::ScratchDir dir;
  // A temp directory named after a live writer (this process) is a save in progress.
  std::string temp = dir / (".step-00000010.tmp-" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs(temp).ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/model.safetensors", Safetensors("w", 64)).ok());
  ASSERT_TRUE(WriteFileAtomic(temp + "/config.json", "{}").ok());
  ckpt::CheckpointManifest meta;
  meta.step = 10;
  meta.dtype = "float32";
  auto scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  ASSERT_TRUE(scan.in_progress);
  ASSERT_TRUE(ckpt::FinalizeCheckpoint(temp, dir / "step-00000010", meta).ok());
  scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.newest_complete);
  EXPECT_EQ(scan.newest_complete->step, 10);
  EXPECT_FALSE(scan.in_progress);
  // A file the manifest lists goes missing: no longer complete.
  ASSERT_EQ(::unlink((dir / "step-00000010/config.json").c_str()), 0);
  auto info = InspectCheckpoint(dir.path(), "step-00000010");
  EXPECT_FALSE(info.complete);
  EXPECT_NE(info.why.find("config.json: missing"), std::string::npos) << info.why;
}

TEST(Checkpoint, ATempDirectoryOfADeadWriterIsNotASaveInProgress) {
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

TEST(Checkpoint, AStepDirectoryWithoutTheManifestIsNotCompleteForTheAgentEither) {
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

TEST(Checkpoint, DcpDirectoryIsCompleteOnceMetadataIsWritten) {
  testing::ScratchDir dir;
  std::string ck = dir / "step_200";
  ASSERT_TRUE(MakeDirs(ck).ok());
  ASSERT_TRUE(WriteFileAtomic(ck + "/__0_0.distcp", "shard").ok());
  auto scan = ScanCheckpoints(dir.path());
  EXPECT_FALSE(scan.newest_complete);
  ASSERT_TRUE(scan.in_progress);
  EXPECT_EQ(scan.in_progress->step, 200);
  ASSERT_TRUE(WriteFileAtomic(ck + "/.metadata", "meta").ok());
  scan = ScanCheckpoints(dir.path());
  ASSERT_TRUE(scan.newest_complete);
  EXPECT_EQ(scan.newest_complete->step, 200);
  EXPECT_FALSE(scan.in_progress);
}

// A pytorch_model.bin.index.json whose weight_map is mistyped says which field
// is wrong, not "bad weight_map".
TEST(Checkpoint, BinIndexNamesAMistypedWeightMapField) {
  testing::ScratchDir dir;
  std::string ck = dir / "checkpoint-20";
  ASSERT_TRUE(MakeDirs(ck).ok());
  ASSERT_TRUE(WriteFileAtomic(ck + "/pytorch_model-00001.bin", "w").ok());
  const std::string index = ck + "/pytorch_model.bin.index.json";
  ASSERT_TRUE(WriteFileAtomic(index, R"({"weight_map":{"a.weight":"pytorch_model-00001.bin"}})").ok());
  EXPECT_TRUE(InspectCheckpoint(dir.path(), "checkpoint-20").complete);
  ASSERT_TRUE(WriteFileAtomic(index, R"({"weight_map":{"a.weight":"pytorch_model-00001.bin","b.weight":3}})").ok());
  CheckpointInfo bad = InspectCheckpoint(dir.path(), "checkpoint-20");
  EXPECT_FALSE(bad.complete);
  EXPECT_EQ(bad.why, "pytorch_model.bin.index.json: weight_map.b.weight: not a string");
  ASSERT_TRUE(WriteFileAtomic(index, R"({"weight_map":["pytorch_model-00001.bin"]})").ok());
  EXPECT_EQ(InspectCheckpoint(dir.path(), "checkpoint-20").why, "pytorch_model.bin.index.json: weight_map: not an object");
  ASSERT_TRUE(WriteFileAtomic(index, R"({"weights":{}})").ok());
  EXPECT_EQ(InspectCheckpoint(dir.path(), "checkpoint-20").why, "pytorch_model.bin.index.json: weight_map: missing");
}

TEST(Checkpoint, MissingDirIsEmpty) {
  auto scan = ScanCheckpoints("/nonexistent/evenkeel/ckpt");
  EXPECT_FALSE(scan.newest_complete);
  EXPECT_EQ(scan.complete_count, 0);
}

}  // namespace
}  // namespace ek::watch
