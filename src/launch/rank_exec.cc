#include "launch/rank_exec.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>

#include "core/clock.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/process.h"

namespace ek::launch {

namespace {

Result<int> EnvInt(Env* env, const char* name) {
  const std::optional<std::string> value = env->GetVar(name);
  const char* v = value ? value->c_str() : nullptr;
  if (!v || !*v)
    return InvalidArgumentError(
        fmt::format("launch-rank: {} is not set (run under torchrun)", name));
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v, &end, 10);
  if (errno || *end || n < 0 || n > std::numeric_limits<int>::max()) {
    return InvalidArgumentError(fmt::format("launch-rank: {}={} is not a rank", name, v));
  }
  return static_cast<int>(n);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string RankRecordToJson(const RankRecord& r) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject()
      .Key("rank")
      .Int(r.rank)
      .Key("local_rank")
      .Int(r.local_rank)
      .Key("node_rank")
      .Int(r.node_rank);
  w.Key("host")
      .Str(r.host)
      .Key("pid")
      .Int(r.pid)
      .Key("start")
      .Fixed(r.start, 3)
      .Key("end")
      .Fixed(r.end, 3);
  w.Key("exit_code")
      .Int(r.exit_code)
      .Key("signal")
      .Int(r.signal)
      .Key("log")
      .Str(r.log)
      .Key("status")
      .Str(r.status);
  w.Key("stop_signal")
      .Int(r.stop_signal)
      .Key("stop_time")
      .Fixed(r.stop_time, 3)
      .Key("state_at_stop")
      .Str(r.state_at_stop);
  w.Key("inferred").Bool(r.inferred).Key("note").Str(r.note).EndObject();
  return w.Line();
}

Result<RankRecord> RankRecordFromFields(const JsonFields& f) {
  RankRecord r;
  EK_RETURN_IF_ERROR(f.Int("rank", &r.rank));
  EK_RETURN_IF_ERROR(f.Int("local_rank", &r.local_rank));
  EK_RETURN_IF_ERROR(f.Int("node_rank", &r.node_rank));
  EK_RETURN_IF_ERROR(f.Str("host", &r.host));
  EK_RETURN_IF_ERROR(f.Int("pid", &r.pid));
  EK_RETURN_IF_ERROR(f.Num("start", &r.start));
  EK_RETURN_IF_ERROR(f.Num("end", &r.end));
  EK_RETURN_IF_ERROR(f.Int("exit_code", &r.exit_code));
  EK_RETURN_IF_ERROR(f.Int("signal", &r.signal));
  EK_RETURN_IF_ERROR(f.Str("log", &r.log));
  // Written since the record is kept from the start; absent in older records (docs/launch.md
  // "Records").
  EK_RETURN_IF_ERROR(f.OptStr("status", &r.status));
  if (r.status != "running" && r.status != "stopping" && r.status != "exited" &&
      r.status != "missing") {
    return f.Err("status", fmt::format("{} is not running, stopping, exited or missing",
                                       JsonString(r.status)));
  }
  EK_RETURN_IF_ERROR(f.OptInt("stop_signal", &r.stop_signal));
  EK_RETURN_IF_ERROR(f.OptNum("stop_time", &r.stop_time));
  EK_RETURN_IF_ERROR(f.OptStr("state_at_stop", &r.state_at_stop));
  EK_RETURN_IF_ERROR(f.OptBool("inferred", &r.inferred));
  EK_RETURN_IF_ERROR(f.OptStr("note", &r.note));
  return r;
}

std::string ProcessState(long long pid) {
  if (pid <= 0) return "";
  auto text = ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!text.ok()) return "";
  // "PID (COMM) S ...": COMM may hold spaces and parentheses; the state follows the last ')'.
  size_t close = text->rfind(')');
  if (close == std::string::npos || close + 2 >= text->size()) return "";
  return text->substr(close + 2, 1);
}

std::string DescribeProcessState(const std::string& state) {
  if (state == "T") return "process stopped (state T: a stop signal such as SIGSTOP)";
  if (state == "t") return "process stopped by a tracer (state t)";
  if (state == "D")
    return "process in uninterruptible sleep (state D: blocked in the kernel, e.g. on a device or "
           "I/O)";
  if (state == "Z") return "process already exited";
  if (state == "R") return "process running (state R)";
  if (state == "S") return "process alive, sleeping (state S)";
  if (state.empty()) return "process state unknown";
  return fmt::format("process in state {}", state);
}

Result<RankRecord> RankRecordFromJson(std::string_view json, const std::string& name) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  return RankRecordFromFields(f);
}

Result<int> RunRankExec(const RankExecOptions& o) {
  // Die with torchrun: SIGTERM lets this wrapper stop the trainer and record it.
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (o.command.empty()) return InvalidArgumentError("launch-rank: no trainer command after --");
  if (o.nproc_per_node < 1 || o.node_rank < 0)
    return InvalidArgumentError("launch-rank: bad node rank or nproc");
  EK_ASSIGN_OR_RETURN(int local_rank, EnvInt(o.env, "LOCAL_RANK"));
  if (local_rank >= o.nproc_per_node) {
    return InvalidArgumentError(fmt::format("launch-rank: LOCAL_RANK {} >= nproc_per_node {}",
                                            local_rank, o.nproc_per_node));
  }
  RankRecord rec;
  rec.local_rank = local_rank;
  rec.node_rank = o.node_rank;
  rec.rank = o.node_rank * o.nproc_per_node + local_rank;
  rec.host = o.env->HostName();
  rec.log = fmt::format("{}/rank-{}.log", o.attempt_dir, rec.rank);
  EK_RETURN_IF_ERROR(MakeDirs(o.attempt_dir, o.env));
  EK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> log, o.env->NewAppendableFile(rec.log));

  SpawnOptions so;
  so.argv = o.command;
  so.env = {{"RANK", std::to_string(rec.rank)},
            {"GROUP_RANK", std::to_string(o.node_rank)},
            {"ROLE_RANK", std::to_string(rec.rank)},
            {"EVENKEEL_NODE_RANK", std::to_string(o.node_rank)}};
  so.output_pipe = true;
  so.new_process_group = false;
  so.parent_death_signal = SIGKILL;
  rec.start = Now();
  auto child = Child::Spawn(so);
  if (!child.ok()) return child.status().WithContext("launch-rank");
  rec.pid = child->pid();
  const std::string path = fmt::format("{}/rank-{}.json", o.attempt_dir, rec.rank);
  // The record exists from the start and is rewritten whole as facts arrive, so that a
  // wrapper killed before its trainer ends still leaves what it knew. A failed early
  // write is said in the rank's log; only the last one fails the wrapper.
  auto keep = [&](std::string_view status) {
    rec.status = std::string(status);
    if (Status st = WriteFileAtomic(path, RankRecordToJson(rec), o.env); !st.ok()) {
      std::string line = "evenkeel: warning: launch-rank: " + st.message() + "\n";
      (void)log->Append(line);
      (void)WriteAll(o.tee_fd, line, "stdout");
    }
  };
  keep("running");
  int forwarded = 0;
  char buf[65536];
  bool pipe_open = true;
  double kill_at = 0;  // when the trainer gets SIGKILL after a stop signal; 0: no stop yet
  // A stop signal (torchrun's SIGTERM, or this wrapper orphaned): note the trainer's
  // state first (a SIGSTOPped trainer shows "T": the hang's evidence), record it,
  // then pass the signal on; a stopped trainer is continued so that it acts on it.
  auto stop = [&](int sig) {
    if (rec.stop_signal == 0) {
      rec.stop_signal = sig;
      rec.stop_time = Now();
      rec.state_at_stop = ProcessState(rec.pid);
      keep("stopping");
      kill_at = rec.stop_time + kStopGraceS;
    }
    child->Signal(sig, /*group=*/false);
    if (rec.state_at_stop == "T" || rec.state_at_stop == "t") child->Signal(SIGCONT, false);
  };
  while (true) {
    if (int sig = StopSignalReceived(); sig && sig != forwarded) {
      stop(sig);
      forwarded = sig;
    }
    if (::getppid() != parent && forwarded == 0) {  // torchrun is gone: stop the trainer
      stop(SIGTERM);
      forwarded = SIGTERM;
    }
    if (kill_at > 0 && Now() > kill_at) {
      child->Signal(SIGKILL, false);
      kill_at = Now() + 1;  // again each second until it is reaped
    }
    if (pipe_open) {
      struct pollfd p = {child->output_fd(), POLLIN, 0};
      int n = ::poll(&p, 1, 200);
      if (n > 0) {
        ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
        if (got > 0) {
          (void)log->Append(std::string_view(buf, static_cast<size_t>(got)));
          (void)WriteAll(o.tee_fd, std::string_view(buf, static_cast<size_t>(got)), "stdout");
          continue;
        }
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) pipe_open = false;
      }
    } else {
      ::usleep(100000);
    }
    if (auto st = child->Poll()) {
      // Drain what is left in the pipe.
      while (pipe_open) {
        ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
        if (got <= 0) break;
        (void)log->Append(std::string_view(buf, static_cast<size_t>(got)));
        (void)WriteAll(o.tee_fd, std::string_view(buf, static_cast<size_t>(got)), "stdout");
      }
      rec.end = Now();
      rec.exit_code = st->code;
      rec.signal = st->signal;
      rec.status = "exited";
      (void)log->Sync();
      (void)log->Close();
      EK_RETURN_IF_ERROR(WriteFileAtomic(path, RankRecordToJson(rec), o.env));
      return st->ShellCode();
    }
  }
}

}  // namespace ek::launch
