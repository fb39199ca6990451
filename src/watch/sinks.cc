#include "watch/sinks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <ctime>
#include <vector>

extern char** environ;

#include "core/json_out.h"
#include "triage/classifier.h"

namespace ek::watch {

std::string Rfc3339(double t) {
  long long total_ms = std::llround(t * 1000);
  time_t sec = static_cast<time_t>(total_ms / 1000);
  int ms = static_cast<int>(total_ms % 1000);
  struct tm tm;
  gmtime_r(&sec, &tm);
  char buf[40];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, ms);
}

namespace {

std::string AlertName(Kind k) {
  switch (k) {
    case Kind::kCompletion: return "EvenkeelCompletion";
    case Kind::kCrash: return "EvenkeelCrash";
    case Kind::kHang: return "EvenkeelHang";
    case Kind::kDeadlock: return "EvenkeelDeadlock";
    case Kind::kThroughput: return "EvenkeelThroughput";
    case Kind::kBlind: return "EvenkeelBlind";
  }
  return "Evenkeel";
}

std::vector<int64_t> Ranks(const Finding& f) { return {f.ranks.begin(), f.ranks.end()}; }

}  // namespace

std::string IncidentText(const Incident& inc, const std::string& run, bool resolved) {
  const Finding& f = inc.finding;
  std::string text = fmt::format("[{}] {}: {}", resolved ? "RESOLVED" : f.severity == "info" ? "INFO" : "FIRING",
                                 run, f.summary);
  if (!f.ranks.empty()) text += fmt::format(" | ranks {}", CompactRanges(Ranks(f)));
  if (!f.hosts.empty()) text += fmt::format(" on {}", fmt::join(f.hosts, ","));
  text += fmt::format(" | since {}", Rfc3339(f.since));
  if (resolved) text += fmt::format(" | cleared {} (lasted {})", Rfc3339(inc.resolved),
                                    triage::FormatDuration(inc.resolved - f.since));
  if (f.gpu_hours > 0) text += fmt::format(" | {:.1f} GPU-hours at stake", f.gpu_hours);
  text += " | " + f.evidence;
  return text;
}

std::string IncidentJson(const Incident& inc, const std::string& run, bool resolved) {
  const Finding& f = inc.finding;
  std::string hosts;
  for (size_t i = 0; i < f.hosts.size(); ++i) {
    if (i) hosts += ',';
    AppendJsonString(&hosts, f.hosts[i]);
  }
  std::string ranks;
  for (size_t i = 0; i < f.ranks.size(); ++i) ranks += fmt::format("{}{}", i ? "," : "", f.ranks[i]);
  return fmt::format(
      "{{\"id\":{},\"run\":{},\"kind\":\"{}\",\"status\":\"{}\",\"severity\":{},\"summary\":{},"
      "\"ranks\":[{}],\"ranks_compact\":{},\"hosts\":[{}],\"since\":{},\"opened\":{},{}"
      "\"evidence\":{},\"gpu_hours\":{:.3f}}}",
      JsonString(inc.id), JsonString(run), KindName(f.kind), resolved ? "resolved" : "firing",
      JsonString(f.severity), JsonString(f.summary), ranks, JsonString(CompactRanges(Ranks(f))), hosts,
      JsonString(Rfc3339(f.since)), JsonString(Rfc3339(inc.opened)),
      resolved ? fmt::format("\"resolved\":{},", JsonString(Rfc3339(inc.resolved))) : "",
      JsonString(f.evidence), f.gpu_hours);
}

namespace {

Status PostJson(HttpClient* http, const std::string& url, const std::string& body, double timeout_s) {
  EK_ASSIGN_OR_RETURN(HttpResponse res, http->Send("POST", url, body, {}, timeout_s));
  if (res.status < 200 || res.status >= 300) {
    return UnavailableError(fmt::format("POST {}: HTTP {}: {}", url, res.status, res.body.substr(0, 200)));
  }
  return Status::Ok();
}

class AlertmanagerSink : public Sink {
 public:
  AlertmanagerSink(std::string url, HttpClient* http, double timeout_s)
      : url_(std::move(url)), http_(http), timeout_s_(timeout_s) {
    while (!url_.empty() && url_.back() == '/') url_.pop_back();
  }
  std::string name() const override { return "alertmanager"; }
  bool wants_resend() const override { return true; }
  std::string Render(const Incident& inc, const std::string& run, bool resolved) const override {
    const Finding& f = inc.finding;
    std::string hosts = fmt::format("{}", fmt::join(f.hosts, ","));
    std::string out = "[{\"labels\":{";
    out += fmt::format("\"alertname\":\"{}\",\"run\":{},\"kind\":\"{}\",\"severity\":{},\"incident\":{}",
                       AlertName(f.kind), JsonString(run), KindName(f.kind), JsonString(f.severity),
                       JsonString(inc.id));
    out += "},\"annotations\":{";
    out += fmt::format("\"summary\":{},\"ranks\":{},\"hosts\":{},\"since\":{},\"evidence\":{},"
                       "\"gpu_hours\":\"{:.2f}\"",
                       JsonString(f.summary), JsonString(CompactRanges(Ranks(f))), JsonString(hosts),
                       JsonString(Rfc3339(f.since)), JsonString(f.evidence), f.gpu_hours);
    out += fmt::format("}},\"startsAt\":{}", JsonString(Rfc3339(inc.opened)));
    if (resolved) out += fmt::format(",\"endsAt\":{}", JsonString(Rfc3339(inc.resolved)));
    out += ",\"generatorURL\":\"http://evenkeel.invalid/watch\"}]";
    return out;
  }
  Status Deliver(const std::string& body) override {
    return PostJson(http_, url_ + "/api/v2/alerts", body, timeout_s_);
  }

 private:
  std::string url_;
  HttpClient* http_;
  double timeout_s_;
};

class WebhookSink : public Sink {
 public:
  WebhookSink(std::string url, HttpClient* http, double timeout_s)
      : url_(std::move(url)), http_(http), timeout_s_(timeout_s) {}
  std::string name() const override { return "webhook"; }
  std::string Render(const Incident& inc, const std::string& run, bool resolved) const override {
    return fmt::format("{{\"text\":{},\"evenkeel\":{}}}", JsonString(IncidentText(inc, run, resolved)),
                       IncidentJson(inc, run, resolved));
  }
  Status Deliver(const std::string& body) override { return PostJson(http_, url_, body, timeout_s_); }

 private:
  std::string url_;
  HttpClient* http_;
  double timeout_s_;
};

// Reads one JSON string field out of our own rendering (for the command's environment).
std::string Field(const std::string& json, std::string_view key) {
  std::string pat = fmt::format("\"{}\":\"", key);
  size_t a = json.find(pat);
  if (a == std::string::npos) return "";
  a += pat.size();
  size_t b = json.find('"', a);
  return b == std::string::npos ? "" : json.substr(a, b - a);
}

class CommandSink : public Sink {
 public:
  CommandSink(std::string command, double timeout_s) : command_(std::move(command)), timeout_s_(timeout_s) {}
  std::string name() const override { return "command"; }
  std::string Render(const Incident& inc, const std::string& run, bool resolved) const override {
    return IncidentJson(inc, run, resolved) + "\n";
  }
  Status Deliver(const std::string& body) override {
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) return ErrnoError("alert command: pipe", errno);
    std::string status = "EVENKEEL_ALERT_STATUS=" + Field(body, "status");
    std::string kind = "EVENKEEL_ALERT_KIND=" + Field(body, "kind");
    std::string id = "EVENKEEL_ALERT_ID=" + Field(body, "id");
    // Built before fork: the child of a threaded process may only exec.
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) {
      if (!std::string_view(*e).starts_with("EVENKEEL_ALERT_")) envp.push_back(*e);
    }
    envp.push_back(status.data());
    envp.push_back(kind.data());
    envp.push_back(id.data());
    envp.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
      close(in[0]);
      close(in[1]);
      return ErrnoError("alert command: fork", errno);
    }
    if (pid == 0) {
      dup2(in[0], 0);
      setpgid(0, 0);
      execle("/bin/sh", "sh", "-c", command_.c_str(), static_cast<char*>(nullptr), envp.data());
      _exit(127);
    }
    close(in[0]);
    signal(SIGPIPE, SIG_IGN);
    Status written = WriteAllFd(in[1], body);
    close(in[1]);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    int wstatus = 0;
    while (true) {
      pid_t r = waitpid(pid, &wstatus, WNOHANG);
      if (r == pid) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(-pid, SIGKILL);
        waitpid(pid, &wstatus, 0);
        return UnavailableError(fmt::format("alert command timed out after {:.0f} s", timeout_s_));
      }
      usleep(10000);
    }
    if (!written.ok()) return written;
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      return UnavailableError(fmt::format("alert command failed (status {})",
                                          WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1));
    }
    return Status::Ok();
  }

 private:
  static Status WriteAllFd(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = write(fd, data.data() + off, data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("alert command: write", errno);
      off += n;
    }
    return Status::Ok();
  }
  std::string command_;
  double timeout_s_;
};

}  // namespace

std::unique_ptr<Sink> MakeAlertmanagerSink(const std::string& url, HttpClient* http, double timeout_s) {
  return std::make_unique<AlertmanagerSink>(url, http, timeout_s);
}
std::unique_ptr<Sink> MakeWebhookSink(const std::string& url, HttpClient* http, double timeout_s) {
  return std::make_unique<WebhookSink>(url, http, timeout_s);
}
std::unique_ptr<Sink> MakeCommandSink(const std::string& command, double timeout_s) {
  return std::make_unique<CommandSink>(command, timeout_s);
}

}  // namespace ek::watch
