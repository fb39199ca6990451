#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "ckpt/test_util.h"

namespace ek::ckpt {
namespace {

using testing::IndexJson;
using testing::MakeSafetensors;
using testing::Put;
using testing::SampleMeta;
using testing::ScratchDir;
using testing::WriteTrainerFiles;

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

// Writes and finalizes CKPT_DIR/step-NNNNNNNN the way the trainer does.
std::string Save(const ScratchDir& ckpt, int64_t step, int seed = 1) {
  std::string temp = ckpt / fmt::format(".step-{:08d}.tmp-{}", step, ::getpid());
  WriteTrainerFiles(temp, seed);
  std::string final_dir = ckpt / StepDirName(step);
  Status st = FinalizeCheckpoint(temp, final_dir, SampleMeta(step));
  EXPECT_TRUE(st.ok()) << st.message();
  return final_dir;
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

VerifyReport Verify(const std::string& dir, VerifyLevel level = VerifyLevel::kStructure,
                    bool manifest = true) {
  VerifyOptions o;
  o.level = level;
  o.require_manifest = manifest;
  auto r = VerifyCheckpoint(dir, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : VerifyReport{};
}

std::string Headline(const VerifyReport& r) { return r.problems.empty() ? "" : r.problems.front(); }

bool HasProblem(const VerifyReport& r, const std::string& text) {
  for (const auto& p : r.problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string AllProblems(const VerifyReport& r) {
  std::string s;
  for (const auto& p : r.problems) s += p + "\n";
  return s;
}

void FlipByte(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(offset)), 1);
  c ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

TEST(Checkpoint, ValidTwoShardCheckpointFinalizesAndVerifiesAtBothLevels) {
  ScratchDir ckpt;
  std::string dir = Save(ckpt, 10);
  EXPECT_FALSE(Exists(ckpt / ".step-00000010.tmp-" + std::to_string(::getpid())));
  auto m = ReadCheckpointManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->step, 10);
  EXPECT_EQ(m->extra, SampleMeta(10).extra);
  EXPECT_FALSE(m->created.empty());
  ASSERT_EQ(m->files.size(), 5u);  // everything but the manifest, sorted
  EXPECT_EQ(m->files[0].name, "config.json");
  EXPECT_EQ(m->files[1].name, kShard1);
  EXPECT_EQ(m->files[1].chunks.size(), 1u);
  for (VerifyLevel level : {VerifyLevel::kStructure, VerifyLevel::kFull}) {
    VerifyReport r = Verify(dir, level);
    EXPECT_TRUE(r.ok) << AllProblems(r);
    EXPECT_EQ(r.step, 10);
    EXPECT_EQ(r.shard_count, 2);
    EXPECT_EQ(r.tensor_count, 4u);
    EXPECT_TRUE(r.has_manifest);
    EXPECT_GT(r.total_bytes, 160u);
  }
}

TEST(Checkpoint, SingleModelSafetensorsNeedsNoIndex) {
  ScratchDir ckpt;
  std::string temp = ckpt / ".step-00000005.tmp-1";
  ASSERT_TRUE(MakeDirs(temp).ok());
  Put(temp + "/model.safetensors", MakeSafetensors({{"w", {3, 3}}}));
  Put(temp + "/config.json", "{}");
  ASSERT_TRUE(FinalizeCheckpoint(temp, ckpt / "step-00000005", SampleMeta(5)).ok());
  VerifyReport r = Verify(ckpt / "step-00000005", VerifyLevel::kFull);
  EXPECT_TRUE(r.ok) << AllProblems(r);
  EXPECT_EQ(r.shard_count, 1);
  // A second shard without an index is not a checkpoint.
  Put(ckpt / "step-00000005/model-2.safetensors", MakeSafetensors({{"v", {1}}}));
  EXPECT_TRUE(HasProblem(Verify(ckpt / "step-00000005", VerifyLevel::kStructure, false),
                         "model-2.safetensors: a second safetensors file, but no index"));
}

TEST(Checkpoint, TruncatedShardNamesTheFileAndTheByte) {
  ScratchDir ckpt;
  std::string dir = Save(ckpt, 10);
  std::string shard = dir + "/" + kShard2;
  uint64_t size = std::filesystem::file_size(shard);
  ASSERT_EQ(::truncate(shard.c_str(), static_cast<off_t>(size - 10)), 0);
  VerifyReport r = Verify(dir);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(
      Headline(r),
      fmt::format("{}: truncated: file ends at byte {}, evenkeel-checkpoint.json records {} bytes",
                  kShard2, size - 10, size));
  EXPECT_TRUE(HasProblem(
      r, fmt::format("{}: truncated: header declares data up to byte {}, file ends at byte {}",
                     kShard2, size, size - 10)))
      << AllProblems(r);
}

TEST(Checkpoint, FlippedDataByteFailsOnlyTheFullCheckNamingTheChunk) {
  ScratchDir ckpt;
  std::string dir = Save(ckpt, 10);
  std::string shard = dir + "/" + kShard1;
  uint64_t size = std::filesystem::file_size(shard);
  FlipByte(shard, size - 3);
  EXPECT_TRUE(Verify(dir, VerifyLevel::kStructure).ok);
  VerifyReport r = Verify(dir, VerifyLevel::kFull);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(Headline(r), fmt::format("{}: checksum mismatch in bytes 0-{}", kShard1, size - 1));
}

TEST(Checkpoint, FlipInTheSecondChunkOfALargeShardNamesItsRange) {
  ScratchDir ckpt;
  std::string temp = ckpt / ".step-00000001.tmp-1";
  ASSERT_TRUE(MakeDirs(temp).ok());
  // 150,000,000 bytes of bf16 zeros, sparse: cheap to write and to hash.
  std::string shard = temp + "/model.safetensors";
  std::string head = testing::RawSafetensors(
      "{\"w\":{\"dtype\":\"BF16\",\"shape\":[75000000],\"data_offsets\":[0,150000000]}}", "");
  Put(shard, head);
  ASSERT_EQ(::truncate(shard.c_str(), static_cast<off_t>(head.size() + 150'000'000)), 0);
  std::string dir = ckpt / "step-00000001";
  ASSERT_TRUE(FinalizeCheckpoint(temp, dir, SampleMeta(1)).ok());
  auto m = ReadCheckpointManifest(dir);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->files[0].chunks.size(), 3u);
  FlipByte(dir + "/model.safetensors", 70'000'000);
  EXPECT_TRUE(Verify(dir).ok);
  VerifyReport r = Verify(dir, VerifyLevel::kFull);
  EXPECT_EQ(Headline(r), "model.safetensors: checksum mismatch in bytes 67108864-134217727")
      << AllProblems(r);
}

TEST(Checkpoint, WrongDtypeIsRefusedByFinalizeAndReportedByVerify) {
  ScratchDir ckpt;
  std::string temp = ckpt / ".step-00000003.tmp-1";
  WriteTrainerFiles(temp);
  Put(temp + "/" + kShard1,
      MakeSafetensors({{"model.embed.weight", {4, 4}, "F32"}, {"model.norm.weight", {8}}}));
  Status st = FinalizeCheckpoint(temp, ckpt / "step-00000003", SampleMeta(3));
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find("model-00001-of-00002.safetensors: byte 40: tensor "
                              "'model.embed.weight' is F32, the checkpoint "
                              "declares bfloat16 (BF16)"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(Exists(ckpt / "step-00000003"));
  EXPECT_FALSE(Exists(temp + "/evenkeel-checkpoint.json"));

  // Verify on its own: a manifest that declares float16 over bf16 tensors.
  std::string dir = Save(ckpt, 10);
  std::string path = dir + "/evenkeel-checkpoint.json";
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  std::string edited = *text;
  edited.replace(edited.find("\"bfloat16\""), 10, "\"float16\"");
  Put(path, edited);
  VerifyReport r = Verify(dir);
  EXPECT_TRUE(
      HasProblem(r, "tensor 'model.embed.weight' is BF16, the checkpoint declares float16 (F16)"))
      << AllProblems(r);
  EXPECT_TRUE(HasProblem(r, "2 tensors of this shard differ")) << AllProblems(r);
}

// A directory of another tool (no manifest) with one thing wrong in its index.
VerifyReport VerifyPlainWithIndex(const ScratchDir& ckpt, const std::string& index) {
  std::string dir = ckpt / "hf";
  WriteTrainerFiles(dir);
  Put(dir + "/model.safetensors.index.json", index);
  return Verify(dir, VerifyLevel::kStructure, /*manifest=*/false);
}

TEST(Checkpoint, IndexMustCoverEveryTensorExactlyOnce) {
  {
    ScratchDir ckpt;
    VerifyReport good =
        VerifyPlainWithIndex(ckpt, IndexJson(160, {{"lm_head.weight", kShard2},
                                                   {"model.embed.weight", kShard1},
                                                   {"model.layers.0.norm.weight", kShard2},
                                                   {"model.norm.weight", kShard1}}));
    EXPECT_TRUE(good.ok) << AllProblems(good);
    EXPECT_FALSE(good.has_manifest);
  }
  {  // listed in the index, missing from its shard
    ScratchDir ckpt;
    VerifyReport r =
        VerifyPlainWithIndex(ckpt, IndexJson(160, {{"lm_head.weight", kShard2},
                                                   {"model.embed.weight", kShard1},
                                                   {"model.layers.0.norm.weight", kShard2},
                                                   {"model.norm.weight", kShard1},
                                                   {"model.ghost.weight", kShard1}}));
    EXPECT_EQ(Headline(r),
              "model.safetensors.index.json: tensor 'model.ghost.weight' is not in "
              "model-00001-of-00002.safetensors");
  }
  {  // in a shard, absent from the index
    ScratchDir ckpt;
    VerifyReport r =
        VerifyPlainWithIndex(ckpt, IndexJson(144, {{"lm_head.weight", kShard2},
                                                   {"model.embed.weight", kShard1},
                                                   {"model.layers.0.norm.weight", kShard2}}));
    EXPECT_NE(Headline(r).find("model-00001-of-00002.safetensors: byte "), std::string::npos)
        << Headline(r);
    EXPECT_NE(
        Headline(r).find(": tensor 'model.norm.weight' is not in model.safetensors.index.json"),
        std::string::npos)
        << Headline(r);
  }
  {  // the index points at the wrong shard
    ScratchDir ckpt;
    VerifyReport r =
        VerifyPlainWithIndex(ckpt, IndexJson(160, {{"lm_head.weight", kShard1},
                                                   {"model.embed.weight", kShard1},
                                                   {"model.layers.0.norm.weight", kShard2},
                                                   {"model.norm.weight", kShard1}}));
    EXPECT_TRUE(HasProblem(r,
                           "tensor 'lm_head.weight' is here, but model.safetensors.index.json says "
                           "model-00001-of-00002.safetensors"))
        << AllProblems(r);
  }
  {  // a shard named by the index is missing
    ScratchDir ckpt;
    VerifyReport r = VerifyPlainWithIndex(
        ckpt, IndexJson(160, {{"lm_head.weight", kShard2},
                              {"model.embed.weight", kShard1},
                              {"model.layers.0.norm.weight", kShard2},
                              {"model.norm.weight", "model-00003.safetensors"}}));
    EXPECT_EQ(Headline(r), "model.safetensors.index.json: shard model-00003.safetensors missing");
  }
  {  // total_size disagrees with the tensors
    ScratchDir ckpt;
    VerifyReport r =
        VerifyPlainWithIndex(ckpt, IndexJson(161, {{"lm_head.weight", kShard2},
                                                   {"model.embed.weight", kShard1},
                                                   {"model.layers.0.norm.weight", kShard2},
                                                   {"model.norm.weight", kShard1}}));
    EXPECT_EQ(
        Headline(r),
        "model.safetensors.index.json: metadata.total_size is 161, but the shards' tensors hold "
        "160 bytes");
  }
  {  // malformed index
    ScratchDir ckpt;
    VerifyReport r = VerifyPlainWithIndex(ckpt, "{\"weight_map\": {\"a\": 1}}");
    EXPECT_EQ(Headline(r), "model.safetensors.index.json: weight_map.a: not a string");
    r = VerifyPlainWithIndex(ckpt, "{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
    EXPECT_NE(Headline(r).find("is not a .safetensors file in this directory"), std::string::npos);
  }
}

// The index's fields are read strictly: a missing, mistyped or misnested one is
// a problem naming the file and the field's path.
TEST(Checkpoint, ABadIndexFieldIsAProblemNamingItAndTheFile) {
  const std::string map = "{\"lm_head.weight\": \"" + std::string(kShard2) +
                          "\", \"model.embed.weight\": \"" + kShard1 +
                          "\", \"model.layers.0.norm.weight\": \"" + kShard2 +
                          "\", \"model.norm.weight\": \"" + kShard1 + "\"}";
  struct Case {
    std::string index, headline;
  };
  const std::vector<Case> cases = {
      {"{\"metadata\": {\"total_size\": 160}}",
       "model.safetensors.index.json: weight_map: missing"},
      {"{\"weight_map\": [\"" + std::string(kShard1) + "\"]}",
       "model.safetensors.index.json: weight_map: not an object"},
      {"{\"metadata\": {\"weight_map\": " + map + "}}",
       "model.safetensors.index.json: weight_map: missing"},
      {"{\"weight_map\": {\"lm_head.weight\": [\"" + std::string(kShard2) + "\"]}}",
       "model.safetensors.index.json: weight_map.lm_head.weight: not a string"},
      {"{\"metadata\": {\"total_size\": \"160\"}, \"weight_map\": " + map + "}",
       "model.safetensors.index.json: metadata.total_size: not a non-negative integer"},
      {"{\"metadata\": 160, \"weight_map\": " + map + "}",
       "model.safetensors.index.json: metadata: not an object"},
      {"[" + map + "]", "model.safetensors.index.json: not a JSON object"},
  };
  for (const auto& c : cases) {
    ScratchDir ckpt;
    VerifyReport r = VerifyPlainWithIndex(ckpt, c.index);
    EXPECT_FALSE(r.ok) << c.index;
    EXPECT_EQ(Headline(r), c.headline) << c.index;
  }
  {  // extra fields are fine, and without a manifest so is a missing total_size
    ScratchDir ckpt;
    VerifyReport r =
        VerifyPlainWithIndex(ckpt, "{\"format\": \"pt\", \"weight_map\": " + map + "}");
    EXPECT_TRUE(r.ok) << AllProblems(r);
  }
}

TEST(Checkpoint, TensorInTwoShards) {
  ScratchDir ckpt;
  std::string dir = ckpt / "hf";
  WriteTrainerFiles(dir);
  Put(dir + "/" + kShard2,
      MakeSafetensors({{"lm_head.weight", {4, 8}}, {"model.norm.weight", {8}}}));
  Put(dir + "/model.safetensors.index.json", IndexJson(160, {{"lm_head.weight", kShard2},
                                                             {"model.embed.weight", kShard1},
                                                             {"model.norm.weight", kShard1}}));
  VerifyReport r = Verify(dir, VerifyLevel::kStructure, false);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(Headline(r).find("model-00002-of-00002.safetensors: byte "), std::string::npos)
      << AllProblems(r);
  EXPECT_NE(
      Headline(r).find("tensor 'model.norm.weight' is also in model-00001-of-00002.safetensors"),
      std::string::npos)
      << AllProblems(r);
}

TEST(Checkpoint, MissingManifest) {
  ScratchDir ckpt;
  std::string dir = ckpt / "step-00000010";
  WriteTrainerFiles(dir);
  VerifyReport r = Verify(dir);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(Headline(r), "no evenkeel-checkpoint.json: incomplete or not an evenkeel checkpoint");
  EXPECT_EQ(r.step, 10);
  VerifyReport plain = Verify(dir, VerifyLevel::kFull, /*manifest=*/false);
  EXPECT_TRUE(plain.ok) << AllProblems(plain);
  auto missing = VerifyCheckpoint(ckpt / "nope", VerifyLevel::kStructure);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(Checkpoint, ManifestMissingAFieldOrDisagreeingWithTheName) {
  ScratchDir ckpt;
  std::string dir = Save(ckpt, 10);
  std::string path = dir + "/evenkeel-checkpoint.json";
  std::string text = *ReadFile(path);
  size_t at = text.find("  \"tokens_seen\"");
  std::string cut = text;
  cut.erase(at, text.find('\n', at) + 1 - at);
  Put(path, cut);
  EXPECT_EQ(Headline(Verify(dir)), "evenkeel-checkpoint.json: tokens_seen: missing");
  std::string renamed = text;
  renamed.replace(renamed.find("\"step\": 10"), 10, "\"step\": 11");
  Put(path, renamed);
  EXPECT_EQ(Headline(Verify(dir)),
            "evenkeel-checkpoint.json: step 11, but the directory is named step-00000010");
}

TEST(Checkpoint, ExtraAndMissingFiles) {
  ScratchDir ckpt;
  std::string dir = Save(ckpt, 10);
  Put(dir + "/notes.txt", "hello");
  EXPECT_EQ(Headline(Verify(dir)), "notes.txt: not listed in evenkeel-checkpoint.json");
  ::unlink((dir + "/notes.txt").c_str());
  ::unlink((dir + "/tokenizer.json").c_str());
  EXPECT_EQ(Headline(Verify(dir)),
            "tokenizer.json: missing (evenkeel-checkpoint.json lists it with 19 bytes)");
  Put(dir + "/tokenizer.json", "{\"version\": \"1.0\"}\n  ");
  EXPECT_EQ(
      Headline(Verify(dir)),
      "tokenizer.json: 21 bytes, evenkeel-checkpoint.json records 19 (extra bytes from byte 19)");
  Put(dir + "/tokenizer.json", "{\"version\": \"1.1\"}\n");
  EXPECT_TRUE(Verify(dir).ok);
  EXPECT_EQ(Headline(Verify(dir, VerifyLevel::kFull)),
            "tokenizer.json: checksum mismatch in bytes 0-18");
  ::unlink((dir + "/" + kShard2).c_str());
  VerifyReport r = Verify(dir);
  EXPECT_TRUE(
      HasProblem(r, "model.safetensors.index.json: shard model-00002-of-00002.safetensors missing"))
      << AllProblems(r);
}

TEST(Checkpoint, FinalizeReplacesAnExistingFinalDirectory) {
  ScratchDir ckpt;
  std::string dir = Save(ckpt, 10, /*seed=*/1);
  Put(dir + "/stale.txt", "from the first run");
  auto first = ReadCheckpointManifest(dir);
  ASSERT_TRUE(first.ok());
  Save(ckpt, 10, /*seed=*/5);
  EXPECT_FALSE(Exists(dir + "/stale.txt"));
  auto second = ReadCheckpointManifest(dir);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(first->files[1].xxh3, second->files[1].xxh3);
  EXPECT_TRUE(Verify(dir, VerifyLevel::kFull).ok);
  auto entries = Names(ckpt.path());
  EXPECT_EQ(entries, std::vector<std::string>{"step-00000010"});
}

TEST(Checkpoint, FinalizeRefusesWhatItCannotVouchFor) {
  ScratchDir ckpt;
  std::string temp = ckpt / ".step-00000010.tmp-1";
  WriteTrainerFiles(temp);
  CheckpointManifest meta = SampleMeta(10);
  EXPECT_EQ(FinalizeCheckpoint(temp, ckpt / "step-00000011", meta).code(),
            StatusCode::kInvalidArgument);
  meta.extra = "[1, 2]";
  EXPECT_EQ(FinalizeCheckpoint(temp, ckpt / "step-00000010", meta).code(),
            StatusCode::kInvalidArgument);
  meta.extra = "";
  meta.step_in_epoch = -1;
  Status negative = FinalizeCheckpoint(temp, ckpt / "step-00000010", meta);
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("step_in_epoch: -1 is out of range"), std::string::npos)
      << negative.message();
  meta.step_in_epoch = 3;
  meta.dtype = "int4";
  EXPECT_EQ(FinalizeCheckpoint(temp, ckpt / "step-00000010", meta).code(),
            StatusCode::kInvalidArgument);
  meta.dtype = "bfloat16";
  ASSERT_TRUE(MakeDirs(temp + "/sub").ok());
  Status st = FinalizeCheckpoint(temp, ckpt / "step-00000010", meta);
  EXPECT_NE(st.message().find("/sub: a subdirectory, and the manifest has no train_state"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(FinalizeCheckpoint(ckpt / "absent", ckpt / "step-00000010", meta).code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(Exists(ckpt / "step-00000010"));
}

// Step dirs 10 (ok), 20 (ok), 30 (corrupt), a save in progress (this
// process) and an abandoned one (a PID no process has).
void MakeHistory(const ScratchDir& ckpt) {
  Save(ckpt, 20);
  Save(ckpt, 10);
  std::string bad = Save(ckpt, 30);
  ::truncate((bad + "/" + kShard1).c_str(), 100);
  WriteTrainerFiles(ckpt / (".step-00000040.tmp-" + std::to_string(::getpid())));
  WriteTrainerFiles(ckpt / ".step-00000035.tmp-999999999");
  Put(ckpt / "gate-log.json", "{}");
  ASSERT_TRUE(MakeDirs(ckpt / "other").ok());
}

TEST(Checkpoint, ListCheckpointsSortsByStepWithVerdicts) {
  ScratchDir ckpt;
  MakeHistory(ckpt);
  auto list = ListCheckpoints(ckpt.path(), VerifyLevel::kStructure);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 5u);
  const auto& l = *list;
  EXPECT_EQ(l[0].name, "step-00000010");
  EXPECT_TRUE(l[0].ok);
  EXPECT_EQ(l[0].verdict, "ok");
  EXPECT_GT(l[0].bytes, 160u);
  EXPECT_GT(l[0].mtime, 0);
  EXPECT_EQ(l[1].step, 20);
  EXPECT_EQ(l[2].step, 30);
  EXPECT_FALSE(l[2].ok);
  EXPECT_EQ(
      l[2].verdict.rfind("model-00001-of-00002.safetensors: truncated: file ends at byte 100", 0),
      0u)
      << l[2].verdict;
  EXPECT_EQ(l[3].name, ".step-00000035.tmp-999999999");
  EXPECT_TRUE(l[3].temp);
  EXPECT_EQ(l[3].verdict, "abandoned (pid 999999999 is gone)");
  EXPECT_EQ(l[4].step, 40);
  EXPECT_EQ(l[4].verdict, fmt::format("in progress (pid {})", ::getpid()));
  EXPECT_EQ(ListCheckpoints(ckpt / "nope", VerifyLevel::kStructure).status().code(),
            StatusCode::kNotFound);
}

// A writer killed but not yet reaped (a zombie) is gone: its temporary is
// abandoned, and prune removes it, as for a writer whose pid no process has.
TEST(Checkpoint, ATempWhoseWriterIsAZombieIsAbandoned) {
  ScratchDir ckpt;
  Save(ckpt, 10);
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  ::kill(child, SIGKILL);
  // Wait until the kernel has made it a zombie (it is never reaped before the end).
  for (int i = 0; i < 200; ++i) {
    std::string stat;
    if (auto text = ReadFile(fmt::format("/proc/{}/stat", child)); text.ok()) stat = *text;
    if (stat.find(") Z") != std::string::npos) break;
    usleep(5000);
  }
  const std::string temp = fmt::format(".step-00000020.tmp-{}", child);
  WriteTrainerFiles(ckpt / temp);
  auto list = ListCheckpoints(ckpt.path(), VerifyLevel::kStructure);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].name, temp);
  EXPECT_EQ((*list)[1].verdict, fmt::format("abandoned (pid {} is gone)", child));
  std::vector<std::string> removed;
  ASSERT_TRUE(PruneCheckpoints(ckpt.path(), 1, &removed).ok());
  EXPECT_EQ(removed, std::vector<std::string>{temp});
  waitpid(child, nullptr, 0);
}

TEST(Checkpoint, NewestVerifiedSkipsACorruptedNewest) {
  ScratchDir ckpt;
  MakeHistory(ckpt);
  std::vector<std::string> warnings;
  auto newest = NewestVerified(ckpt.path(), VerifyLevel::kFull, &warnings);
  ASSERT_TRUE(newest.ok()) << newest.status().message();
  ASSERT_TRUE(newest->has_value());
  EXPECT_EQ((*newest)->step, 20);
  EXPECT_EQ((*newest)->path, ckpt / "step-00000020");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(
      warnings[0].rfind("step-00000030: skipped: model-00001-of-00002.safetensors: truncated", 0),
      0u)
      << warnings[0];
  auto none = NewestVerified(ckpt / "nope", VerifyLevel::kStructure, nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(Checkpoint, PruneKeepsTheNewestVerified) {
  ScratchDir ckpt;
  MakeHistory(ckpt);
  Save(ckpt, 5);
  std::vector<std::string> removed;
  ASSERT_TRUE(PruneCheckpoints(ckpt.path(), 1, &removed).ok());
  EXPECT_EQ(removed, (std::vector<std::string>{"step-00000010", "step-00000005",
                                               ".step-00000035.tmp-999999999"}));
  EXPECT_TRUE(Exists(ckpt / "step-00000020"));
  EXPECT_TRUE(Exists(ckpt / "step-00000030"));  // newer than the newest verified: kept as evidence
  EXPECT_TRUE(Exists(ckpt / (".step-00000040.tmp-" + std::to_string(::getpid()))));
  EXPECT_TRUE(Exists(ckpt / "gate-log.json"));
  EXPECT_TRUE(Exists(ckpt / "other"));
  EXPECT_EQ(PruneCheckpoints(ckpt.path(), 0).code(), StatusCode::kInvalidArgument);
}

TEST(Checkpoint, PruneKeepsN) {
  ScratchDir ckpt;
  for (int step : {1, 2, 3, 4, 5}) Save(ckpt, step);
  ASSERT_TRUE(PruneCheckpoints(ckpt.path(), 3).ok());
  auto list = ListCheckpoints(ckpt.path(), VerifyLevel::kStructure);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].step, 3);
  EXPECT_EQ((*list)[2].step, 5);
  ASSERT_TRUE(PruneCheckpoints(ckpt.path(), 10).ok());
  EXPECT_EQ(ListCheckpoints(ckpt.path(), VerifyLevel::kStructure)->size(), 3u);
}

}  // namespace
}  // namespace ek::ckpt
