#include "core/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/fake_clock.h"
#include "core/file.h"

namespace ek {
namespace {

TEST(ProcessTest, ExitCodesAndSignals) {
  auto ok = Child::Spawn({.argv = {"true"}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->Wait().ok());
  auto bad = Child::Spawn({.argv = {"sh", "-c", "exit 7"}});
  ASSERT_TRUE(bad.ok());
  ExitStatus st = bad->Wait();
  EXPECT_EQ(st.code, 7);
  EXPECT_EQ(st.ToString(), "exit 7");
  auto sleeper = Child::Spawn({.argv = {"sleep", "30"}});
  ASSERT_TRUE(sleeper.ok());
  sleeper->Signal(SIGKILL);
  st = sleeper->Wait();
  EXPECT_EQ(st.signal, SIGKILL);
  EXPECT_EQ(st.ShellCode(), 128 + SIGKILL);
  EXPECT_EQ(st.ToString(), "killed by SIGKILL");
}

TEST(ProcessTest, MissingProgramIsNamed) {
  auto r = Child::Spawn({.argv = {"no-such-program-evenkeel"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-program-evenkeel: not found"), std::string::npos);
}

TEST(ProcessTest, EnvironmentAndOutputFile) {
  std::string out =
      std::filesystem::temp_directory_path() / ("ek_proc_" + std::to_string(::getpid()));
  auto c = Child::Spawn({.argv = {"sh", "-c", "echo $EK_X; echo err >&2"},
                         .env = {{"EK_X", "hello"}},
                         .output_path = out});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->Wait().ok());
  auto text = ReadFile(out);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello\nerr\n");
  std::filesystem::remove(out);
}

// Live (not zombie) processes whose process group is `pgid`, from /proc.
int LiveInGroup(pid_t pgid) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    auto text = ReadFile(e.path().string() + "/stat");
    if (!text.ok()) continue;
    auto close = text->rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(text->c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
        pgrp == pgid && state != 'Z') {
      n++;
    }
  }
  return n;
}

TEST(ProcessTest, StopKillsTheWholeGroupAfterTheGrace) {
  // A shell that ignores SIGTERM and has a child of its own: both must be gone.
  auto c = Child::Spawn({.argv = {"sh", "-c", "trap '' TERM; sleep 60 & wait"}});
  ASSERT_TRUE(c.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  pid_t pgid = c->pid();
  // The grace runs on a fake clock: it passes at once, and SIGKILL follows.
  FakeClock clock;
  ExitStatus st = c->Stop(30, &clock);
  EXPECT_EQ(st.signal, SIGKILL);
  EXPECT_GE(clock.slept(), 29.99);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(LiveInGroup(pgid), 0) << "a process of the group survived";
}

TEST(ProcessTest, InputPipeFeedsTheChild) {
  auto c =
      Child::Spawn({.argv = {"sh", "-c", "tr a-z A-Z"}, .output_pipe = true, .input_pipe = true});
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->WriteInput("hello\n", "tr").ok());
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(c->output_fd(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  EXPECT_TRUE(c->Wait().ok());
  EXPECT_EQ(out, "HELLO\n");
}

TEST(ProcessTest, WritingToAChildThatClosedItsInputIsEpipeAndNoSignalDisposition) {
  // No library changes a signal's disposition: SIGPIPE stays at its default
  // here, and the write that would raise it is an error instead.
  struct sigaction dfl {
  }, before{};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &before),
            0);  // the default, whatever this process inherited
  auto c = Child::Spawn({.argv = {"sh", "-c", "exec 0<&-; exit 0"}, .input_pipe = true});
  ASSERT_TRUE(c.ok());
  Status st = c->WriteInput(std::string(1 << 20, 'x'), "sink");
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_EQ(st.message(), "sink: write: Broken pipe");
  EXPECT_TRUE(c->Wait().ok());
  struct sigaction after {};
  ASSERT_EQ(::sigaction(SIGPIPE, &before, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_DFL);
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "the SIGPIPE the write raised was taken";
}

TEST(ProcessTest, WaitForTimesOutOnTheClock) {
  auto c = Child::Spawn({.argv = {"sleep", "30"}});
  ASSERT_TRUE(c.ok());
  FakeClock clock;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(c->WaitFor(60, &clock), std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
      << "60 s on the fake clock";
  EXPECT_GE(clock.slept(), 59.99);
  c->Signal(SIGKILL);
  EXPECT_EQ(c->Wait().signal, SIGKILL);
  auto quick = Child::Spawn({.argv = {"true"}});
  ASSERT_TRUE(quick.ok());
  auto st = quick->WaitFor(30);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->ok());
}

TEST(ProcessTest, SleepInterruptibleRunsOnTheClock) {
  FakeClock clock;
  auto start = std::chrono::steady_clock::now();
  SleepInterruptible(120, &clock);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_NEAR(clock.slept(), 120, 1e-6);
}

TEST(ProcessTest, ProcessAliveSeesZombiesAsDead) {
  EXPECT_TRUE(ProcessAlive(getpid()));
  EXPECT_FALSE(ProcessAlive(0));
  EXPECT_FALSE(ProcessAlive(-5));
  // Beyond pid_t: not truncated onto some other process's id.
  EXPECT_FALSE(ProcessAlive((int64_t{1} << 32) + getpid()));
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  EXPECT_TRUE(ProcessAlive(child));
  kill(child, SIGKILL);
  // Not reaped yet: a zombie, which must read as gone.
  for (int i = 0; i < 200 && ProcessAlive(child); ++i) usleep(5000);
  EXPECT_FALSE(ProcessAlive(child));
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(ProcessAlive(child));
}

}  // namespace
}  // namespace ek
