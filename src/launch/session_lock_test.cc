// The one-launcher-per-run lock (launch/session_lock.h): held, free, stale (its
// holder SIGKILLed in another process), an unreadable record, write faults.
#include "launch/session_lock.h"

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/fault_env.h"
#include "core/file.h"

namespace ek::launch {
namespace {

class SessionLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_session_lock_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/launch.lock";
  }
  void TearDown() override {
    std::string rm = "rm -rf " + dir_;
    ASSERT_EQ(std::system(rm.c_str()), 0);
  }
  static LockHolder Me(int64_t pid) { return {"n1", pid, 1764586923.5, "run-7", 0}; }

  std::string dir_, path_;
};

TEST_F(SessionLockTest, AFreeLockIsTakenAndRecordsItsHolder) {
  auto lock = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  EXPECT_FALSE(lock->stale());
  EXPECT_EQ(lock->stale_unreadable(), "");
  auto text = ReadFile(path_);
  ASSERT_TRUE(text.ok());
  auto h = LockHolderFromJson(*text, path_);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->pid, ::getpid());
  EXPECT_EQ(h->host, "n1");
  EXPECT_EQ(h->run_id, "run-7");
  // A clean release empties the record: the next launcher finds nothing stale.
  ASSERT_TRUE(lock->Release().ok());
  EXPECT_EQ(*ReadFile(path_), "");
  auto again = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->stale());
}

TEST_F(SessionLockTest, AHeldLockIsRefusedNamingTheHolder) {
  auto first = SessionLock::Acquire(path_, Me(4242), Env::Default());
  ASSERT_TRUE(first.ok()) << first.status().message();
  // A second open file description (as a second process has): flock refuses it.
  auto second = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  const std::string& m = second.status().message();
  EXPECT_NE(
      m.find(
          path_ +
          " is held by pid 4242 on host n1 (started 2025-12-01 11:02:03 UTC), launching run run-7"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("one launcher per run"), std::string::npos) << m;
  // The refused launcher wrote nothing: the record is still the holder's.
  EXPECT_EQ(LockHolderFromJson(*ReadFile(path_), path_)->pid, 4242);
}

// The holder is another process, killed with SIGKILL: the kernel released its
// lock, its record remains; the next launcher takes the lock over and names it.
TEST_F(SessionLockTest, AStaleLockOfAKilledProcessIsTakenOverNamingItsPid) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
    char c = lock.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    while (true) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto refused = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(fmt::format("held by pid {} on host n1", child)),
            std::string::npos)
      << refused.status().message();
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  auto taken = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  ASSERT_TRUE(taken->stale());
  EXPECT_EQ(taken->stale()->pid, child);
  EXPECT_NE(DescribeHolder(*taken->stale()).find(fmt::format("pid {} on host n1", child)),
            std::string::npos);
  EXPECT_EQ(LockHolderFromJson(*ReadFile(path_), path_)->pid, ::getpid())
      << "the record names the new holder";
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(SessionLockTest, AFreeLockWithAnUnreadableRecordIsTakenOverSayingWhy) {
  ASSERT_TRUE(WriteFileAtomic(path_, "{\"host\": \"n1\", \"pid\": ").ok());  // killed mid-write
  auto lock = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  EXPECT_FALSE(lock->stale());
  EXPECT_NE(lock->stale_unreadable().find(path_), std::string::npos) << lock->stale_unreadable();
}

TEST_F(SessionLockTest, TheRecordIsReadStrictly) {
  EXPECT_EQ(LockHolderFromJson("{\"host\": \"n1\", \"pid\": 3, \"start\": 1, \"run_id\": \"r\"}",
                               "x.lock")
                .status()
                .message(),
            "x.lock: node: missing");
  EXPECT_EQ(LockHolderFromJson(
                "{\"host\": \"n1\", \"pid\": \"3\", \"start\": 1, \"run_id\": \"r\", \"node\": 0}",
                "x.lock")
                .status()
                .message(),
            "x.lock: pid: not an integer");
  EXPECT_EQ(LockPath("/s", 1, 0), "/s/launch.lock");
  EXPECT_EQ(LockPath("/s", 2, 1), "/s/node-1.lock");
}

// Creating the file and writing the record go through Env: each fault is an
// I/O error naming the file, and a later try without it succeeds.
TEST_F(SessionLockTest, AWriteFaultIsAnIoErrorNamingTheLockFile) {
  for (const WriteFault& fault : WriteFaults("launch.lock")) {
    if (fault.rule.op == FileOp::kRename) continue;  // written in place, never renamed
    SCOPED_TRACE(fault.name);
    ::unlink(path_.c_str());
    FaultInjectionEnv files(Env::Default());
    files.Add(fault.rule);
    auto lock = SessionLock::Acquire(path_, Me(::getpid()), &files);
    ASSERT_FALSE(lock.ok());
    EXPECT_EQ(lock.status().code(), StatusCode::kIoError);
    EXPECT_NE(lock.status().message().find(path_), std::string::npos) << lock.status().message();
    auto again = SessionLock::Acquire(path_, Me(::getpid()), Env::Default());
    ASSERT_TRUE(again.ok()) << "the failed try must not keep the lock: "
                            << again.status().message();
  }
}

}  // namespace
}  // namespace ek::launch
