#include "watch/watcher.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "core/file.h"
#include "core/json_fields.h"
#include "core/json_out.h"

namespace ek::watch {

namespace {

std::string AgentUrl(const std::string& target) {
  std::string base = target.find("://") == std::string::npos ? "http://" + target : target;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/status";
}

// ---- state file (de)serialization ----

void FindingJson(JsonWriter& w, const Finding& f) {
  w.BeginObject().Key("kind").Str(KindName(f.kind)).Key("key").Str(f.key);
  w.Key("severity").Str(f.severity).Key("summary").Str(f.summary).Key("ranks").IntArray(f.ranks);
  w.Key("hosts").StrArray(f.hosts).Key("since").Fixed(f.since, 3).Key("evidence").Str(f.evidence);
  w.Key("gpu_hours").Fixed(f.gpu_hours, 4).EndObject();
}

Status ParseFinding(const JsonFields& e, Finding* f) {
  std::string kind;
  EK_RETURN_IF_ERROR(e.Str("kind", &kind));
  bool known = false;
  for (Kind k : {Kind::kCompletion, Kind::kCrash, Kind::kHang, Kind::kDeadlock, Kind::kThroughput,
                 Kind::kBlind}) {
    if (KindName(k) == kind) {
      f->kind = k;
      known = true;
    }
  }
  if (!known) return e.Err("kind", fmt::format("unknown kind '{}'", kind));
  EK_RETURN_IF_ERROR(e.Str("key", &f->key));
  EK_RETURN_IF_ERROR(e.Str("severity", &f->severity));
  EK_RETURN_IF_ERROR(e.Str("summary", &f->summary));
  std::vector<int64_t> ranks;
  EK_RETURN_IF_ERROR(e.IntList("ranks", 0, 1 << 24, &ranks));
  for (int64_t r : ranks) f->ranks.push_back(static_cast<int>(r));
  EK_RETURN_IF_ERROR(e.StrList("hosts", &f->hosts));
  EK_RETURN_IF_ERROR(e.Num("since", &f->since));
  EK_RETURN_IF_ERROR(e.Str("evidence", &f->evidence));
  return e.Num("gpu_hours", &f->gpu_hours);
}

Status ParseIncident(const JsonFields& e, Incident* inc) {
  EK_RETURN_IF_ERROR(e.Str("id", &inc->id));
  EK_RETURN_IF_ERROR(e.Num("opened", &inc->opened));
  EK_RETURN_IF_ERROR(e.Num("last_resent", &inc->last_resent));
  EK_RETURN_IF_ERROR(
      e.IntIn("clear_rounds", 0, std::numeric_limits<int>::max(), &inc->clear_rounds));
  JsonFields f = e;
  EK_RETURN_IF_ERROR(e.Object("finding", &f));
  return ParseFinding(f, &inc->finding);
}

Status ParseDelivery(const JsonFields& e, Delivery* d) {
  EK_RETURN_IF_ERROR(e.U64("seq", &d->seq));
  EK_RETURN_IF_ERROR(e.Str("sink", &d->sink));
  EK_RETURN_IF_ERROR(e.Str("incident", &d->incident));
  EK_RETURN_IF_ERROR(e.Str("status", &d->status));
  if (d->status != "firing" && d->status != "resolved") {
    return e.Err("status", fmt::format("'{}' is not firing or resolved", d->status));
  }
  EK_RETURN_IF_ERROR(e.Str("body", &d->body));
  EK_RETURN_IF_ERROR(e.IntIn("attempts", 0, std::numeric_limits<int>::max(), &d->attempts));
  EK_RETURN_IF_ERROR(e.Num("queued", &d->queued));
  EK_RETURN_IF_ERROR(e.Num("next_attempt", &d->next_attempt));
  return e.Str("last_error", &d->last_error);
}

}  // namespace

Result<std::unique_ptr<Watcher>> Watcher::Create(WatcherOptions options,
                                                 std::vector<std::unique_ptr<Sink>> sinks,
                                                 HttpClient* http, Clock* clock, LogFn log) {
  if (options.agents.empty())
    return InvalidArgumentError("watch: no agents (--agents HOST:PORT,...)");
  if (options.state_dir.empty()) return InvalidArgumentError("watch: no state directory");
  std::unique_ptr<Watcher> w(new Watcher());
  w->options_ = std::move(options);
  w->sinks_ = std::move(sinks);
  w->http_ = http;
  w->clock_ = clock;
  w->log_ = std::move(log);
  w->detectors_ = std::make_unique<Detectors>(w->options_.settings, w->options_.profile);
  EK_RETURN_IF_ERROR(MakeDirs(w->options_.state_dir, w->options_.env).WithContext("watch"));
  EK_RETURN_IF_ERROR(w->Load());
  return w;
}

void Watcher::Log(double now, std::string_view event,
                  const std::function<void(JsonWriter&)>& fields) {
  if (!log_) return;
  JsonWriter w;
  w.BeginObject().Key("time").Str(Rfc3339(now)).Key("event").Str(event);
  w.Key("run").Str(options_.settings.run);
  if (fields) fields(w);
  log_(w.EndObject().str());
}

std::vector<AgentPoll> Watcher::PollAgents() {
  std::vector<AgentPoll> polls(options_.agents.size());
  std::vector<std::pair<std::string, std::string>> headers;
  if (!options_.token.empty()) headers.emplace_back("Authorization", "Bearer " + options_.token);
  // Bounded fan-out: kPollThreads polls in flight, each bounded by its timeout.
  if (!pool_) pool_ = std::make_unique<ThreadPool>(std::min(polls.size(), kPollThreads));
  pool_->ParallelFor(polls.size(), [&](size_t i, size_t) {
    AgentPoll& p = polls[i];
    p.target = options_.agents[i];
    std::string url = AgentUrl(p.target);
    auto res = http_->Send("GET", url, "", headers, options_.agent_timeout_s);
    p.received = clock_->Now();
    if (!res.ok()) {
      p.error = res.status().message();
    } else if (res->status != 200) {
      p.error = fmt::format("GET {}: HTTP {}", url, res->status);
    } else {
      auto st = ParseAgentStatus(res->body, url);
      if (!st.ok()) {
        p.error = st.status().message();
      } else {
        p.status = std::move(*st);
        p.ok = true;
      }
    }
  });
  return polls;
}

void Watcher::Enqueue(const Incident& incident, bool resolved, double now, Sink* only) {
  for (auto& sink : sinks_) {
    if (only && sink.get() != only) continue;
    Delivery d;
    d.seq = next_seq_++;
    d.sink = sink->name();
    d.incident = incident.id;
    d.status = resolved ? "resolved" : "firing";
    d.body = sink->Render(incident, options_.settings.run, resolved);
    d.queued = now;
    d.next_attempt = now;
    outbox_.push_back(std::move(d));
  }
}

void Watcher::Update(double now, std::vector<Finding> findings) {
  std::set<std::string> present;
  for (Finding& f : findings) {
    present.insert(f.key);
    auto it = open_.find(f.key);
    if (it == open_.end()) {
      Incident inc;
      inc.id =
          fmt::format("{}/{}/{}", options_.settings.run, f.key, static_cast<int64_t>(now * 1000));
      inc.opened = now;
      inc.last_resent = now;
      inc.finding = std::move(f);
      Log(now, "incident_opened", [&](JsonWriter& w) {
        w.Key("incident").Raw(IncidentJson(inc, options_.settings.run, false));
      });
      Enqueue(inc, false, now, nullptr);
      open_.emplace(inc.finding.key, std::move(inc));
      continue;
    }
    Incident& inc = it->second;
    inc.clear_rounds = 0;
    f.since = std::min(f.since, inc.finding.since);
    inc.finding = std::move(f);
    if (now - inc.last_resent >= options_.resend_s) {
      inc.last_resent = now;
      for (auto& sink : sinks_) {
        if (!sink->wants_resend()) continue;
        bool pending = std::any_of(outbox_.begin(), outbox_.end(), [&](const Delivery& d) {
          return d.incident == inc.id && d.sink == sink->name();
        });
        if (!pending) Enqueue(inc, false, now, sink.get());
      }
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    Incident& inc = it->second;
    if (present.count(it->first) || ++inc.clear_rounds < options_.clear_rounds) {
      ++it;
      continue;
    }
    inc.resolved = now;
    Log(now, "incident_resolved", [&](JsonWriter& w) {
      w.Key("incident").Raw(IncidentJson(inc, options_.settings.run, true));
    });
    Enqueue(inc, true, now, nullptr);
    it = open_.erase(it);
  }
}

void Watcher::DeliverDue(double now, double budget_end) {
  std::set<std::string> blocked;  // a sink whose oldest notice is waiting: keep order
  for (auto it = outbox_.begin(); it != outbox_.end();) {
    Delivery& d = *it;
    if (blocked.count(d.sink) || d.next_attempt > now || clock_->Now() > budget_end) {
      blocked.insert(d.sink);
      ++it;
      continue;
    }
    Sink* sink = nullptr;
    for (auto& s : sinks_) {
      if (s->name() == d.sink) sink = s.get();
    }
    if (!sink) {  // a sink removed from the configuration since the notice was queued
      Log(now, "delivery_dropped",
          [&](JsonWriter& w) { w.Key("sink").Str(d.sink).Key("incident").Str(d.incident); });
      it = outbox_.erase(it);
      continue;
    }
    Status st = sink->Deliver(d.body);
    double t = clock_->Now();
    d.attempts++;
    if (st.ok()) {
      Log(t, "delivered", [&](JsonWriter& w) {
        w.Key("sink").Str(d.sink).Key("incident").Str(d.incident).Key("status").Str(d.status);
        w.Key("attempts").Int(d.attempts).Key("delay_s").Fixed(t - d.queued, 3);
      });
      it = outbox_.erase(it);
      continue;
    }
    double backoff =
        std::min(options_.backoff_max_s, options_.backoff_s * std::pow(2.0, d.attempts - 1));
    d.next_attempt = t + backoff;
    d.last_error = st.message();
    Log(t, "delivery_failed", [&](JsonWriter& w) {
      w.Key("sink").Str(d.sink).Key("incident").Str(d.incident).Key("attempts").Int(d.attempts);
      w.Key("retry_in_s").Fixed(backoff, 1).Key("error").Str(st.message());
    });
    blocked.insert(d.sink);
    ++it;
  }
}

Status Watcher::Round() {
  std::vector<AgentPoll> polls = PollAgents();
  double now = clock_->Now();
  for (const auto& p : polls) {
    auto [it, fresh] = agent_ok_.emplace(p.target, !p.ok);
    if (fresh || it->second != p.ok) {
      it->second = p.ok;
      Log(now, p.ok ? "agent_up" : "agent_down", [&](JsonWriter& w) {
        w.Key("agent").Str(p.target);
        if (!p.ok) w.Key("error").Str(p.error);
      });
    }
  }
  Update(now, detectors_->Evaluate(now, polls));
  if (observer_) observer_(now, polls, detectors_->last_assessment(), open_);
  // Deliveries get their own time budget: a round whose polls ran into a
  // frozen agent's timeout must not hold back the alerts it just raised.
  DeliverDue(now, clock_->Now() + std::max(options_.settings.poll_s, 1.0));
  return Save();
}

Status Watcher::Run(const std::atomic<bool>* stop) {
  double next = clock_->Now();
  while (!stop->load()) {
    EK_RETURN_IF_ERROR(Round());
    next += options_.settings.poll_s;
    double now = clock_->Now();
    if (next < now) next = now;  // a slow round does not make the next ones burst
    while (!stop->load() && clock_->Now() < next) {
      clock_->SleepUntil(std::min(next, clock_->Now() + 0.1));
    }
  }
  return Save();
}

Status Watcher::Save() {
  JsonWriter w;
  w.BeginObject().Key("v").Int(1).Key("run").Str(options_.settings.run);
  w.Key("next_seq").Uint(next_seq_).Key("detectors").Raw(detectors_->SaveJson());
  w.Key("open").BeginArray();
  for (const auto& [key, inc] : open_) {
    w.BeginObject().Key("id").Str(inc.id).Key("opened").Fixed(inc.opened, 3);
    w.Key("last_resent").Fixed(inc.last_resent, 3).Key("clear_rounds").Int(inc.clear_rounds);
    w.Key("finding");
    FindingJson(w, inc.finding);
    w.EndObject();
  }
  w.EndArray().Key("outbox").BeginArray();
  for (const Delivery& d : outbox_) {
    w.BeginObject().Key("seq").Uint(d.seq).Key("sink").Str(d.sink).Key("incident").Str(d.incident);
    w.Key("status").Str(d.status).Key("body").Str(d.body).Key("attempts").Int(d.attempts);
    w.Key("queued").Fixed(d.queued, 3).Key("next_attempt").Fixed(d.next_attempt, 3);
    w.Key("last_error").Str(d.last_error).EndObject();
  }
  w.EndArray().EndObject();
  const std::string out = w.Line();
  Status st = WriteFileAtomic(options_.state_dir + "/state.json", out, options_.env);
  return st.ok() ? st : st.WithContext("watch: saving state");
}

// Strict: a state file is ours, so any missing or mistyped field means it was
// damaged or written by another version; the error names the file and the field
// rather than starting over with half of it.
Status Watcher::Load() {
  std::string path = options_.state_dir + "/state.json";
  if (!FileExists(path)) return Status::Ok();
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(text).get(root)) return CorruptError(path + ": not JSON");
  EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, path));
  std::string run;
  EK_RETURN_IF_ERROR(f.Str("run", &run));
  if (run != options_.settings.run) {
    return FailedPreconditionError(
        fmt::format("{}: state of run '{}', not '{}' (use another state dir)", path, run,
                    options_.settings.run));
  }
  EK_RETURN_IF_ERROR(f.U64("next_seq", &next_seq_));
  JsonFields det = f;
  EK_RETURN_IF_ERROR(f.Object("detectors", &det));
  EK_RETURN_IF_ERROR(detectors_->LoadFields(det));
  EK_RETURN_IF_ERROR(f.Objects("open", [&](const JsonFields& item) {
    Incident inc;
    EK_RETURN_IF_ERROR(ParseIncident(item, &inc));
    open_[inc.finding.key] = std::move(inc);
    return Status::Ok();
  }));
  EK_RETURN_IF_ERROR(f.Objects("outbox", [&](const JsonFields& item) {
    Delivery d;
    EK_RETURN_IF_ERROR(ParseDelivery(item, &d));
    outbox_.push_back(std::move(d));
    return Status::Ok();
  }));
  if (next_seq_ == 0) next_seq_ = 1;
  Log(clock_->Now(), "state_loaded",
      [&](JsonWriter& w) { w.Key("open").Uint(open_.size()).Key("outbox").Uint(outbox_.size()); });
  return Status::Ok();
}

}  // namespace ek::watch
