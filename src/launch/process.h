// Child processes for the launcher: fork/exec with a parent-death signal, its
// own process group, an environment overlay and output to a file or a pipe;
// non-blocking polls and group signals. The parent-death signal is what keeps
// a launcher killed with SIGKILL from leaving ranks behind: its children die
// with it, and theirs with them.
//
// Not thread-safe: one thread owns a Child. Spawn prepares everything before
// fork, so the child only calls async-signal-safe functions.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ek::launch {

struct ExitStatus {
  int code = -1;   // exit code when it exited, else -1
  int signal = 0;  // the signal that killed it, else 0
  bool ok() const { return code == 0 && signal == 0; }
  // "exit 1", "killed by SIGKILL".
  std::string ToString() const;
  // As a shell reports it: the code, or 128 + the signal.
  int ShellCode() const { return signal ? 128 + signal : code; }
};
ExitStatus FromWaitStatus(int status);

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // set over the parent's environment
  std::vector<std::string> unset_env;
  std::string output_path;   // "": inherit stdout and stderr; else both appended to this file
  bool output_pipe = false;  // both to a pipe the parent reads (output_fd())
  bool new_process_group = true;
  int parent_death_signal = 0;  // delivered to the child when this thread's process dies; 0: none
  std::string cwd;
};

class Child {
 public:
  static Result<Child> Spawn(const SpawnOptions& options);
  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !status_; }
  // Reaps the child if it has exited; nullopt while it runs.
  std::optional<ExitStatus> Poll();
  // Blocks until the child exits.
  ExitStatus Wait();
  // Sends `sig` to the child, or to its whole process group.
  void Signal(int sig, bool group = true) const;
  // SIGTERM to the group, then SIGKILL after `grace_s` if it still runs; waits.
  ExitStatus Stop(double grace_s);
  // The read end of the output pipe (output_pipe), -1 otherwise; owned by Child.
  int output_fd() const { return out_fd_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::optional<ExitStatus> status_;
};

// The path of `name` on PATH (or `name` itself when it holds a '/' and exists), or "".
std::string FindExecutable(const std::string& name);

// Signals the launcher was asked to stop by (SIGINT, SIGTERM, SIGHUP): the
// handler only records the first one; the main loop polls it.
void InstallStopSignalHandlers();
int StopSignalReceived();  // 0 when none
void ResetStopSignal();

// Sleeps up to `seconds`, returning early when a stop signal arrives.
void SleepInterruptible(double seconds);

}  // namespace ek::launch
