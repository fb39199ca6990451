// Child processes: the one fork/exec of evenkeel, used by the launcher (ranks,
// torchrun, scontrol), the telemetry sources (nvidia-smi) and the watcher's
// alert command. A child gets a parent-death signal, its own process group, an
// environment overlay, output to a file or a pipe and input from a pipe;
// non-blocking polls, timed waits on a Clock and group signals. The
// parent-death signal is what keeps a launcher killed with SIGKILL from
// leaving ranks behind: its children die with it, and theirs with them.
//
// Signals: nothing here changes the process's signal dispositions (a
// library must not; the program's main() may). The child resets SIGINT,
// SIGTERM, SIGHUP and SIGPIPE to their defaults between fork and exec, and
// WriteInput blocks SIGPIPE in the writing thread only, so a child that exits
// without reading its input is an EPIPE error, not a signal that kills us.
// InstallStopSignalHandlers is for a program's main path to call.
//
// Not thread-safe: one thread owns a Child. Spawn prepares everything before
// fork, so the child only calls async-signal-safe functions.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace ek {

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
  bool output_stderr =
      true;  // false: only stdout goes to output_path/output_pipe; stderr is the parent's
  bool input_pipe = false;  // stdin from a pipe the parent writes (WriteInput); else inherited
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
  // Waits up to `timeout_s` on `clock` for the child to exit; nullopt when it
  // still runs.
  std::optional<ExitStatus> WaitFor(double timeout_s, Clock* clock = Clock::Default());
  // Sends `sig` to the child, or to its whole process group.
  void Signal(int sig, bool group = true) const;
  // SIGTERM to the group, then SIGKILL after `grace_s` (on `clock`) if it
  // still runs; waits.
  ExitStatus Stop(double grace_s, Clock* clock = Clock::Default());
  // The read end of the output pipe (output_pipe), -1 otherwise; owned by Child.
  int output_fd() const { return out_fd_; }
  // Closes the output pipe's read end (a reader done with it, at EOF).
  void CloseOutput();
  // Writes all of `data` to the child's stdin (input_pipe), then closes it
  // when `close` is set. A child that closed its end is
  // "`what`: write: Broken pipe" (kIoError), with no SIGPIPE raised.
  Status WriteInput(std::string_view data, std::string_view what, bool close = true);
  void CloseInput();

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int in_fd_ = -1;
  std::optional<ExitStatus> status_;
};

// The path of `name` on PATH (or `name` itself when it holds a '/' and exists), or "".
std::string FindExecutable(const std::string& name);

// True while `pid` names a live process on this host: kill(pid, 0) finds it
// (EPERM counts: it exists, another user's) and it is not a zombie, a killed
// child its parent has not reaped, which is dead to us (/proc/PID/stat's
// state Z or X; without procfs kill() alone decides). False for pid <= 0.
// The one liveness check: heartbeats (agent, launcher) and the checkpoint
// temporaries' writers.
bool ProcessAlive(int64_t pid);

// Signals a program was asked to stop by (SIGINT, SIGTERM, SIGHUP): the
// handler only records the first one; the main loop polls it. A program's
// choice: called from a command's main path (src/cli), never a library.
void InstallStopSignalHandlers();
int StopSignalReceived();  // 0 when none
void ResetStopSignal();

// Sleeps up to `seconds` on `clock`, returning early when a stop signal arrives.
void SleepInterruptible(double seconds, Clock* clock = Clock::Default());

}  // namespace ek
