#include "telemetry/nvidia_smi_live.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>

#include "core/jsonl.h"

namespace ek::telemetry {

Result<std::unique_ptr<ChildLineStream>> ChildLineStream::Spawn(
    const std::vector<std::string>& argv, Clock* clock) {
  if (argv.empty()) return InvalidArgumentError("spawn: empty command");
  SpawnOptions o;
  o.argv = argv;
  o.output_pipe = true;
  o.output_stderr = false;  // stdout is the CSV; the child's complaints go where ours do
  o.new_process_group = false;
  auto child = Child::Spawn(o);
  if (!child.ok()) return UnavailableError("cannot run " + child.status().message());
  std::unique_ptr<ChildLineStream> s(new ChildLineStream());
  s->clock_ = clock;
  s->child_ = std::move(*child);
  s->fd_ = s->child_.output_fd();
  s->name_ = argv[0];
  ::fcntl(s->fd_, F_SETFL, ::fcntl(s->fd_, F_GETFL) | O_NONBLOCK);
  return s;
}

ChildLineStream::~ChildLineStream() {
  if (child_.running()) {
    child_.Signal(SIGTERM, /*group=*/false);
    child_.Wait();
  }
}

Status ChildLineStream::ReadLines(double deadline, std::vector<std::string>* lines, bool* eof) {
  *eof = false;
  if (fd_ < 0) {
    *eof = true;
    return Status::Ok();
  }
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n > 0) {
      partial_.append(buf, static_cast<size_t>(n));
      TakeCompleteLines(&partial_, [&](const TextLine& line) { lines->emplace_back(line.text); });
      continue;
    }
    if (n == 0) {
      if (!partial_.empty()) lines->push_back(std::move(partial_));
      partial_.clear();
      child_.CloseOutput();
      fd_ = -1;
      // EOF comes as the child exits (or just before it is reapable); one
      // that closed its stdout and lingers for a second is done for us: stop it.
      if (child_.pid() > 0) {
        std::optional<ExitStatus> st = child_.WaitFor(1.0, clock_);
        if (!st) {
          child_.Signal(SIGTERM, /*group=*/false);
          st = child_.Wait();
        }
        exit_status_ = st->ShellCode();
      }
      *eof = true;
      return Status::Ok();
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ErrnoError("read from " + name_, errno);
    double left = deadline - clock_->Now();
    if (left <= 0) return Status::Ok();
    pollfd p{fd_, POLLIN, 0};
    int ms = static_cast<int>(std::ceil(std::min(left, 3600.0) * 1000));
    if (::poll(&p, 1, ms) < 0 && errno != EINTR) return ErrnoError("poll " + name_, errno);
  }
}

std::vector<std::string> NvidiaSmiCommand(const std::string& program, double interval_s) {
  std::vector<std::string> argv = {
      program, "--query-gpu=timestamp,index,utilization.gpu,power.draw,memory.used",
      "--format=csv"};
  if (interval_s >= 1 && std::fabs(interval_s - std::round(interval_s)) < 1e-9) {
    argv.push_back("-l");
    argv.push_back(fmt::format("{}", static_cast<long>(std::round(interval_s))));
  } else {
    argv.push_back("-lms");
    argv.push_back(fmt::format("{}", static_cast<long>(std::round(interval_s * 1000))));
  }
  return argv;
}

NvidiaSmiSource::NvidiaSmiSource(std::unique_ptr<LineStream> lines, Clock* clock, std::string host)
    : lines_(std::move(lines)), clock_(clock), host_(host), parser_("nvidia-smi", host) {}

Status NvidiaSmiSource::Poll(double deadline, Batch* out) {
  if (ended_) {
    out->end = true;
    return Status::Ok();
  }
  std::vector<std::string> lines;
  bool eof = false;
  EK_RETURN_IF_ERROR(lines_->ReadLines(deadline, &lines, &eof).WithContext("nvidia-smi"));
  double now = clock_->Now();
  for (const std::string& line : lines) {
    size_t before = out->samples.size();
    size_t problems_before = out->problems.size();
    parser_.ParseLine(line, &out->samples, &out->problems);
    // Receipt time, not nvidia-smi's timestamp: the evaluating clock is the
    // only one every source shares.
    for (size_t i = before; i < out->samples.size(); ++i) out->samples[i].time = now;
    any_sample_ |= out->samples.size() > before;
    if (first_bad_line_.empty() && out->problems.size() > problems_before &&
        out->samples.size() == before) {
      first_bad_line_ = line.substr(0, 200);
    }
  }
  if (eof) {
    ended_ = true;
    out->end = true;
    std::optional<int> status = lines_->exit_status();
    if ((status && *status != 0) || !any_sample_) {
      std::string what = status ? fmt::format("exited with status {}", *status) : "ended";
      if (!any_sample_) what += " without a sample";
      if (!first_bad_line_.empty()) what += ": " + first_bad_line_;
      return UnavailableError("nvidia-smi " + what);
    }
  }
  return Status::Ok();
}

std::string LocalHostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace ek::telemetry
