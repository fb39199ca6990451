#include "core/env.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/fault_env.h"
#include "core/file.h"

namespace ek {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/ek_env_test.XXXXXX";
  return ::mkdtemp(tmpl);
}

std::vector<std::string> List(const std::string& dir) {
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
  std::string dir = TempDir();
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
  EXPECT_TRUE(List(dir).empty());
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
  std::string dir = TempDir();
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
  std::string dir = TempDir();
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::ShortWrite("half", 3));
  auto f = env.NewWritableFile(dir + "/half");
  ASSERT_TRUE(f.ok());
  ExpectMentions((*f)->Append("abcdef"), {dir + "/half", "write at byte 3", "No space left on device"});
  ASSERT_TRUE((*f)->Close().ok());
  EXPECT_EQ(Slurp(dir + "/half"), "abc");
}

// AtomicFile under every fault: the error names the target and the operation,
// the old file survives whole, no temp file is left, and a re-run completes.
TEST(FaultEnvTest, AtomicFileKeepsTheOldFileUnderEveryFault) {
  for (const WriteFault& fault : WriteFaults("x.json")) {
    SCOPED_TRACE(fault.name);
    std::string dir = TempDir();
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
    EXPECT_EQ(List(dir), std::vector<std::string>{"x.json"});
    env.Clear();
    ASSERT_TRUE(WriteFileAtomic(path, "new contents", &env).ok());
    EXPECT_EQ(Slurp(path), "new contents");
  }
}

TEST(FaultEnvTest, AtomicFileWithNoOldFileLeavesNothing) {
  for (const WriteFault& fault : WriteFaults("fresh")) {
    SCOPED_TRACE(fault.name);
    std::string dir = TempDir();
    FaultInjectionEnv env(Env::Default());
    env.Add(fault.rule);
    EXPECT_FALSE(WriteFileAtomic(dir + "/fresh", "data that would be half written", &env).ok());
    EXPECT_TRUE(List(dir).empty());
  }
}

TEST(FaultEnvTest, DirectoryFsyncFailureIsReported) {
  std::string dir = TempDir();
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kSyncDir, dir, EIO));
  Status st = WriteFileAtomic(dir + "/d.json", "{}", &env);
  ExpectMentions(st, {dir + "/d.json", dir + ": fsync", "Input/output error"});
  EXPECT_EQ(Slurp(dir + "/d.json"), "{}");  // in place and complete, not yet durable
}

TEST(FaultEnvTest, MakeDirsGoesThroughEnv) {
  std::string dir = TempDir();
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kCreateDirs, "sub", EACCES));
  ExpectMentions(MakeDirs(dir + "/sub", &env), {dir + "/sub", "create directory", "Permission denied"});
  EXPECT_TRUE(List(dir).empty());
}

}  // namespace
}  // namespace ek
