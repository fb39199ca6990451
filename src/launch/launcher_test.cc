// The launcher end to end with stand-ins for torchrun and python (shell
// scripts): how it finds its parts (launch.torchrun, launch.python, the
// trainer), and that a coordination record it cannot write stops it with a
// kIoError (exit 74) naming the file, through an injected Env.
#include "launch/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/fake_clock.h"
#include "core/fault_env.h"
#include "core/file.h"
#include "gate/gate.h"
#include "launch/records.h"
#include "launch/session_lock.h"

namespace ek::launch {
namespace {

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_launcher_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ASSERT_TRUE(MakeDirs(dir_ + "/bin").ok());
    ASSERT_TRUE(MakeDirs(dir_ + "/run").ok());
    // torchrun: records what it was asked to run and fails, as a crashed attempt does.
    Script(dir_ + "/bin/torchrun", "echo \"$@\" > " + dir_ + "/torchrun-args\nexit 1\n");
    Script(dir_ + "/bin/python", "exit 0\n");  // "can import evenkeel.train"
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (dir_ + "/bin:" + old_path_).c_str(), 1);
    o_.run_path = dir_ + "/run/run.toml";
    o_.evenkeel_exe = "/bin/true";
    o_.accept_gate_fail = true;  // no data, no model: the gate FAILs; the launch goes on, as asked
    machine_.SetVars({});        // no SLURM_* or EVENKEEL_* of the machine running the test
    o_.files = &machine_;
    o_.expand_nodelist = [](const std::string&) -> Result<std::vector<std::string>> {
      return std::vector<std::string>{};
    };
    WriteRun("");
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::string rm = "rm -rf " + dir_;
    ASSERT_EQ(std::system(rm.c_str()), 0);
  }

  static void Script(const std::string& path, const std::string& body) {
    ASSERT_TRUE(WriteFileAtomic(path, "#!/bin/sh\n" + body).ok());
    ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
  }

  void WriteRun(const std::string& launch_keys) {
    std::string toml =
        "[run]\nname = \"t\"\n[cluster]\nnodes = 1\ngpus_per_node = 1\n"
        "[checkpoint]\ndir = \"" +
        dir_ +
        "/ckpt\"\n"
        "[launch]\ngate_timeout_s = 5\nstop_grace_s = 1\n" +
        launch_keys + "[retry]\nmax_restarts = 0\nbackoff_s = 0\n";
    ASSERT_TRUE(WriteFileAtomic(o_.run_path, toml).ok());
  }

  // Node 0 of a two-node run (gate_timeout_s = 1, no restarts) whose node 1 never reports:
  // the gate's 1 s wait for it passes on `clock`, without a real second.
  void SetUpNodeZeroOfTwo(FakeClock* clock) {
    std::string toml =
        "[run]\nname = \"t\"\n[cluster]\nnodes = 2\ngpus_per_node = 1\n"
        "[checkpoint]\ndir = \"" +
        dir_ +
        "/ckpt\"\n"
        "[launch]\ngate_timeout_s = 1\nstop_grace_s = 1\n"
        "[retry]\nmax_restarts = 0\nbackoff_s = 0\n";
    ASSERT_TRUE(WriteFileAtomic(o_.run_path, toml).ok());
    o_.node_rank = 0;
    o_.accept_gate_fail = false;
    machine_.SetVar("EVENKEEL_RDZV_ENDPOINT", "127.0.0.1:29999");
    machine_.SetClock(clock);
  }

  std::string Session() const { return dir_ + "/ckpt/launch/t"; }
  std::string TorchrunArgs() const {
    auto text = ReadFile(dir_ + "/torchrun-args");
    return text.ok() ? *text : "";
  }

  std::string dir_, old_path_;
  FaultInjectionEnv machine_{Env::Default()};  // the launcher's environment variables
  LaunchOptions o_;
  Say say_ = [](const std::string&) {};
};

TEST_F(LauncherTest, ABareTorchrunIsLookedUpOnPathAndThePythonBesideItRunsTheTrainerModule) {
  // A torchrun beside the run file must not be taken for the bare name.
  Script(dir_ + "/run/torchrun", "exit 0\n");
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, kExitBudgetSpent);  // torchrun failed, retry.max_restarts = 0
  std::string args = TorchrunArgs();
  EXPECT_NE(args.find("-- " + dir_ + "/bin/python -m evenkeel.train " + o_.run_path),
            std::string::npos)
      << args;
  auto command = ReadFile(Session() + "/attempt-001/command-node-0.txt");
  ASSERT_TRUE(command.ok());
  EXPECT_EQ(command->rfind(dir_ + "/bin/torchrun ", 0), 0u) << *command;
}

// Node 0's resume choice is a record (the other nodes follow it) and what every rank is handed.
TEST_F(LauncherTest, TheResumeChoiceIsRecordedAndHandedToTheRanks) {
  Script(dir_ + "/bin/torchrun", "env > " + dir_ + "/torchrun-env\nexit 1\n");
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto env = ReadFile(dir_ + "/torchrun-env");
  ASSERT_TRUE(env.ok());
  EXPECT_NE(env->find("EVENKEEL_RESUME_FROM=none\n"), std::string::npos) << *env;
  EXPECT_EQ(env->find("EVENKEEL_RESUME_MANIFEST_XXH3="), std::string::npos)
      << "no checkpoint, no digest";
  const std::string path = Session() + "/attempt-001/resume.json";
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto choice = ResumeChoiceFromJson(*text, path, 1);
  ASSERT_TRUE(choice.ok()) << choice.status().message();
  EXPECT_EQ(choice->resume_from, "none");
  EXPECT_EQ(choice->step, -1);
  EXPECT_EQ(choice->where, "from the start");
}

TEST_F(LauncherTest, ATorchrunNotOnPathIsNotFoundNamingIt) {
  Script(dir_ + "/run/torchrun",
         "exit 0\n");  // beside the run file: not where a bare name is looked for
  ::unlink((dir_ + "/bin/torchrun").c_str());
  auto r = Launch(o_, say_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("launch.torchrun 'torchrun' is not on PATH"),
            std::string::npos)
      << r.status().message();
}

TEST_F(LauncherTest, ATorchrunWithASlashIsAPathRelativeToTheRunFile) {
  ASSERT_TRUE(MakeDirs(dir_ + "/run/venv/bin").ok());
  Script(dir_ + "/run/venv/bin/torchrun", "echo \"$@\" > " + dir_ + "/torchrun-args\nexit 1\n");
  Script(dir_ + "/run/venv/bin/python", "exit 0\n");
  WriteRun("torchrun = \"venv/bin/torchrun\"\n");
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(TorchrunArgs().find("-- " + dir_ + "/run/venv/bin/python -m evenkeel.train"),
            std::string::npos)
      << TorchrunArgs();
  WriteRun("torchrun = \"nowhere/torchrun\"\n");
  auto missing = Launch(o_, say_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(
                "launch.torchrun 'nowhere/torchrun' (" + dir_ +
                "/run/nowhere/torchrun, relative to the run file) is not an executable file"),
            std::string::npos)
      << missing.status().message();
}

TEST_F(LauncherTest, LaunchPythonFollowsTheSameRuleAndLaunchTrainerIsAScriptBesideTheRunFile) {
  ASSERT_TRUE(MakeDirs(dir_ + "/other").ok());
  Script(dir_ + "/other/py3", "exit 0\n");
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/run/train.py", "").ok());
  ::setenv("PATH", (dir_ + "/bin:" + dir_ + "/other:" + old_path_).c_str(), 1);
  WriteRun("python = \"py3\"\ntrainer = \"train.py\"\n");
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(
      TorchrunArgs().find("-- " + dir_ + "/other/py3 " + dir_ + "/run/train.py " + o_.run_path),
      std::string::npos)
      << TorchrunArgs();
  WriteRun("python = \"no-such-python\"\n");
  auto no_python = Launch(o_, say_);
  ASSERT_FALSE(no_python.ok());
  EXPECT_NE(no_python.status().message().find("launch.python 'no-such-python' is not on PATH"),
            std::string::npos)
      << no_python.status().message();
  WriteRun("trainer = \"gone.py\"\n");
  auto no_trainer = Launch(o_, say_);
  ASSERT_FALSE(no_trainer.ok());
  EXPECT_EQ(no_trainer.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_trainer.status().message().find("launch.trainer 'gone.py': " + dir_ +
                                               "/run/gone.py does not exist"),
            std::string::npos)
      << no_trainer.status().message();
}

TEST_F(LauncherTest, ATrainerModuleThePythonCannotImportIsNotFoundNamingThePythonAndWhatToInstall) {
  Script(dir_ + "/bin/python",
         "echo 'Traceback (most recent call last):' >&2\n"
         "echo \"ModuleNotFoundError: No module named 'evenkeel'\" >&2\nexit 1\n");
  auto r = Launch(o_, say_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("the Python module evenkeel.train, cannot be imported by " + dir_ +
                   "/bin/python (the python beside " + dir_ +
                   "/bin/torchrun): ModuleNotFoundError: No module named 'evenkeel'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("install evenkeel's Python package"), std::string::npos) << m;
  EXPECT_EQ(TorchrunArgs(), "") << "nothing may start";
}

// Every coordination record, in the order a one-node launch writes it: a write
// that fails stops the launch with kIoError (exit 74) naming the file, and
// nothing is left half written under the record's name. The same launch
// without the fault goes through.
TEST_F(LauncherTest, ARecordThatCannotBeWrittenStopsTheLaunchNamingIt) {
  struct Case {
    const char* match;  // the fault rule's path substring (a file's temp name holds its name)
    FileOp op;
    const char* path;  // the record, under the session folder
  };
  const std::vector<Case> cases = {
      {"/ckpt/launch/t", FileOp::kCreateDirs, ""},
      {"/heartbeat/node-0", FileOp::kCreateDirs, "/heartbeat/node-0"},
      {"/gate", FileOp::kCreateDirs, "/gate"},
      {"verdict.json", FileOp::kOpen, "/gate/verdict.json"},
      {"resume.json", FileOp::kRename, "/attempt-001/resume.json"},
      {"/attempt-001/fr", FileOp::kCreateDirs, "/attempt-001/fr"},
      {"command-node-0.txt", FileOp::kOpen, "/attempt-001/command-node-0.txt"},
      {"node-0.json", FileOp::kRename, "/attempt-001/node-0.json"},
      {"attempt.json", FileOp::kAppend, "/attempt-001/attempt.json"},
      {"decision.json", FileOp::kSync, "/attempt-001/decision.json"},
      {"summary.json", FileOp::kRename, "/summary.json"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    std::string rm = "rm -rf " + dir_ + "/ckpt";
    ASSERT_EQ(std::system(rm.c_str()), 0);
    FaultInjectionEnv files(&machine_);
    files.Add(FaultRule::Fail(c.op, c.match, ENOSPC));
    o_.files = &files;
    auto r = Launch(o_, say_);
    ASSERT_FALSE(r.ok()) << "exit " << r->exit_code;
    EXPECT_EQ(files.injected(), 1);
    EXPECT_EQ(r.status().code(), StatusCode::kIoError);
    EXPECT_NE(r.status().message().find(Session() + c.path), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("No space left on device"), std::string::npos)
        << r.status().message();
    if (c.op != FileOp::kCreateDirs) {
      EXPECT_FALSE(FileExists(Session() + c.path)) << "half written";
    }
  }
  std::string rm = "rm -rf " + dir_ + "/ckpt";
  ASSERT_EQ(std::system(rm.c_str()), 0);
  FaultInjectionEnv files(&machine_);
  o_.files = &files;
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, kExitBudgetSpent);
  for (const Case& c : cases) EXPECT_TRUE(FileExists(Session() + c.path)) << c.path;
}

// decision.json under each of the standard write faults: an error naming it,
// no decision half written (a node that follows it would read a broken one).
TEST_F(LauncherTest, EveryWriteFaultOfTheDecisionIsAnIoErrorAndLeavesNoHalfRecord) {
  for (const WriteFault& fault : WriteFaults("decision.json")) {
    SCOPED_TRACE(fault.name);
    std::string rm = "rm -rf " + dir_ + "/ckpt";
    ASSERT_EQ(std::system(rm.c_str()), 0);
    FaultInjectionEnv files(&machine_);
    files.Add(fault.rule);
    o_.files = &files;
    auto r = Launch(o_, say_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kIoError);
    for (const auto& want : fault.expect)
      EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(Session() + "/attempt-001/decision.json"),
              std::string::npos)
        << r.status().message();
    EXPECT_FALSE(FileExists(Session() + "/attempt-001/decision.json"));
    EXPECT_TRUE(FileExists(Session() + "/attempt-001/attempt.json"));
    EXPECT_FALSE(FileExists(Session() + "/summary.json"));
  }
}

// One launcher per run: while another holds the session's lock, a launch
// starts nothing (no gate, no torchrun), writes nothing into the session and
// says who holds it; exit 75. Once the holder is gone it runs.
TEST_F(LauncherTest, ASecondLauncherOfTheSameRunIsRefusedNamingTheFirst) {
  ASSERT_TRUE(MakeDirs(Session()).ok());
  auto held = SessionLock::Acquire(Session() + "/launch.lock", {"n7", 4242, 1764586923, "t", 0},
                                   Env::Default());
  ASSERT_TRUE(held.ok()) << held.status().message();
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, kExitRunBusy);
  EXPECT_NE(r->refused.find(Session() + "/launch.lock is held by pid 4242 on host n7"),
            std::string::npos)
      << r->refused;
  EXPECT_EQ(TorchrunArgs(), "") << "nothing may start";
  EXPECT_FALSE(FileExists(Session() + "/gate/verdict.json"));
  EXPECT_FALSE(FileExists(Session() + "/summary.json"));
  ASSERT_TRUE(held->Release().ok());
  std::vector<std::string> said;
  auto again = Launch(o_, [&](const std::string& line) { said.push_back(line); });
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->refused, "");
  EXPECT_EQ(again->exit_code, kExitBudgetSpent);  // torchrun "fails", max_restarts = 0
  for (const auto& line : said) EXPECT_EQ(line.find("stale"), std::string::npos) << line;
  EXPECT_EQ(*ReadFile(Session() + "/launch.lock"), "") << "released cleanly: the record is emptied";
}

// The lock's record cannot be written: an I/O error naming the lock file (exit 74), nothing
// started.
TEST_F(LauncherTest, ALockThatCannotBeRecordedIsAnIoError) {
  FaultInjectionEnv files(&machine_);
  files.Add(FaultRule::Fail(FileOp::kAppend, "launch.lock", ENOSPC));
  o_.files = &files;
  auto r = Launch(o_, say_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find(Session() + "/launch.lock"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(TorchrunArgs(), "");
}

// A wrapper killed before its trainer ended (torchrun SIGKILLs the wrapper's group 30 s
// after its SIGTERM) leaves the record it keeps from the start, saying "running". The
// launcher completes it, marked as inferred, in the file and in its node record; a
// completion it cannot write is an I/O error naming the file.
TEST_F(LauncherTest, ARankRecordItsWrapperLeftRunningIsCompletedAsInferred) {
  // torchrun: plays a wrapper killed mid-run, then fails as torchrun does.
  Script(dir_ + "/bin/torchrun",
         "while [ $# -gt 0 ]; do [ \"$1\" = --attempt-dir ] && d=\"$2\"; shift; done\n"
         "printf '{\"rank\": 0, \"local_rank\": 0, \"node_rank\": 0, \"host\": \"h\", \"pid\": "
         "2147483646, "
         "\"start\": 1700000000.0, \"end\": 0, \"exit_code\": -1, \"signal\": 0, \"log\": "
         "\"%s/rank-0.log\", "
         "\"status\": \"running\", \"stop_signal\": 0, \"stop_time\": 0, \"state_at_stop\": \"\", "
         "\"inferred\": false, "
         "\"note\": \"\"}' \"$d\" > \"$d/rank-0.json\"\n"
         "echo 'step 3' > \"$d/rank-0.log\"\nexit 1\n");
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, kExitBudgetSpent);
  const std::string path = Session() + "/attempt-001/rank-0.json";
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  auto rec = RankRecordFromJson(*text, path);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_TRUE(rec->inferred);
  EXPECT_EQ(rec->status, "running");
  EXPECT_EQ(rec->signal, SIGKILL);
  EXPECT_GT(rec->end, rec->start);
  EXPECT_NE(rec->note.find("its wrapper was killed while its record said \"running\""),
            std::string::npos)
      << rec->note;
  EXPECT_NE(r->summary_json.find(
                "\"cause\": \"killed by SIGKILL (inferred: its wrapper was killed first)\""),
            std::string::npos)
      << r->summary_json;
  auto node = ReadFile(Session() + "/attempt-001/node-0.json");
  ASSERT_TRUE(node.ok());
  auto n = NodeRecordFromJson(*node, "node-0.json");
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(n->ranks.size(), 1u);
  EXPECT_TRUE(n->ranks[0].inferred);

  std::string rm = "rm -rf " + dir_ + "/ckpt";
  ASSERT_EQ(std::system(rm.c_str()), 0);
  FaultInjectionEnv files(&machine_);
  files.Add(FaultRule::Fail(FileOp::kRename, "rank-0.json", ENOSPC));
  o_.files = &files;
  auto failed = Launch(o_, say_);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kIoError);
  EXPECT_NE(failed.status().message().find(path), std::string::npos) << failed.status().message();
}

// A launcher started again after its predecessor died counts the session's earlier
// attempts in its summary: one with attempt.json as written, one without (its
// launcher died during it) from its last records, marked inferred; an attempt.json
// that cannot be read is said and the attempt counted from its other records.
TEST_F(LauncherTest, EarlierAttemptsOfTheSessionAreCountedInTheSummary) {
  const double now = static_cast<double>(::time(nullptr));
  ASSERT_TRUE(MakeDirs(Session() + "/attempt-001").ok());
  ASSERT_TRUE(MakeDirs(Session() + "/attempt-002").ok());
  ASSERT_TRUE(MakeDirs(Session() + "/attempt-003").ok());
  ASSERT_TRUE(
      WriteFileAtomic(
          Session() + "/attempt-001/attempt.json",
          R"({"attempt": 1, "start": 10, "end": 1810, "seconds": 1800.0, "outcome": "failed", )"
          R"("gpu_hours": 0.5, "gpu_hours_lost": 0.25, "flight_recorder": {"verdict": "", )"
          R"("conclusive": false}, "decision": {"attempt": 1, "action": "restart", "reason": "r"}, )"
          R"("causes": [{"rank": 0, "cause": "killed by SIGKILL"}], "nodes": []})"
          "\n")
          .ok());
  RankRecord killed;
  killed.rank = 0;
  killed.local_rank = 0;
  killed.node_rank = 0;
  killed.pid = 2147483646;
  killed.start = now - 7200;
  killed.end = now - 3600;  // an hour, one rank: 1 GPU-hour
  killed.signal = SIGTERM;
  killed.stop_signal = SIGTERM;
  killed.stop_time = now - 3601;
  killed.status = "exited";
  ASSERT_TRUE(
      WriteFileAtomic(Session() + "/attempt-002/rank-0.json", RankRecordToJson(killed)).ok());
  ASSERT_TRUE(WriteFileAtomic(Session() + "/attempt-003/attempt.json", R"({"attempt": 3})").ok());
  std::vector<std::string> said;
  auto r = Launch(o_, [&](const std::string& line) { said.push_back(line); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto s = LaunchSummaryFromJson(r->summary_json, "summary");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->attempts, 4);
  EXPECT_GE(s->gpu_hours_used, 1.5);
  EXPECT_LT(s->gpu_hours_used, 1.51);
  EXPECT_GE(s->gpu_hours_lost, 1.25);  // attempt 2 saved nothing: all of its hour is lost
  const std::string& j = r->summary_json;
  EXPECT_NE(j.find("{\"earlier_launch\": true, \"inferred\": false, \"attempt\": 1, "),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("{\"earlier_launch\": true, \"inferred\": true, \"attempt\": 2, "),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"seconds\": 3600.0, \"outcome\": \"interrupted\", \"gpu_hours\": 1.0000"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("start from rank-0.json start, end from rank-0.json end"), std::string::npos)
      << j;
  EXPECT_NE(j.find("{\"earlier_launch\": false, \"inferred\": false, \"attempt\": 4, "),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"attempts_this_launch\": 1, \"attempts_inferred\": 2"), std::string::npos)
      << j;
  EXPECT_NE(j.find("{\"attempt\": 1, \"rank\": 0, \"cause\": \"killed by SIGKILL\"}"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("{\"attempt\": 2, \"rank\": 0, \"cause\": \"killed by SIGTERM\"}"),
            std::string::npos)
      << j;
  bool warned = false, counted = false;
  for (const auto& line : said) {
    warned |= line.find(
                  "attempt-003/attempt.json: start: missing; counting the attempt from its other "
                  "records") != std::string::npos;
    counted |=
        line.find(
            "launch: attempt 2 of an earlier launch has no attempt.json (its launcher died): "
            "counted as "
            "3600 s from its last records (1.0000 GPU-hours, inferred)") != std::string::npos;
  }
  EXPECT_TRUE(warned);
  EXPECT_TRUE(counted);
}

// Node 0 clears the previous launch's gate records (the parts and the verdict) but
// not a temp file another node is writing its part through: removing that would
// fail the other node's rename (seen: node 1 exited 74 with "rename ... No such file").
TEST_F(LauncherTest, NodeZeroClearsStaleGateRecordsButNotAPartBeingWritten) {
  FakeClock clock;
  SetUpNodeZeroOfTwo(&clock);
  const std::string gate = Session() + "/gate";
  ASSERT_TRUE(MakeDirs(gate).ok());
  for (const char* name : {"node-1.json", "verdict.json", ".node-1.json.tmp.99.1"}) {
    ASSERT_TRUE(WriteFileAtomic(gate + "/" + name, "{}").ok());
  }
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, kExitGateRefused);  // node 1 never reports within 1 s
  EXPECT_GE(clock.slept(), 0.99);
  EXPECT_FALSE(FileExists(gate + "/node-1.json")) << "the stale part is removed";
  EXPECT_TRUE(FileExists(gate + "/.node-1.json.tmp.99.1")) << "a part being written is left alone";
  EXPECT_EQ(TorchrunArgs(), "") << "nothing may start";
}

// The part node 0 exchanges is the gate's pass log with the launcher's nonce and start time
// first, written by the one JSON writer: the gate's reader and GatePartNonce both read it.
TEST_F(LauncherTest, TheGatePartLeadsWithTheNonceAndReadsBackAsAGateReport) {
  FakeClock clock;
  SetUpNodeZeroOfTwo(&clock);
  auto r = Launch(o_, say_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, kExitGateRefused);  // node 1 never reports
  const std::string path = Session() + "/gate/node-0.json";
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_TRUE(text->starts_with("{\n  \"launch_nonce\": \"")) << *text;
  EXPECT_NE(text->find(",\n  \"launch_started\": "), std::string::npos) << *text;
  EXPECT_NE(text->find(",\n  \"run\": \"t\",\n"), std::string::npos) << *text;
  EXPECT_TRUE(text->ends_with("\n}\n")) << *text;
  auto nonce = GatePartNonce(*text, path);
  ASSERT_TRUE(nonce.ok()) << nonce.status().message();
  EXPECT_FALSE(nonce->empty());
  auto part = gate::GateReportFromJson(*text, path);
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(part->run_name, "t");
  EXPECT_EQ(part->node_rank, 0);
  EXPECT_EQ(part->nodes, 2);
  EXPECT_EQ(gate::GateReportToJson(*part).find("launch_nonce"), std::string::npos);
}

}  // namespace
}  // namespace ek::launch
