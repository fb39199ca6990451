// The launcher's resume level (checkpoint.resume, checkpoint format 2): what
// node 0 chooses from a checkpoint folder of real (small) checkpoints, what it
// prints, records (resume.json, attempt.json) and hands the ranks
// (EVENKEEL_RESUME_LEVEL), with a torchrun stand-in that dumps its environment.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/test_util.h"
#include "core/fault_env.h"
#include "core/file.h"
#include "launch/launcher.h"
#include "launch/records.h"

namespace ek::launch {
namespace {

class LauncherResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_launcher_resume_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ASSERT_TRUE(MakeDirs(dir_ + "/bin").ok());
    ASSERT_TRUE(MakeDirs(dir_ + "/run").ok());
    ASSERT_TRUE(MakeDirs(dir_ + "/ckpt").ok());
    ResumeScript(dir_ + "/bin/torchrun", "env > " + dir_ + "/torchrun-env\nexit 1\n");
    ResumeScript(dir_ + "/bin/python", "exit 0\n");
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (dir_ + "/bin:" + old_path_).c_str(), 1);
    o_.run_path = dir_ + "/run/run.toml";
    o_.evenkeel_exe = "/bin/true";
    o_.accept_gate_fail = true;  // no data, no model: the gate FAILs; the launch goes on
    machine_.SetVars({});
    o_.files = &machine_;
    o_.expand_nodelist = [](const std::string&) -> Result<std::vector<std::string>> {
      return std::vector<std::string>{};
    };
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  static void ResumeScript(const std::string& path, const std::string& body) {
    ASSERT_TRUE(WriteFileAtomic(path, "#!/bin/sh\n" + body).ok());
    ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
  }

  void WriteRunWithResume(const std::string& resume_key) {
    std::string toml = fmt::format(
        "[run]\nname = \"t\"\n[cluster]\nnodes = 1\ngpus_per_node = 1\n"
        "[checkpoint]\ndir = \"{}/ckpt\"\n{}"
        "[launch]\ngate_timeout_s = 5\nstop_grace_s = 1\n"
        "[retry]\nmax_restarts = 0\nbackoff_s = 0\n",
        dir_, resume_key);
    ASSERT_TRUE(WriteFileAtomic(o_.run_path, toml).ok());
  }

  // A finalized checkpoint at `step`, with a fake DCP training state or without one.
  void SaveStep(int64_t step, bool with_state) {
    const std::string temp = fmt::format("{}/ckpt/.step-{:08d}.tmp-{}", dir_, step, ::getpid());
    ckpt::testing::WriteTrainerFiles(temp);
    ckpt::CheckpointManifest meta = ckpt::testing::SampleMeta(step);
    if (with_state) {
      ASSERT_TRUE(MakeDirs(temp + "/train_state").ok());
      ckpt::testing::Put(temp + "/train_state/.metadata", "meta");
      ckpt::testing::Put(temp + "/train_state/__0_0.distcp", std::string(100, 's'));
      meta.train_state = ckpt::TrainStateRef{};
      meta.train_state->precision = "fp32";
      meta.train_state->contents = {"model", "optimizer"};
    }
    Status st = ckpt::FinalizeCheckpoint(
        temp, fmt::format("{}/ckpt/{}", dir_, ckpt::StepDirName(step)), meta);
    ASSERT_TRUE(st.ok()) << st.message();
  }

  // Launches once; returns what the ranks were handed and what was said.
  struct Seen {
    std::string env, said;
    ResumeChoice choice;
    std::string attempt_json;
  };
  Seen LaunchOnce() {
    Seen s;
    Say say = [&s](const std::string& line) { s.said += line + "\n"; };
    auto r = Launch(o_, say);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (auto env = ReadFile(dir_ + "/torchrun-env"); env.ok()) s.env = *env;
    const std::string attempt = dir_ + "/ckpt/launch/t/attempt-001";
    auto text = ReadFile(attempt + "/resume.json");
    EXPECT_TRUE(text.ok()) << text.status().message();
    if (text.ok()) {
      auto choice = ResumeChoiceFromJson(*text, "resume.json", 1);
      EXPECT_TRUE(choice.ok()) << choice.status().message();
      if (choice.ok()) s.choice = *choice;
    }
    if (auto a = ReadFile(attempt + "/attempt.json"); a.ok()) s.attempt_json = *a;
    return s;
  }

  std::string dir_, old_path_;
  FaultInjectionEnv machine_{Env::Default()};
  LaunchOptions o_;
};

TEST_F(LauncherResumeTest, AFullCheckpointIsResumedFullyAndTheRanksAreToldSo) {
  WriteRunWithResume("");  // resume = "full" by default
  SaveStep(10, true);
  Seen s = LaunchOnce();
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_FROM=" + dir_ + "/ckpt/step-00000010\n"), std::string::npos)
      << s.env;
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_LEVEL=full\n"), std::string::npos) << s.env;
  EXPECT_EQ(s.choice.resume_level, "full");
  EXPECT_NE(s.said.find("launch: attempt 1 (resuming from checkpoint step 10, full state)"),
            std::string::npos)
      << s.said;
  EXPECT_NE(s.attempt_json.find("\"resume_level\": \"full\""), std::string::npos) << s.attempt_json;
}

TEST_F(LauncherResumeTest, ANewestWithoutStateIsSkippedForAnOlderFullOneWithAWarning) {
  WriteRunWithResume("resume = \"full\"\n");
  SaveStep(10, true);
  SaveStep(20, false);
  Seen s = LaunchOnce();
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_FROM=" + dir_ + "/ckpt/step-00000010\n"), std::string::npos)
      << s.env;
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_LEVEL=full\n"), std::string::npos) << s.env;
  EXPECT_NE(s.said.find("resuming from checkpoint step 10 (step-00000020: skipped: no training "
                        "state, saved before format 2 or without it: weights only), full state"),
            std::string::npos)
      << s.said;
}

TEST_F(LauncherResumeTest, WithoutAnyStateTheWeightsAreResumedAndTheLineSaysWhy) {
  WriteRunWithResume("");
  SaveStep(10, false);
  Seen s = LaunchOnce();
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_LEVEL=weights\n"), std::string::npos) << s.env;
  EXPECT_EQ(s.choice.resume_level, "weights");
  EXPECT_NE(s.said.find("resuming from checkpoint step 10 (no checkpoint has a verified training "
                        "state; resuming weights only from step-00000010: no training state, "
                        "saved before format 2 or without it), weights only"),
            std::string::npos)
      << s.said;
  EXPECT_NE(s.attempt_json.find("\"resume_level\": \"weights\""), std::string::npos)
      << s.attempt_json;
}

TEST_F(LauncherResumeTest, ResumeWeightsTakesTheNewestWeightsWhateverTheirState) {
  WriteRunWithResume("resume = \"weights\"\n");
  SaveStep(10, true);
  SaveStep(20, false);
  Seen s = LaunchOnce();
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_FROM=" + dir_ + "/ckpt/step-00000020\n"), std::string::npos)
      << s.env;
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_LEVEL=weights\n"), std::string::npos) << s.env;
  EXPECT_NE(s.said.find("resuming from checkpoint step 20, weights only"), std::string::npos)
      << s.said;
}

TEST_F(LauncherResumeTest, FromTheStartNoLevelIsHandedAndTheRecordSaysNull) {
  WriteRunWithResume("");
  Seen s = LaunchOnce();
  EXPECT_NE(s.env.find("EVENKEEL_RESUME_FROM=none\n"), std::string::npos) << s.env;
  EXPECT_EQ(s.env.find("EVENKEEL_RESUME_LEVEL="), std::string::npos) << s.env;
  EXPECT_EQ(s.choice.resume_level, "");
  EXPECT_NE(s.attempt_json.find("\"resume_level\": null"), std::string::npos) << s.attempt_json;
}

}  // namespace
}  // namespace ek::launch
