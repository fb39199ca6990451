#include "core/env.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "core/fake_clock.h"
#include "core/fault_env.h"
#include "core/file.h"

namespace ek {
namespace {

std::string EnvTempDir() {
  char tmpl[] = "/tmp/ek_env_test.XXXXXX";
  return ::mkdtemp(tmpl);
}

std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

std::string Slurp(const std::string& path) {
  auto r = ReadFile(path);
  return r.ok() ? *r : "<missing>";
}

void ExpectMentions(const Status& st, const std::vector<std::string>& parts) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.message();
  for (const auto& p : parts) EXPECT_NE(st.message().find(p), std::string::npos) << st.message();
}

TEST(EnvTest, PosixWriteAppendRenameRemove) {
  Env* env = Env::Default();
  std::string dir = EnvTempDir();
  ASSERT_TRUE(env->CreateDirs(dir + "/a/b").ok());
  auto f = env->NewWritableFile(dir + "/a/b/x");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("hello ").ok());
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_TRUE((*f)->Close().ok());
  ASSERT_TRUE((*f)->Close().ok());
  auto g = env->NewAppendableFile(dir + "/a/b/x");
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->Append("world").ok());
  ASSERT_TRUE((*g)->Close().ok());
  EXPECT_EQ(Slurp(dir + "/a/b/x"), "hello world");
  ASSERT_TRUE(env->RenameFile(dir + "/a/b/x", dir + "/a/y").ok());
  ASSERT_TRUE(env->SyncDir(dir + "/a").ok());
  ASSERT_TRUE(env->SyncFile(dir + "/a/y").ok());
  ASSERT_TRUE(env->RemoveFile(dir + "/a/y").ok());
  EXPECT_EQ(env->RemoveFile(dir + "/a/y").code(), StatusCode::kNotFound);
  ASSERT_TRUE(env->RemoveTree(dir + "/a").ok());
  ASSERT_TRUE(env->RemoveTree(dir + "/a").ok());  // already gone
  EXPECT_TRUE(ListNames(dir).empty());
}

TEST(EnvTest, PosixErrorsNamePathAndOperation) {
  Env* env = Env::Default();
  ExpectMentions(env->NewWritableFile("/nonexistent/dir/f").status(),
                 {"/nonexistent/dir/f", "open for writing", "No such file"});
  ExpectMentions(env->RenameFile("/nonexistent/a", "/nonexistent/b"),
                 {"/nonexistent/a", "rename to /nonexistent/b"});
  ExpectMentions(env->SyncDir("/nonexistent/d"), {"/nonexistent/d", "fsync"});
}

TEST(FaultEnvTest, NthAndTimesSelectCalls) {
  std::string dir = EnvTempDir();
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kOpen, "/part-", ENOSPC).Nth(2).Times(2));
  EXPECT_TRUE(env.NewWritableFile(dir + "/part-1").ok());
  EXPECT_TRUE(env.NewWritableFile(dir + "/other").ok());  // no match: not counted
  EXPECT_FALSE(env.NewWritableFile(dir + "/part-2").ok());
  EXPECT_FALSE(env.NewWritableFile(dir + "/part-3").ok());
  EXPECT_TRUE(env.NewWritableFile(dir + "/part-4").ok());
  EXPECT_EQ(env.injected(), 2);
  EXPECT_EQ(env.calls(FileOp::kOpen), 5);
  env.Clear();
  EXPECT_TRUE(env.NewWritableFile(dir + "/part-5").ok());
}

TEST(FaultEnvTest, ShortWriteLandsThePrefixThenFails) {
  std::string dir = EnvTempDir();
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::ShortWrite("half", 3));
  auto f = env.NewWritableFile(dir + "/half");
  ASSERT_TRUE(f.ok());
  ExpectMentions((*f)->Append("abcdef"),
                 {dir + "/half", "write at byte 3", "No space left on device"});
  ASSERT_TRUE((*f)->Close().ok());
  EXPECT_EQ(Slurp(dir + "/half"), "abc");
}

// AtomicFile under every fault: the error names the target and the operation,
// the old file survives whole, no temp file is left, and a re-run completes.
TEST(FaultEnvTest, AtomicFileKeepsTheOldFileUnderEveryFault) {
  for (const WriteFault& fault : WriteFaults("x.json")) {
    SCOPED_TRACE(fault.name);
    std::string dir = EnvTempDir();
    std::string path = dir + "/x.json";
    ASSERT_TRUE(WriteFileAtomic(path, "old complete contents").ok());
    FaultInjectionEnv env(Env::Default());
    env.Add(fault.rule);
    Status st = WriteFileAtomic(path, "new contents, longer than seven bytes", &env);
    EXPECT_EQ(env.injected(), 1);
    std::vector<std::string> expect = fault.expect;
    expect.push_back(path);
    ExpectMentions(st, expect);
    EXPECT_EQ(Slurp(path), "old complete contents");
    EXPECT_EQ(ListNames(dir), std::vector<std::string>{"x.json"});
    env.Clear();
    ASSERT_TRUE(WriteFileAtomic(path, "new contents", &env).ok());
    EXPECT_EQ(Slurp(path), "new contents");
  }
}

TEST(FaultEnvTest, AtomicFileWithNoOldFileLeavesNothing) {
  for (const WriteFault& fault : WriteFaults("fresh")) {
    SCOPED_TRACE(fault.name);
    std::string dir = EnvTempDir();
    FaultInjectionEnv env(Env::Default());
    env.Add(fault.rule);
    EXPECT_FALSE(WriteFileAtomic(dir + "/fresh", "data that would be half written", &env).ok());
    EXPECT_TRUE(ListNames(dir).empty());
  }
}

TEST(FaultEnvTest, DirectoryFsyncFailureIsReported) {
  std::string dir = EnvTempDir();
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kSyncDir, dir, EIO));
  Status st = WriteFileAtomic(dir + "/d.json", "{}", &env);
  ExpectMentions(st, {dir + "/d.json", dir + ": fsync", "Input/output error"});
  EXPECT_EQ(Slurp(dir + "/d.json"), "{}");  // in place and complete, not yet durable
}

TEST(FaultEnvTest, MakeDirsGoesThroughEnv) {
  std::string dir = EnvTempDir();
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kCreateDirs, "sub", EACCES));
  ExpectMentions(MakeDirs(dir + "/sub", &env),
                 {dir + "/sub", "create directory", "Permission denied"});
  EXPECT_TRUE(ListNames(dir).empty());
}

TEST(EnvTest, PosixReadListAndStat) {
  Env* env = Env::Default();
  const std::string dir = EnvTempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/b.json", "{}").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/a.txt", "hello").ok());
  ASSERT_TRUE(MakeDirs(dir + "/c").ok());
  ASSERT_EQ(::symlink("a.txt", (dir + "/link").c_str()), 0);

  auto text = env->ReadFile(dir + "/a.txt");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "hello");
  // Sorted whatever order the file system keeps, without "." and "..".
  auto names = env->ListDir(dir);
  ASSERT_TRUE(names.ok()) << names.status().message();
  EXPECT_EQ(*names, (std::vector<std::string>{"a.txt", "b.json", "c", "link"}));

  auto file = env->Stat(dir + "/a.txt");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->is_file());
  EXPECT_EQ(file->size, 5u);
  const double now = Clock::Default()->Now();
  EXPECT_GT(file->mtime, now - 600);
  EXPECT_LT(file->mtime, now + 600);
  EXPECT_TRUE(env->Stat(dir + "/c")->is_directory());
  EXPECT_TRUE(env->Stat(dir + "/link")->is_file()) << "Stat follows a link";
  EXPECT_EQ(env->LinkStat(dir + "/link")->kind, FileInfo::Kind::kSymlink);
  EXPECT_TRUE(env->Exists(dir + "/b.json"));
  EXPECT_FALSE(env->Exists(dir + "/none"));
  auto free_bytes = env->FreeBytes(dir);
  ASSERT_TRUE(free_bytes.ok()) << free_bytes.status().message();
  EXPECT_GT(*free_bytes, 0);
  EXPECT_FALSE(env->HostName().empty());
  ASSERT_EQ(::setenv("EK_ENV_TEST_VAR", "x1", 1), 0);
  EXPECT_EQ(env->GetVar("EK_ENV_TEST_VAR"), "x1");
  ::unsetenv("EK_ENV_TEST_VAR");
  EXPECT_EQ(env->GetVar("EK_ENV_TEST_VAR"), std::nullopt);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(EnvTest, PosixReadErrorsNameThePathAndAreBadInput) {
  Env* env = Env::Default();
  const std::string dir = EnvTempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "x").ok());
  // The same Statuses as core/file.h's readers: exit 65, not 74.
  auto missing = env->ReadFile(dir + "/none");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir + "/none"), std::string::npos);
  auto a_dir = env->ReadFile(dir);
  EXPECT_NE(a_dir.status().message().find(dir + ": is a directory, expected a file"),
            std::string::npos)
      << a_dir.status().message();
  auto no_dir = env->ListDir(dir + "/none");
  EXPECT_EQ(no_dir.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(no_dir.status().message(), dir + "/none: no such directory");
  auto a_file = env->ListDir(dir + "/f");
  EXPECT_EQ(a_file.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a_file.status().message(), dir + "/f: is a file, expected a directory");
  auto gone = env->Stat(dir + "/none");
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(gone.status().message(), dir + "/none: No such file or directory");
  EXPECT_FALSE(env->FreeBytes(dir + "/none").ok());
  EXPECT_NE(
      env->FreeBytes(dir + "/none").status().message().find(dir + "/none: statvfs: No such file"),
      std::string::npos);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(FaultEnvTest, ReadsFailByRuleAndTheMachineIsFaked) {
  const std::string dir = EnvTempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/state.json", "{}").ok());
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kRead, "state.json", EIO));
  env.Add(FaultRule::Fail(FileOp::kList, dir, EACCES));
  env.Add(FaultRule::Fail(FileOp::kStat, "state.json", EIO));
  ExpectMentions(env.ReadFile(dir + "/state.json").status(),
                 {dir + "/state.json", "Input/output error"});
  EXPECT_EQ(env.ListDir(dir).status().message(), dir + ": Permission denied");
  ExpectMentions(env.Stat(dir + "/state.json").status(),
                 {dir + "/state.json: stat", "Input/output error"});
  EXPECT_EQ(env.calls(FileOp::kRead), 1);
  // Each rule fired once: the next calls pass.
  EXPECT_EQ(*env.ReadFile(dir + "/state.json"), "{}");
  EXPECT_EQ(env.ListDir(dir)->size(), 1u);

  env.SetVars({{"SLURM_JOB_ID", "7"}});
  EXPECT_EQ(env.GetVar("SLURM_JOB_ID"), "7");
  EXPECT_EQ(env.GetVar("PATH"), std::nullopt) << "only the variables set";
  env.SetHostName("node-a");
  EXPECT_EQ(env.HostName(), "node-a");
  env.SetFreeBytes(1e9);
  EXPECT_EQ(*env.FreeBytes(dir), 1e9);
  env.SetFreeBytes(std::nullopt);
  EXPECT_EQ(env.FreeBytes(dir).status().message(), dir + ": statvfs: no answer");
  EXPECT_EQ(env.clock(), Clock::Default());
  FakeClock clock;
  env.SetClock(&clock);
  EXPECT_EQ(env.clock(), &clock);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(ClockTest, FakeClockSleepsMoveTimeAtOnce) {
  FakeClock clock(1'700'000'000);
  const double mono = clock.Monotonic();
  auto start = std::chrono::steady_clock::now();
  clock.SleepFor(3600);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(clock.Now(), 1'700'003'600);
  EXPECT_EQ(clock.Monotonic(), mono + 3600);
  clock.SleepUntil(1'700'003'700.25);
  EXPECT_EQ(clock.Now(), 1'700'003'700.25) << "to the exact time asked";
  clock.SleepUntil(1);  // the past: no move
  clock.SleepFor(-5);
  EXPECT_EQ(clock.Now(), 1'700'003'700.25);
  EXPECT_EQ(clock.sleeps(), 4);
  EXPECT_EQ(clock.slept(), 3700.25);
  // A step of the wall clock leaves the monotonic one alone.
  clock.Set(1'600'000'000);
  EXPECT_EQ(clock.Now(), 1'600'000'000);
  EXPECT_EQ(clock.Monotonic(), mono + 3700.25);
  clock.Advance(2);
  EXPECT_EQ(clock.Monotonic(), mono + 3702.25);
}

TEST(ClockTest, RealClockSleeps) {
  Clock* clock = Clock::Default();
  const double t0 = clock->Monotonic();
  clock->SleepFor(0.02);
  EXPECT_GE(clock->Monotonic() - t0, 0.02);
  EXPECT_NEAR(clock->Now(), static_cast<double>(std::time(nullptr)), 2);
}

}  // namespace
}  // namespace ek
