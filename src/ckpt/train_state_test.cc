// Format 2: the training state beside the weights (train_state/, written by
// torch.distributed.checkpoint): finalize, verify and NewestResumable.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/test_util.h"

namespace ek::ckpt {
namespace {

using testing::Put;
using testing::SampleMeta;
using testing::ScratchDir;
using testing::WriteTrainerFiles;

CheckpointManifest StateMeta(int64_t step, int world = 4) {
  CheckpointManifest m = SampleMeta(step);
  m.train_state = TrainStateRef{};
  m.train_state->world = world;
  m.train_state->precision = "fp32";
  m.train_state->contents = {"model", "optimizer", "scheduler", "rng", "data"};
  return m;
}

// A fake DCP directory: C++ never parses these files, only lists and hashes them.
void WriteFakeState(const std::string& dir, int ranks = 2) {
  ASSERT_TRUE(MakeDirs(dir + "/train_state").ok());
  Put(dir + "/train_state/.metadata", std::string(300, 'm'));
  for (int r = 0; r < ranks; ++r) {
    Put(fmt::format("{}/train_state/__{}_0.distcp", dir, r), std::string(1000 + r, 'a' + r));
  }
}

std::string TempOf(const ScratchDir& ckpt, int64_t step) {
  return ckpt / fmt::format(".step-{:08d}.tmp-{}", step, ::getpid());
}

// A checkpoint with the training state, finalized as the trainer does.
std::string SaveWithState(const ScratchDir& ckpt, int64_t step) {
  std::string temp = TempOf(ckpt, step);
  WriteTrainerFiles(temp);
  WriteFakeState(temp);
  std::string final_dir = ckpt / StepDirName(step);
  Status st = FinalizeCheckpoint(temp, final_dir, StateMeta(step));
  EXPECT_TRUE(st.ok()) << st.message();
  return final_dir;
}

// A checkpoint of format 1: weights only, as evenkeel wrote before format 2.
std::string SaveFormatOne(const ScratchDir& ckpt, int64_t step) {
  std::string temp = TempOf(ckpt, step);
  WriteTrainerFiles(temp);
  std::string final_dir = ckpt / StepDirName(step);
  EXPECT_TRUE(FinalizeCheckpoint(temp, final_dir, SampleMeta(step)).ok());
  // Rewrite the manifest as format 1 (its files are the same).
  auto m = ReadCheckpointManifest(final_dir);
  EXPECT_TRUE(m.ok());
  m->format_version = 1;
  Put(final_dir + "/evenkeel-checkpoint.json", CheckpointManifestToJson(*m));
  return final_dir;
}

VerifyReport VerifyAt(const std::string& dir, VerifyLevel level) {
  auto r = VerifyCheckpoint(dir, level);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : VerifyReport{};
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& p : v) s += p + "\n";
  return s;
}

void FlipStateByte(const std::string& path, off_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, offset), 1);
  c ^= 0x21;
  ASSERT_EQ(::pwrite(fd, &c, 1, offset), 1);
  ::close(fd);
}

TEST(TrainState, FinalizeListsHashesAndVerifiesTheSubdirectory) {
  ScratchDir ckpt;
  std::string dir = SaveWithState(ckpt, 10);
  auto m = ReadCheckpointManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->format_version, 2);
  ASSERT_TRUE(m->train_state.has_value());
  EXPECT_EQ(m->train_state->world, 4);
  std::vector<std::string> names;
  for (const auto& f : m->files) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                             "model-00002-of-00002.safetensors",
                                             "model.safetensors.index.json", "tokenizer.json",
                                             "train_state/.metadata", "train_state/__0_0.distcp",
                                             "train_state/__1_0.distcp"}));
  EXPECT_EQ(m->files[6].size, 1000u);
  for (VerifyLevel level : {VerifyLevel::kStructure, VerifyLevel::kFull}) {
    VerifyReport r = VerifyAt(dir, level);
    EXPECT_TRUE(r.ok) << Joined(r.problems);
    EXPECT_TRUE(r.weights_ok);
    EXPECT_TRUE(r.has_train_state);
    EXPECT_TRUE(r.train_state_ok);
    EXPECT_EQ(r.train_state_world, 4);
    EXPECT_TRUE(r.train_state_problems.empty());
  }
  // The state's bytes count: 300 + 1000 + 1001 on top of the weights.
  auto list = ListCheckpoints(ckpt.path(), VerifyLevel::kStructure);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  VerifyReport r = VerifyAt(dir, VerifyLevel::kStructure);
  EXPECT_EQ((*list)[0].bytes, r.total_bytes);
  uint64_t top = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) top += e.file_size();
  }
  EXPECT_EQ(r.total_bytes, top + 2301);
  EXPECT_EQ((*list)[0].Resume(), "full");
}

TEST(TrainState, FinalizeRefusesWhatIsNotOneFlatStateDirectory) {
  ScratchDir ckpt;
  struct Case {
    const char* what;
    std::function<void(const std::string&)> make;
    bool with_state_meta;
    std::string error;  // after "TEMP/"
  };
  const std::vector<Case> cases = {
      {"a subdirectory without a train_state", [](const std::string& t) { WriteFakeState(t); },
       false,
       "train_state: a subdirectory, and the manifest has no train_state (a checkpoint without "
       "the training state is flat)"},
      {"another subdirectory",
       [](const std::string& t) {
         WriteFakeState(t);
         ASSERT_TRUE(MakeDirs(t + "/optim").ok());
       },
       true,
       "optim: a subdirectory, and the only one a checkpoint may have is train_state.dir "
       "'train_state'"},
      {"deeper nesting",
       [](const std::string& t) {
         WriteFakeState(t);
         ASSERT_TRUE(MakeDirs(t + "/train_state/rank0").ok());
       },
       true, "train_state/rank0: not a regular file (train_state holds files only)"},
      {"a symlink inside",
       [](const std::string& t) {
         WriteFakeState(t);
         std::filesystem::create_symlink("/etc/hostname", t + "/train_state/link");
       },
       true, "train_state/link: not a regular file (train_state holds files only)"},
      {"a train_state without the subdirectory", [](const std::string&) {}, true,
       "train_state: missing (the manifest's train_state names it)"},
  };
  for (const Case& c : cases) {
    std::string temp = TempOf(ckpt, 20);
    std::filesystem::remove_all(temp);
    WriteTrainerFiles(temp);
    c.make(temp);
    Status st = FinalizeCheckpoint(temp, ckpt / "step-00000020",
                                   c.with_state_meta ? StateMeta(20) : SampleMeta(20));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(st.message(), temp + "/" + c.error) << c.what;
    EXPECT_FALSE(std::filesystem::exists(ckpt / "step-00000020")) << c.what;
  }
  // A state without DCP's metadata or without a shard never gets a final name.
  for (const char* drop : {".metadata", "__0_0.distcp"}) {
    std::string temp = TempOf(ckpt, 20);
    std::filesystem::remove_all(temp);
    WriteTrainerFiles(temp);
    WriteFakeState(temp, 1);
    std::filesystem::remove(temp + "/train_state/" + drop);
    Status st = FinalizeCheckpoint(temp, ckpt / "step-00000020", StateMeta(20));
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << drop;
    EXPECT_NE(st.message().find("not finalized: train_state"), std::string::npos) << st.message();
    EXPECT_FALSE(std::filesystem::exists(ckpt / "step-00000020"));
  }
}

// Each way the state goes bad: the weights still verify, the state does not,
// and the problem names the file (and the byte).
TEST(TrainState, ABadStateFileFailsTheStateNotTheWeights) {
  struct Case {
    const char* what;
    std::function<void(const std::string&)> harm;
    VerifyLevel level;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"missing",
       [](const std::string& d) { std::filesystem::remove(d + "/train_state/__1_0.distcp"); },
       VerifyLevel::kStructure,
       "train_state/__1_0.distcp: missing (evenkeel-checkpoint.json lists it with 1001 bytes)"},
      {"truncated",
       [](const std::string& d) {
         std::filesystem::resize_file(d + "/train_state/__0_0.distcp", 600);
       },
       VerifyLevel::kStructure,
       "train_state/__0_0.distcp: truncated: file ends at byte 600, evenkeel-checkpoint.json "
       "records 1000 bytes"},
      {"corrupted",
       [](const std::string& d) { FlipStateByte(d + "/train_state/__0_0.distcp", 77); },
       VerifyLevel::kFull, "train_state/__0_0.distcp: checksum mismatch in bytes 0-999"},
      {"unlisted", [](const std::string& d) { Put(d + "/train_state/__2_0.distcp", "x"); },
       VerifyLevel::kStructure, "train_state/__2_0.distcp: not listed in evenkeel-checkpoint.json"},
      {"the directory gone",
       [](const std::string& d) { std::filesystem::remove_all(d + "/train_state"); },
       VerifyLevel::kStructure,
       "train_state: missing (evenkeel-checkpoint.json's train_state names it)"},
      {"metadata missing",
       [](const std::string& d) { std::filesystem::remove(d + "/train_state/.metadata"); },
       VerifyLevel::kStructure,
       "train_state/.metadata: missing (evenkeel-checkpoint.json lists it with 300 bytes)"},
  };
  for (const Case& c : cases) {
    ScratchDir ckpt;
    std::string dir = SaveWithState(ckpt, 30);
    c.harm(dir);
    VerifyReport r = VerifyAt(dir, c.level);
    EXPECT_FALSE(r.ok) << c.what;
    EXPECT_TRUE(r.weights_ok) << c.what << ": " << Joined(r.problems);
    EXPECT_TRUE(r.has_train_state) << c.what;
    EXPECT_FALSE(r.train_state_ok) << c.what;
    ASSERT_FALSE(r.train_state_problems.empty()) << c.what;
    EXPECT_EQ(r.train_state_problems[0], c.problem) << c.what;
    EXPECT_EQ(r.problems[0], c.problem) << c.what;  // in problems too
    if (c.level == VerifyLevel::kFull) {
      // Sizes alone cannot see a flipped byte.
      EXPECT_TRUE(VerifyAt(dir, VerifyLevel::kStructure).ok) << c.what;
    }
  }
}

TEST(TrainState, ABadWeightIsNotAStateProblem) {
  ScratchDir ckpt;
  std::string dir = SaveWithState(ckpt, 40);
  std::filesystem::resize_file(dir + "/model-00001-of-00002.safetensors", 30);
  VerifyReport r = VerifyAt(dir, VerifyLevel::kStructure);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.weights_ok);
  EXPECT_TRUE(r.has_train_state);
  EXPECT_TRUE(r.train_state_ok) << Joined(r.train_state_problems);
  // A format 1 checkpoint has no state, and verifies on its weights; a
  // train_state directory it does not name is a problem.
  std::string old = SaveFormatOne(ckpt, 5);
  r = VerifyAt(old, VerifyLevel::kFull);
  EXPECT_TRUE(r.ok) << Joined(r.problems);
  EXPECT_TRUE(r.weights_ok);
  EXPECT_FALSE(r.has_train_state);
  EXPECT_FALSE(r.train_state_ok);
  EXPECT_EQ(r.train_state_world, 0);
  WriteFakeState(old);
  r = VerifyAt(old, VerifyLevel::kStructure);
  EXPECT_FALSE(r.weights_ok);
  EXPECT_EQ(r.problems[0],
            "train_state: a subdirectory, but evenkeel-checkpoint.json has no train_state");
}

TEST(TrainState, NewestResumableFullSkipsABadStateForAnOlderFullOne) {
  ScratchDir ckpt;
  SaveWithState(ckpt, 10);
  SaveWithState(ckpt, 20);
  std::string bad = SaveWithState(ckpt, 30);
  FlipStateByte(bad + "/train_state/__1_0.distcp", 5);
  std::string old = SaveFormatOne(ckpt, 40);  // newest: weights only
  std::vector<std::string> warnings;
  auto got = NewestResumable(ckpt.path(), VerifyLevel::kFull, ResumeLevel::kFull, &warnings);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->entry.step, 20);
  EXPECT_EQ((*got)->level, ResumeLevel::kFull);
  EXPECT_EQ(warnings,
            (std::vector<std::string>{
                "step-00000040: skipped: no training state, saved before format 2 or without "
                "it: weights only",
                "step-00000030: skipped: training state: train_state/__1_0.distcp: checksum "
                "mismatch in bytes 0-1000"}));
  // At kStructure the flipped byte is not seen: step 30 resumes fully.
  warnings.clear();
  got = NewestResumable(ckpt.path(), VerifyLevel::kStructure, ResumeLevel::kFull, &warnings);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->entry.step, 30);
  // Weights wanted: the newest with good weights, whatever its state.
  warnings.clear();
  got = NewestResumable(ckpt.path(), VerifyLevel::kFull, ResumeLevel::kWeights, &warnings);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->entry.step, 40);
  EXPECT_EQ((*got)->level, ResumeLevel::kWeights);
  EXPECT_TRUE(warnings.empty()) << Joined(warnings);
  // Bad weights at 40: weights wanted skips to 30 (its state's flaw does not matter).
  std::filesystem::resize_file(old + "/model-00002-of-00002.safetensors", 20);
  got = NewestResumable(ckpt.path(), VerifyLevel::kFull, ResumeLevel::kWeights, &warnings);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->entry.step, 30);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("step-00000040: skipped: model-00002-of-00002.safetensors: ", 0), 0u)
      << warnings[0];
}

TEST(TrainState, NewestResumableWithoutAnyStateGivesWeightsAndSaysWhy) {
  ScratchDir ckpt;
  SaveFormatOne(ckpt, 10);
  SaveFormatOne(ckpt, 20);
  std::string bad = SaveWithState(ckpt, 30);
  std::filesystem::remove(bad + "/train_state/.metadata");
  std::string broken = SaveFormatOne(ckpt, 40);
  std::filesystem::remove(broken + "/config.json");
  std::vector<std::string> warnings;
  auto got = NewestResumable(ckpt.path(), VerifyLevel::kFull, ResumeLevel::kFull, &warnings);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->entry.step, 30);
  EXPECT_EQ((*got)->level, ResumeLevel::kWeights);
  ASSERT_EQ(warnings.size(), 2u) << Joined(warnings);
  EXPECT_EQ(warnings[0].rfind("step-00000040: skipped: config.json: missing", 0), 0u)
      << warnings[0];
  EXPECT_EQ(warnings[1],
            "no checkpoint has a verified training state; resuming weights only from "
            "step-00000030: its training state does not verify: train_state/.metadata: missing "
            "(evenkeel-checkpoint.json lists it with 300 bytes)");
  // Without the step with a bad state, the reason is that there is none.
  std::filesystem::remove_all(bad);
  warnings.clear();
  got = NewestResumable(ckpt.path(), VerifyLevel::kFull, ResumeLevel::kFull, &warnings);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->entry.step, 20);
  EXPECT_EQ((*got)->level, ResumeLevel::kWeights);
  ASSERT_EQ(warnings.size(), 2u) << Joined(warnings);
  EXPECT_EQ(warnings[1],
            "no checkpoint has a verified training state; resuming weights only from "
            "step-00000020: no training state, saved before format 2 or without it");
  // Nothing verifies: nullopt; a folder that does not exist: nullopt.
  std::filesystem::remove_all(ckpt / "step-00000010");
  std::filesystem::remove_all(ckpt / "step-00000020");
  warnings.clear();
  got = NewestResumable(ckpt.path(), VerifyLevel::kFull, ResumeLevel::kFull, &warnings);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(warnings.size(), 1u);
  got = NewestResumable(ckpt / "nope", VerifyLevel::kFull, ResumeLevel::kWeights, nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TEST(TrainState, PruneAndListTakeTheSubdirectory) {
  ScratchDir ckpt;
  for (int step : {1, 2, 3}) SaveWithState(ckpt, step);
  std::vector<std::string> removed;
  ASSERT_TRUE(PruneCheckpoints(ckpt.path(), 2, &removed).ok());
  EXPECT_EQ(removed, std::vector<std::string>{"step-00000001"});
  EXPECT_FALSE(std::filesystem::exists(ckpt / "step-00000001"));
  auto list = ListCheckpoints(ckpt.path(), VerifyLevel::kFull);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  for (const auto& e : *list) EXPECT_EQ(e.Resume(), "full") << e.verdict;
  std::filesystem::remove(ckpt / "step-00000003/train_state/__0_0.distcp");
  list = ListCheckpoints(ckpt.path(), VerifyLevel::kStructure);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)[1].Resume(), "weights");
  EXPECT_FALSE((*list)[1].ok);
  // A temp directory's bytes count the state too.
  std::string temp = TempOf(ckpt, 9);
  WriteTrainerFiles(temp);
  WriteFakeState(temp);
  list = ListCheckpoints(ckpt.path(), VerifyLevel::kStructure);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[2].Resume(), "-");
  uint64_t want = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(temp)) {
    if (e.is_regular_file()) want += e.file_size();
  }
  EXPECT_EQ((*list)[2].bytes, want);
}

}  // namespace
}  // namespace ek::ckpt
