#include "watch/sinks.h"

#include <fmt/format.h>
#include <signal.h>

#include <cmath>
#include <ctime>
#include <optional>
#include <string_view>
#include <vector>

extern char** environ;

#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/process.h"
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
    case Kind::kCompletion:
      return "EvenkeelCompletion";
    case Kind::kCrash:
      return "EvenkeelCrash";
    case Kind::kHang:
      return "EvenkeelHang";
    case Kind::kDeadlock:
      return "EvenkeelDeadlock";
    case Kind::kThroughput:
      return "EvenkeelThroughput";
    case Kind::kBlind:
      return "EvenkeelBlind";
  }
  return "Evenkeel";
}

std::vector<int64_t> Ranks(const Finding& f) { return {f.ranks.begin(), f.ranks.end()}; }

}  // namespace

std::string IncidentText(const Incident& inc, const std::string& run, bool resolved) {
  const Finding& f = inc.finding;
  std::string text = fmt::format("[{}] {}: {}",
                                 resolved               ? "RESOLVED"
                                 : f.severity == "info" ? "INFO"
                                                        : "FIRING",
                                 run, f.summary);
  if (!f.ranks.empty()) text += fmt::format(" | ranks {}", CompactRanges(Ranks(f)));
  if (!f.hosts.empty()) text += fmt::format(" on {}", fmt::join(f.hosts, ","));
  text += fmt::format(" | since {}", Rfc3339(f.since));
  if (resolved)
    text += fmt::format(" | cleared {} (lasted {})", Rfc3339(inc.resolved),
                        triage::FormatDuration(inc.resolved - f.since));
  if (f.gpu_hours > 0) text += fmt::format(" | {:.1f} GPU-hours at stake", f.gpu_hours);
  text += " | " + f.evidence;
  return text;
}

std::string IncidentJson(const Incident& inc, const std::string& run, bool resolved) {
  const Finding& f = inc.finding;
  JsonWriter w;
  w.BeginObject().Key("id").Str(inc.id).Key("run").Str(run).Key("kind").Str(KindName(f.kind));
  w.Key("status").Str(resolved ? "resolved" : "firing").Key("severity").Str(f.severity);
  w.Key("summary").Str(f.summary).Key("ranks").IntArray(f.ranks);
  w.Key("ranks_compact").Str(CompactRanges(Ranks(f))).Key("hosts").StrArray(f.hosts);
  w.Key("since").Str(Rfc3339(f.since)).Key("opened").Str(Rfc3339(inc.opened));
  if (resolved) w.Key("resolved").Str(Rfc3339(inc.resolved));
  w.Key("evidence").Str(f.evidence).Key("gpu_hours").Fixed(f.gpu_hours, 3).EndObject();
  return w.str();
}

namespace {

Status PostJson(HttpClient* http, const std::string& url, const std::string& body,
                double timeout_s) {
  EK_ASSIGN_OR_RETURN(HttpResponse res, http->Send("POST", url, body, {}, timeout_s));
  if (res.status < 200 || res.status >= 300) {
    return UnavailableError(
        fmt::format("POST {}: HTTP {}: {}", url, res.status, res.body.substr(0, 200)));
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
    JsonWriter w;
    w.BeginArray().BeginObject().Key("labels").BeginObject();
    w.Key("alertname").Str(AlertName(f.kind)).Key("run").Str(run).Key("kind").Str(KindName(f.kind));
    w.Key("severity").Str(f.severity).Key("incident").Str(inc.id).EndObject();
    w.Key("annotations").BeginObject().Key("summary").Str(f.summary);
    w.Key("ranks").Str(CompactRanges(Ranks(f)));
    w.Key("hosts").Str(fmt::format("{}", fmt::join(f.hosts, ",")));
    w.Key("since").Str(Rfc3339(f.since)).Key("evidence").Str(f.evidence);
    w.Key("gpu_hours").Str(fmt::format("{:.2f}", f.gpu_hours)).EndObject();
    w.Key("startsAt").Str(Rfc3339(inc.opened));
    if (resolved) w.Key("endsAt").Str(Rfc3339(inc.resolved));
    w.Key("generatorURL").Str("http://evenkeel.invalid/watch").EndObject().EndArray();
    return w.str();
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
    JsonWriter w;
    w.BeginObject().Key("text").Str(IncidentText(inc, run, resolved));
    w.Key("evenkeel").Raw(IncidentJson(inc, run, resolved)).EndObject();
    return w.str();
  }
  Status Deliver(const std::string& body) override {
    return PostJson(http_, url_, body, timeout_s_);
  }

 private:
  std::string url_;
  HttpClient* http_;
  double timeout_s_;
};

// The command's variables, read back from the record Render wrote (IncidentJson): "status",
// "kind" and "id". A body without them (a test's "{}") leaves them empty.
std::vector<std::pair<std::string, std::string>> AlertVariables(const std::string& body) {
  std::string status, kind, id;
  JsonDocument doc;
  Result<JsonFields> f = doc.Parse(body, "alert");
  if (f.ok()) {
    (void)f->OptStr("status", &status);
    (void)f->OptStr("kind", &kind);
    (void)f->OptStr("id", &id);
  }
  return {
      {"EVENKEEL_ALERT_STATUS", status}, {"EVENKEEL_ALERT_KIND", kind}, {"EVENKEEL_ALERT_ID", id}};
}

class CommandSink : public Sink {
 public:
  CommandSink(std::string command, double timeout_s, Clock* clock)
      : command_(std::move(command)), timeout_s_(timeout_s), clock_(clock) {}
  std::string name() const override { return "command"; }
  std::string Render(const Incident& inc, const std::string& run, bool resolved) const override {
    return IncidentJson(inc, run, resolved) + "\n";
  }
  Status Deliver(const std::string& body) override {
    SpawnOptions o;
    o.argv = {"/bin/sh", "-c", command_};
    o.input_pipe = true;
    // The alert's own variables replace any the watcher inherited.
    for (char** e = environ; *e; ++e) {
      std::string_view var(*e);
      if (var.starts_with("EVENKEEL_ALERT_"))
        o.unset_env.emplace_back(var.substr(0, var.find('=')));
    }
    o.env = AlertVariables(body);
    auto child = Child::Spawn(o);
    if (!child.ok()) return child.status().WithContext("alert command");
    Status written = child->WriteInput(body, "alert command");
    std::optional<ExitStatus> st = child->WaitFor(timeout_s_, clock_);
    if (!st) {
      child->Signal(SIGKILL);
      child->Wait();
      return UnavailableError(fmt::format("alert command timed out after {:.0f} s", timeout_s_));
    }
    if (!written.ok()) return written;
    if (!st->ok()) {
      return UnavailableError(
          fmt::format("alert command failed (status {})", st->signal ? -1 : st->code));
    }
    return Status::Ok();
  }

 private:
  std::string command_;
  double timeout_s_;
  Clock* clock_;
};

}  // namespace

std::unique_ptr<Sink> MakeAlertmanagerSink(const std::string& url, HttpClient* http,
                                           double timeout_s) {
  return std::make_unique<AlertmanagerSink>(url, http, timeout_s);
}
std::unique_ptr<Sink> MakeWebhookSink(const std::string& url, HttpClient* http, double timeout_s) {
  return std::make_unique<WebhookSink>(url, http, timeout_s);
}
std::unique_ptr<Sink> MakeCommandSink(const std::string& command, double timeout_s, Clock* clock) {
  return std::make_unique<CommandSink>(command, timeout_s, clock);
}

}  // namespace ek::watch
