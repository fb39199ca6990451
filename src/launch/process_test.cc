#include "launch/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/file.h"

namespace ek::launch {
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
  std::string out = std::filesystem::temp_directory_path() / ("ek_proc_" + std::to_string(::getpid()));
  auto c = Child::Spawn({.argv = {"sh", "-c", "echo $EK_X; echo err >&2"}, .env = {{"EK_X", "hello"}}, .output_path = out});
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
    if (std::sscanf(text->c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid && state != 'Z') {
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
  ExitStatus st = c->Stop(0.5);
  EXPECT_EQ(st.signal, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(LiveInGroup(pgid), 0) << "a process of the group survived";
}

}  // namespace
}  // namespace ek::launch
