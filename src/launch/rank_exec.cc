#include "launch/rank_exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>

#include <fmt/core.h>
#include <simdjson.h>

#include "core/clock.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "launch/process.h"

namespace ek::launch {

namespace {

Result<int> EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return InvalidArgumentError(fmt::format("launch-rank: {} is not set (run under torchrun)", name));
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

std::string HostName() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

std::string RankRecordToJson(const RankRecord& r) {
  std::string o = fmt::format("{{\"rank\": {}, \"local_rank\": {}, \"node_rank\": {}, \"host\": ", r.rank, r.local_rank,
                              r.node_rank);
  AppendJsonString(&o, r.host);
  o += fmt::format(", \"pid\": {}, \"start\": {:.3f}, \"end\": {:.3f}, \"exit_code\": {}, \"signal\": {}, \"log\": ", r.pid,
                   r.start, r.end, r.exit_code, r.signal);
  AppendJsonString(&o, r.log);
  o += "}\n";
  return o;
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
  return r;
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
  if (o.nproc_per_node < 1 || o.node_rank < 0) return InvalidArgumentError("launch-rank: bad node rank or nproc");
  EK_ASSIGN_OR_RETURN(int local_rank, EnvInt("LOCAL_RANK"));
  if (local_rank >= o.nproc_per_node) {
    return InvalidArgumentError(fmt::format("launch-rank: LOCAL_RANK {} >= nproc_per_node {}", local_rank, o.nproc_per_node));
  }
  RankRecord rec;
  rec.local_rank = local_rank;
  rec.node_rank = o.node_rank;
  rec.rank = o.node_rank * o.nproc_per_node + local_rank;
  rec.host = HostName();
  rec.log = fmt::format("{}/rank-{}.log", o.attempt_dir, rec.rank);
  EK_RETURN_IF_ERROR(MakeDirs(o.attempt_dir, o.env));
  EK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> log, o.env->NewAppendableFile(rec.log));

  SpawnOptions so;
  so.argv = o.command;
  so.env = {{"RANK", std::to_string(rec.rank)}, {"GROUP_RANK", std::to_string(o.node_rank)},
            {"ROLE_RANK", std::to_string(rec.rank)}, {"EVENKEEL_NODE_RANK", std::to_string(o.node_rank)}};
  so.output_pipe = true;
  so.new_process_group = false;
  so.parent_death_signal = SIGKILL;
  InstallStopSignalHandlers();
  rec.start = Now();
  auto child = Child::Spawn(so);
  if (!child.ok()) return child.status().WithContext("launch-rank");
  rec.pid = child->pid();
  int forwarded = 0;
  char buf[65536];
  bool pipe_open = true;
  double orphaned_at = 0;
  while (true) {
    if (int sig = StopSignalReceived(); sig && sig != forwarded) {
      child->Signal(sig, /*group=*/false);
      forwarded = sig;
    }
    if (::getppid() != parent && orphaned_at == 0) {  // torchrun is gone: stop the trainer
      orphaned_at = Now();
      child->Signal(SIGTERM, false);
    }
    if (orphaned_at > 0 && Now() - orphaned_at > 10) child->Signal(SIGKILL, false);
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
      (void)log->Sync();
      (void)log->Close();
      std::string path = fmt::format("{}/rank-{}.json", o.attempt_dir, rec.rank);
      EK_RETURN_IF_ERROR(WriteFileAtomic(path, RankRecordToJson(rec), o.env));
      return st->ShellCode();
    }
  }
}

}  // namespace ek::launch
