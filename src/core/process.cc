#include "core/process.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "core/file.h"

extern char** environ;

namespace ek {

namespace {

volatile sig_atomic_t g_stop_signal = 0;

void OnStopSignal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
}

}  // namespace

std::string ExitStatus::ToString() const {
  if (signal) {
    const char* name = sigabbrev_np(signal);
    return name ? fmt::format("killed by SIG{}", name) : fmt::format("killed by signal {}", signal);
  }
  return fmt::format("exit {}", code);
}

ExitStatus FromWaitStatus(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) s.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  return s;
}

bool ProcessAlive(int64_t pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  auto stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return true;  // no procfs: trust kill()
  const std::string& line = *stat;
  // "PID (COMM) S ...": COMM may hold ')' and spaces, so the state follows the last ')'.
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

std::string FindExecutable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string full = dir + "/" + name;
    struct stat st;
    if (::stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(full.c_str(), X_OK) == 0)
      return full;
    start = end + 1;
  }
  return "";
}

Result<Child> Child::Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return InvalidArgumentError("spawn: no command");
  std::string exe = FindExecutable(o.argv[0]);
  if (exe.empty())
    return NotFoundError(fmt::format("{}: not found (or not executable) on PATH", o.argv[0]));
  // Everything the child needs is built here, before fork.
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = std::string(eq + 1);
  }
  for (const auto& k : o.unset_env) env.erase(k);
  for (const auto& [k, v] : o.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out_fd = -1;
  int pipe_fds[2] = {-1, -1};
  int in_fds[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out_fd, pipe_fds[0], pipe_fds[1], in_fds[0], in_fds[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (!o.output_path.empty()) {
    out_fd = ::open(o.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out_fd < 0) return ErrnoError(o.output_path, errno);
  } else if (o.output_pipe) {
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  }
  if (o.input_pipe && ::pipe2(in_fds, O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    return ErrnoError("pipe", e);
  }
  int err_pipe[2];  // the child reports a failed exec here; close-on-exec closes it on success
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    return ErrnoError("pipe", e);
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    close_all();
    return ErrnoError("fork", e);
  }
  if (pid == 0) {
    if (o.new_process_group) ::setpgid(0, 0);
    if (o.parent_death_signal) {
      ::prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    int fd = out_fd >= 0 ? out_fd : pipe_fds[1];
    if (fd >= 0) {
      ::dup2(fd, 1);
      if (o.output_stderr) ::dup2(fd, 2);
    }
    if (in_fds[0] >= 0) ::dup2(in_fds[0], 0);
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(err_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    // The child's own dispositions: the defaults, whatever the program chose
    // for itself (a handler is reset by exec, an ignored signal is not).
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(exe.c_str(), argv.data(), envp.data());
    int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  if (out_fd >= 0) ::close(out_fd);
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
  if (in_fds[0] >= 0) ::close(in_fds[0]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status;
    ::waitpid(pid, &status, 0);
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    if (in_fds[1] >= 0) ::close(in_fds[1]);
    return ErrnoError(fmt::format("exec {}", exe), child_errno);
  }
  if (o.new_process_group) ::setpgid(pid, pid);  // also from here: no race with Signal(group)
  Child c;
  c.pid_ = pid;
  c.out_fd_ = pipe_fds[0];
  c.in_fd_ = in_fds[1];
  return c;
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_), out_fd_(other.out_fd_), in_fd_(other.in_fd_), status_(other.status_) {
  other.pid_ = -1;
  other.out_fd_ = -1;
  other.in_fd_ = -1;
}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    if (out_fd_ >= 0) ::close(out_fd_);
    if (in_fd_ >= 0) ::close(in_fd_);
    pid_ = other.pid_;
    out_fd_ = other.out_fd_;
    in_fd_ = other.in_fd_;
    status_ = other.status_;
    other.pid_ = -1;
    other.out_fd_ = -1;
    other.in_fd_ = -1;
  }
  return *this;
}

Status Child::WriteInput(std::string_view data, std::string_view what, bool close) {
  if (in_fd_ < 0)
    return FailedPreconditionError(fmt::format("{}: write: the child's input is closed", what));
  // SIGPIPE is blocked in this thread alone while writing: a write to a pipe
  // whose reader has gone raises it for the writing thread, where it stays
  // pending, to be taken here, so the write fails with EPIPE and the process
  // is not killed. One that was pending before is left for its owner.
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  Status st = WriteAll(in_fd_, data, fmt::format("{}: write", what));
  if (!st.ok() && !was_pending) {
    const timespec zero{0, 0};
    while (::sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  if (close) CloseInput();
  return st;
}

void Child::CloseOutput() {
  if (out_fd_ >= 0) ::close(out_fd_);
  out_fd_ = -1;
}

void Child::CloseInput() {
  if (in_fd_ >= 0) ::close(in_fd_);
  in_fd_ = -1;
}

Child::~Child() {
  if (out_fd_ >= 0) ::close(out_fd_);
  if (in_fd_ >= 0) ::close(in_fd_);
  // A Child destroyed while its process runs (an error path) must not leave it behind.
  if (pid_ > 0 && !status_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
}

std::optional<ExitStatus> Child::Poll() {
  if (status_ || pid_ <= 0) return status_;
  int st;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) status_ = FromWaitStatus(st);
  return status_;
}

ExitStatus Child::Wait() {
  while (!status_ && pid_ > 0) {
    int st;
    pid_t r = ::waitpid(pid_, &st, 0);
    if (r == pid_) {
      status_ = FromWaitStatus(st);
    } else if (r < 0 && errno != EINTR) {
      status_ = ExitStatus{};
    }
  }
  return status_.value_or(ExitStatus{});
}

void Child::Signal(int sig, bool group) const {
  if (pid_ <= 0 || status_) return;
  if (group) ::kill(-pid_, sig);
  ::kill(pid_, sig);
}

std::optional<ExitStatus> Child::WaitFor(double timeout_s, Clock* clock) {
  const double deadline = clock->Monotonic() + timeout_s;
  while (!Poll()) {
    const double left = deadline - clock->Monotonic();
    if (left <= 0) return std::nullopt;
    clock->SleepFor(std::min(left, 0.01));
  }
  return status_;
}

ExitStatus Child::Stop(double grace_s, Clock* clock) {
  Signal(SIGTERM);
  const double deadline = clock->Monotonic() + grace_s;
  while (!Poll()) {
    if (clock->Monotonic() >= deadline) {
      Signal(SIGKILL);
      return Wait();
    }
    clock->SleepFor(0.05);
  }
  // The leader is gone; anything left in its group goes too.
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
  return *status_;
}

void InstallStopSignalHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);
}

int StopSignalReceived() { return g_stop_signal; }
void ResetStopSignal() { g_stop_signal = 0; }

void SleepInterruptible(double seconds, Clock* clock) {
  const double deadline = clock->Monotonic() + seconds;
  while (!StopSignalReceived()) {
    const double left = deadline - clock->Monotonic();
    if (left <= 0) break;
    clock->SleepFor(std::min(left, 0.05));
  }
}

}  // namespace ek
