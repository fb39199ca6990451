// One file over 600 lines: the readers of a run's inputs fill one shared model (Input, HostData).
#include "report/inputs.h"

#include <fmt/core.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "ckpt/checkpoint.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/jsonl.h"
#include "core/thread_pool.h"
#include "heartbeat/goodput_account.h"
#include "run/rank_cause.h"
#include "run/run_file.h"
#include "telemetry/nvidia_smi_csv.h"
#include "telemetry/prometheus.h"
#include "telemetry/replay.h"
#include "triage/classifier.h"
#include "triage/profile.h"

namespace ek::report {

namespace {

bool IsDir(const std::string& p) {
  auto info = Env::Default()->Stat(p);
  return info.ok() && info->is_directory();
}

double Mtime(const std::string& p) {
  auto info = Env::Default()->Stat(p);
  return info.ok() ? info->mtime : 0;
}

// One reading at full precision, until the classifier has seen it.
struct Raw {
  double t;
  float util, power;  // NaN: missing
};

struct HostData {
  std::vector<std::string> hosts;  // in order of appearance
  // raw[host][gpu]: the host's readings per GPU, as the file has them.
  std::vector<std::vector<std::vector<Raw>>> raw;
  std::vector<telemetry::Problem> problems;
  int widest = 0;            // largest GPU index + 1
  bool host_column = false;  // the hosts came from the file's host column
};

// A telemetry input: the file, its HOST= and its flag.
struct Input {
  TelemetryFile file;
  bool dcgm = false;
  const char* flag() const { return dcgm ? "--dcgm" : "--telemetry"; }
};

std::string Join(const std::vector<std::string>& v, std::string_view sep = ", ") {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) o += (i ? std::string(sep) : std::string()) + v[i];
  return o;
}

// A run's hosts for a message: the first eight, then how many more.
std::string HostList(const std::vector<std::string>& hosts) {
  constexpr size_t kShown = 8;
  if (hosts.size() <= kShown) return Join(hosts);
  std::vector<std::string> head(hosts.begin(), hosts.begin() + kShown);
  return fmt::format("{} and {} more", Join(head), hosts.size() - kShown);
}

// The newest launch session (a directory with summary.json or attempt-*) under `root`.
std::string NewestSession(const std::string& root) {
  std::string best;
  double best_t = -1;
  auto names = Env::Default()->ListDir(root);
  if (!names.ok()) return best;
  for (const std::string& n : *names) {
    std::string p = root + "/" + n;
    if (!IsDir(p)) continue;
    double t = std::max(Mtime(p + "/summary.json"), Mtime(p));
    if (t > best_t) best_t = t, best = p;
  }
  return best;
}

// Each attempt that did not complete is an incident of the launcher's, where the page
// puts what went wrong first: the decision (action, exit code, reason) as its summary,
// each failed rank's first error as its evidence, the ranks and their hosts, from the
// attempt's end until the next attempt started. `lost[i]` is attempt i's GPU-hours
// after its last new checkpoint.
void AddAttemptIncidents(const std::vector<double>& lost, Recorder* rec) {
  const auto& attempts = rec->attempts;
  for (size_t i = 0; i < attempts.size(); ++i) {
    const AttemptMark& a = attempts[i];
    if (a.outcome == "completed") continue;
    Incident inc;
    inc.source = "launcher";
    inc.kind = a.outcome == "cancelled" ? "cancelled" : "attempt failed";
    inc.summary = fmt::format("attempt {} {}: {}", a.attempt, a.outcome, a.decision);
    if (a.decision != "restart" && a.exit_code >= 0)
      inc.summary += fmt::format(", exit {}", a.exit_code);
    if (!a.reason.empty()) inc.summary += ": " + a.reason;
    std::vector<std::string> evidence;
    for (const auto& c : a.causes) {
      if (std::find(inc.ranks.begin(), inc.ranks.end(), c.rank) == inc.ranks.end())
        inc.ranks.push_back(c.rank);
      if (c.rank < static_cast<int>(rec->ranks().size())) {
        const std::string& host = rec->ranks()[c.rank].host;
        if (std::find(inc.hosts.begin(), inc.hosts.end(), host) == inc.hosts.end())
          inc.hosts.push_back(host);
      }
      evidence.push_back(fmt::format("rank {}: {}", c.rank, c.cause));
    }
    if (!a.causes_recorded)
      evidence.push_back("no causes recorded (the launcher that wrote summary.json reads none)");
    if (!a.flight_recorder.empty()) evidence.push_back("flight recorder: " + a.flight_recorder);
    inc.evidence = Join(evidence, "\n");
    inc.since = a.end;
    inc.until = i + 1 < attempts.size() ? std::max(a.end, attempts[i + 1].start) : a.end;
    inc.gpu_hours = lost[i];
    rec->incidents.push_back(std::move(inc));
  }
}

Status ReadLaunch(const std::string& dir, Recorder* rec) {
  const std::string path = dir + "/summary.json";
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields s, doc.Parse(text, path));
  Summary& m = rec->summary;
  // The fields of launch::LaunchSummaryFromJson, as strictly: the launcher writes
  // every one (docs/launch.md "Records"). A count of -1 means "not known".
  std::string outcome, final_ckpt;
  EK_RETURN_IF_ERROR(s.Str("outcome", &outcome));
  EK_RETURN_IF_ERROR(s.Str("final_checkpoint", &final_ckpt));
  if (!outcome.empty()) m.outcome = outcome;
  if (!final_ckpt.empty()) m.final_checkpoint = final_ckpt;  // "": none verifies as final
  for (auto [out, key] : {std::pair{&m.steps, "steps"},
                          {&m.planned_steps, "planned_steps"},
                          {&m.tokens, "tokens"},
                          {&m.tokens_per_s, "tokens_per_s"},
                          {&m.attempts, "attempts"},
                          {&m.gpu_hours_used, "gpu_hours_used"},
                          {&m.gpu_hours_lost, "gpu_hours_lost"},
                          {&m.evenfix_dropped_blocks, "evenfix_dropped_blocks"}}) {
    double v = -1;
    EK_RETURN_IF_ERROR(s.Num(key, &v));
    if (v >= 0) *out = v;
  }
  // The goodput account: launchers before it wrote none (absent, not an error); present, strict.
  if (s.Has("goodput")) {
    heartbeat::GoodputAccount g;
    EK_RETURN_IF_ERROR(heartbeat::GoodputFromFields(s, "goodput", &g));
    m.goodput = g;
  }
  std::vector<double> lost;  // each attempt's GPU-hours after its last new checkpoint
  EK_RETURN_IF_ERROR(s.Objects("attempt_records", [&](const JsonFields& a) -> Status {
    AttemptMark mark;
    EK_RETURN_IF_ERROR(a.Int("attempt", &mark.attempt));
    EK_RETURN_IF_ERROR(a.Num("start", &mark.start));
    EK_RETURN_IF_ERROR(a.Num("end", &mark.end));
    EK_RETURN_IF_ERROR(a.Str("outcome", &mark.outcome));
    JsonFields d = a, fr = a;
    EK_RETURN_IF_ERROR(a.Object("decision", &d));
    EK_RETURN_IF_ERROR(d.Str("action", &mark.decision));
    EK_RETURN_IF_ERROR(d.IntIn("exit_code", 0, 255, &mark.exit_code));
    EK_RETURN_IF_ERROR(d.Str("reason", &mark.reason));
    EK_RETURN_IF_ERROR(a.Object("flight_recorder", &fr));
    EK_RETURN_IF_ERROR(fr.Str("verdict", &mark.flight_recorder));
    double gpu_hours_lost = 0;
    EK_RETURN_IF_ERROR(a.Num("gpu_hours_lost", &gpu_hours_lost));
    // Launchers before "The cause, named" wrote no causes: absent, not an error (docs/report.md).
    mark.causes_recorded = a.Has("causes");
    if (mark.causes_recorded) EK_RETURN_IF_ERROR(run::ReadRankCauses(a, &mark.causes));
    rec->attempts.push_back(std::move(mark));
    lost.push_back(gpu_hours_lost);
    return Status::Ok();
  }));
  AddAttemptIncidents(lost, rec);
  return Status::Ok();
}

// Calls fn(fields, "FILE:LINE") for each JSON line of `path`. A line that is not
// a JSON object (a truncated last line, NaN written by Python) is skipped with a
// problem naming it; fn's errors, a field missing or mistyped, end the read.
template <typename Fn>
Status ForEachJsonLine(const std::string& path, std::vector<std::string>* problems, Fn&& fn) {
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  JsonDocument doc;
  LineSplitter lines(text);
  for (TextLine line; lines.Next(&line);) {
    if (line.text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string where = fmt::format("{}:{}", path, line.number);
    auto fields = doc.Parse(line.text, where);
    if (!fields.ok()) {
      problems->push_back(
          fmt::format("{}: not JSON (skipped): {}", where, fields.status().message()));
      continue;
    }
    EK_RETURN_IF_ERROR(fn(*fields, where));
  }
  return Status::Ok();
}

// The trainer's train-metrics.jsonl (docs/trainer.md): {"time", "step", "loss",
// "tok_s", ...} per logged step; time is required, the values are optional.
Status ReadMetrics(const std::string& path, Recorder* rec, std::vector<std::string>* problems) {
  return ForEachJsonLine(path, problems, [&](const JsonFields& f, const std::string&) -> Status {
    double t = 0;
    EK_RETURN_IF_ERROR(f.Num("time", &t));
    for (auto [series, key] : {std::pair{Recorder::Series::kTokensPerS, "tok_s"},
                               {Recorder::Series::kStep, "step"},
                               {Recorder::Series::kLoss, "loss"}}) {
      if (!f.Has(key)) continue;
      double v = 0;
      EK_RETURN_IF_ERROR(f.Num(key, &v));
      rec->AddPoint(series, t, v);
    }
    return Status::Ok();
  });
}

// A time the watcher wrote (RFC 3339, sinks.cc's Rfc3339) or a number of seconds.
Status TimeField(const JsonFields& f, const char* key, double* out) {
  if (!f.Has(key)) return f.Err(key, "missing");
  std::string text;
  if (f.Str(key, &text).ok()) {
    auto t = telemetry::ParseTimestamp(text);
    if (!t) return f.Err(key, fmt::format("'{}' is not a time", text));
    *out = *t;
    return Status::Ok();
  }
  return f.Num(key, out);
}

// The watcher's JSON-lines log (docs/watch.md, "Log"): incident_opened and
// incident_resolved carry the incident as the sinks write it (watch/sinks.cc's
// IncidentJson: id, kind, summary, ranks, hosts, since, evidence, gpu_hours);
// the other events are not the report's.
Status ReadWatchLog(const std::string& path, Recorder* rec, std::vector<std::string>* problems) {
  std::map<std::string, size_t> open;  // incident id -> index in rec->incidents
  return ForEachJsonLine(path, problems, [&](const JsonFields& e, const std::string&) -> Status {
    std::string event;
    EK_RETURN_IF_ERROR(e.Str("event", &event));
    if (event != "incident_opened" && event != "incident_resolved") return Status::Ok();
    double at = 0;
    EK_RETURN_IF_ERROR(TimeField(e, "time", &at));
    JsonFields inc = e;
    EK_RETURN_IF_ERROR(e.Object("incident", &inc));
    std::string id;
    EK_RETURN_IF_ERROR(inc.Str("id", &id));
    if (event == "incident_resolved") {
      if (auto it = open.find(id); it != open.end()) {
        double until = at;
        if (inc.Has("resolved")) EK_RETURN_IF_ERROR(TimeField(inc, "resolved", &until));
        rec->incidents[it->second].until = until;
        open.erase(it);
      }
      return Status::Ok();
    }
    Incident x;
    x.source = "watcher";
    std::vector<int64_t> ranks;
    EK_RETURN_IF_ERROR(inc.Str("kind", &x.kind));
    EK_RETURN_IF_ERROR(inc.Str("summary", &x.summary));
    EK_RETURN_IF_ERROR(inc.Str("evidence", &x.evidence));
    EK_RETURN_IF_ERROR(TimeField(inc, "since", &x.since));
    EK_RETURN_IF_ERROR(inc.Num("gpu_hours", &x.gpu_hours));
    EK_RETURN_IF_ERROR(inc.IntList("ranks", 0, std::numeric_limits<int>::max(), &ranks));
    EK_RETURN_IF_ERROR(inc.StrList("hosts", &x.hosts));
    x.ranks.assign(ranks.begin(), ranks.end());
    open[id] = rec->incidents.size();
    rec->incidents.push_back(std::move(x));
    return Status::Ok();
  });
}

// Parses one file straight into compact readings: the replay's parser and
// clock alignment, without holding a Sample per row (22 million of them would
// take gigabytes).
Result<HostData> ParseTelemetryFile(const Input& input, double interval_s) {
  const std::string& path = input.file.path;
  const bool dcgm = input.dcgm;
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  HostData d;
  std::map<std::string, int> index;
  int last_host = -1;  // rows of one host come in runs: look the host up only when it changes
  auto add = [&](const telemetry::Sample& s) {
    if (last_host < 0 || d.hosts[last_host] != s.host) {
      auto [it, fresh] = index.emplace(s.host, static_cast<int>(d.hosts.size()));
      if (fresh) {
        d.hosts.push_back(s.host);
        d.raw.emplace_back();
      }
      last_host = it->second;
    }
    if (s.gpu < 0 || s.gpu >= telemetry::kMaxGpusPerHost) return;
    auto& per_gpu = d.raw[last_host];
    if (static_cast<int>(per_gpu.size()) <= s.gpu) per_gpu.resize(s.gpu + 1);
    d.widest = std::max(d.widest, s.gpu + 1);
    per_gpu[s.gpu].push_back({s.time, s.util_pct ? static_cast<float>(*s.util_pct) : NAN,
                              s.power_w ? static_cast<float>(*s.power_w) : NAN});
  };
  const std::string default_host =
      input.file.host.empty() ? telemetry::HostFromPath(path) : input.file.host;
  if (dcgm) {
    const std::string& host = default_host;
    EK_ASSIGN_OR_RETURN(auto samples, ParseDcgmRecording(text, host, path, &d.problems));
    index.emplace(host, 0);
    d.hosts.push_back(host);
    d.raw.emplace_back();
    for (const auto& s : samples) add(s);
    return d;
  }
  std::string file = std::filesystem::path(path).filename().string();
  telemetry::NvidiaSmiCsvParser parser(file, default_host, interval_s);
  std::map<std::string, telemetry::HostTimeAligner> aligners;
  auto aligner_for = aligners.end();  // the previous row's host (rows come in runs per host)
  std::vector<telemetry::Sample> row, aligned;
  bool any = false;
  LineSplitter lines(text);
  for (TextLine line; lines.Next(&line);) {
    row.clear();
    parser.ParseLine(line.text, &row, &d.problems);
    if (row.empty()) continue;
    any = true;
    auto it = aligner_for != aligners.end() && aligner_for->first == row[0].host
                  ? aligner_for
                  : aligners.find(row[0].host);
    if (it == aligners.end()) {
      it = aligners
               .emplace(row[0].host, telemetry::HostTimeAligner(
                                         interval_s, telemetry::ReplayOptions().clock_jump_s))
               .first;
    }
    aligner_for = it;
    aligned.clear();
    it->second.Add(std::move(row[0]), telemetry::HostTimeAligner::Row{file, parser.line_number()},
                   &aligned, &d.problems);
    for (const auto& s : aligned) add(s);
  }
  for (auto& [host, a] : aligners) a.Finish(&d.problems);
  d.host_column = parser.has_host_column();
  if (d.host_column && !input.file.host.empty()) {
    return InvalidArgumentError(fmt::format(
        "{} {}={}: {} has a host column (hosts: {}); HOST=FILE is for a file "
        "without one: pass {} {}",
        input.flag(), input.file.host, path, path, HostList(d.hosts), input.flag(), path));
  }
  if (!any && d.hosts.empty() && !parser.has_host_column()) {
    d.hosts.push_back(default_host);
    d.raw.emplace_back();
  }
  return d;
}

// The rank layout the report's rows follow, with every file's hosts and GPU
// indices checked against it. With a run file it is the run's topology: each
// host of the telemetry must be one of the run's (or, when the run names none,
// there may be at most cluster.nodes of them, taken in order) and each GPU index
// below gpus_per_node. Without one, the hosts come from the files in order of
// appearance and the widest host sets the GPUs per host.
Result<run::Topology> Layout(const std::vector<Input>& inputs,
                             const std::vector<const HostData*>& data, const run::RunFile* run,
                             std::vector<std::string>* notes) {
  std::vector<std::string> found;  // in order of appearance
  int widest = 0;
  for (const HostData* d : data) {
    for (const auto& h : d->hosts) {
      if (std::find(found.begin(), found.end(), h) == found.end()) found.push_back(h);
    }
    widest = std::max(widest, d->widest);
  }
  if (!run) return run::Topology::FromHosts(found, widest);

  const std::string& run_name = run->path;
  run::Topology topo = run->topology();
  std::vector<std::string> errors;
  if (topo.has_hosts()) {
    std::vector<size_t> by_name;  // files whose name is no host of the run
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Input& in = inputs[i];
      std::vector<std::string> foreign;
      for (const auto& h : data[i]->hosts) {
        if (topo.NodeOfHost(h) < 0) foreign.push_back(h);
      }
      if (foreign.empty()) continue;
      if (data[i]->host_column) {
        errors.push_back(
            fmt::format("telemetry {}: its host column names {}, not {} of {} (hosts: {})",
                        in.file.path, HostList(foreign), foreign.size() == 1 ? "a host" : "hosts",
                        run_name, HostList(topo.hosts())));
      } else if (!in.file.host.empty()) {
        errors.push_back(fmt::format("telemetry {}={}: {} is not a host of {} (hosts: {})",
                                     in.file.host, in.file.path, in.file.host, run_name,
                                     HostList(topo.hosts())));
      } else {
        by_name.push_back(i);
      }
    }
    if (!by_name.empty()) {
      std::vector<std::string> names;
      for (size_t i : by_name) names.push_back(inputs[i].file.path);
      // A hint pairing the unmatched files with the hosts that have no telemetry, in order.
      std::vector<std::string> free;
      for (const auto& h : topo.hosts()) {
        if (std::find(found.begin(), found.end(), h) == found.end()) free.push_back(h);
      }
      std::string hint, flag;
      for (size_t k = 0; k < by_name.size() && k < free.size(); ++k) {
        const Input& in = inputs[by_name[k]];
        if (k) hint += " ";
        if (flag != in.flag()) flag = in.flag(), hint += flag + " ";
        hint += free[k] + "=" + in.file.path;
      }
      const bool one = by_name.size() == 1;
      std::string msg = fmt::format("telemetry {} match{} no host of {} (hosts: {})", Join(names),
                                    one ? "es" : "", run_name, HostList(topo.hosts()));
      if (!free.empty()) {
        msg += fmt::format("; name {} after {} host ({}{}) or pass {}", one ? "it" : "each",
                           one ? "its" : "their", free[0],
                           inputs[by_name[0]].dcgm ? ".prom" : ".csv", hint);
      } else {
        msg += "; every host of the run already has telemetry";
      }
      errors.insert(errors.begin(), msg);
    }
  } else if (static_cast<int>(found.size()) > topo.nodes()) {
    errors.push_back(fmt::format(
        "the telemetry names {} hosts ({}) but {} has {} node{} (cluster.nodes)", found.size(),
        HostList(found), run_name, topo.nodes(), topo.nodes() == 1 ? "" : "s"));
  } else if (!found.empty()) {
    notes->push_back(
        fmt::format("{} names no cluster.hosts: node ranks follow the telemetry's order ({})",
                    run_name, HostList(found)));
    topo = run::Topology(run->nodes, run->gpus_per_node, found);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const HostData& d = *data[i];
    for (size_t h = 0; h < d.hosts.size(); ++h) {
      const int gpus = static_cast<int>(d.raw[h].size());
      if (gpus > topo.gpus_per_node()) {
        errors.push_back(fmt::format(
            "telemetry {}: {} has GPU index {}, but {} has gpus_per_node = {} (indices 0-{})",
            inputs[i].file.path, d.hosts[h], gpus - 1, run_name, topo.gpus_per_node(),
            topo.gpus_per_node() - 1));
      }
    }
  }
  if (!errors.empty()) return InvalidArgumentError(Join(errors, "; "));
  for (int node = 0; node < topo.nodes(); ++node) {
    const std::string host = topo.HostOf(node);
    if (std::find(found.begin(), found.end(), host) != found.end()) continue;
    notes->push_back(
        fmt::format("no telemetry for {} (ranks {}-{}): its rows are empty (missing data, which "
                    "triage calls UNKNOWN)",
                    host, topo.FirstRank(node), topo.EndRank(node) - 1));
  }
  return topo;
}

}  // namespace

Result<TelemetryFile> ParseTelemetryArg(const std::string& arg) {
  const size_t eq = arg.find('='), slash = arg.find('/');
  if (eq == std::string::npos || (slash != std::string::npos && slash < eq)) {
    if (arg.empty()) return InvalidArgumentError("telemetry: an empty file name");
    return TelemetryFile{arg, ""};
  }
  TelemetryFile f{arg.substr(eq + 1), arg.substr(0, eq)};
  if (f.host.empty() || f.path.empty()) {
    return InvalidArgumentError(
        fmt::format("telemetry '{}': want FILE or HOST=FILE, with neither empty", arg));
  }
  return f;
}

Result<std::vector<telemetry::Sample>> ParseDcgmRecording(
    std::string_view text, const std::string& host, const std::string& where,
    std::vector<telemetry::Problem>* problems) {
  std::vector<telemetry::Sample> out;
  constexpr std::string_view kMark = "# evenkeel-scrape ";
  std::optional<double> time;
  size_t block = 0, block_line = 0;
  auto flush = [&](size_t end) {
    if (time && end > block) {
      auto s = telemetry::ParseDcgmExposition(text.substr(block, end - block), host, *time,
                                              fmt::format("{}:{}", where, block_line), problems);
      out.insert(out.end(), s.begin(), s.end());
    }
  };
  bool any_mark = false;
  LineSplitter lines(text);
  for (TextLine line; lines.Next(&line);) {
    if (line.text.starts_with(kMark)) {
      flush(line.offset);
      any_mark = true;
      time = telemetry::ParseTimestamp(line.text.substr(kMark.size()));
      if (!time)
        problems->push_back(
            {fmt::format("{}:{}", where, line.number), "bad scrape time (scrape skipped)"});
      block = line.offset + line.text.size() + 1;
      block_line = line.number + 1;
    }
  }
  flush(text.size());
  if (!any_mark && !text.empty()) {
    return InvalidArgumentError(
        fmt::format("{}: no '# evenkeel-scrape UNIX_TIME' line: not a recorded scrape "
                    "(docs/report.md says how to record one)",
                    where));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
  return out;
}

Result<std::unique_ptr<Recorder>> BuildRecorder(const ReportInputs& in,
                                                std::vector<std::string>* problems) {
  RunInfo run;
  std::string ckpt_dir = in.checkpoint_dir, launch_dir = in.launch_dir, metrics = in.metrics;
  // A folder the user named must be one: a file or a missing path given here is bad
  // input, not a page that quietly lacks the run's attempts or checkpoints.
  if (!in.launch_dir.empty())
    EK_RETURN_IF_ERROR(CheckDirectory(in.launch_dir).WithContext("report: --launch-dir"));
  if (!in.checkpoint_dir.empty()) {
    EK_RETURN_IF_ERROR(CheckDirectory(in.checkpoint_dir).WithContext("report: --checkpoints"));
  }
  std::optional<run::RunFile> run_file;
  if (!in.run_file.empty()) {
    EK_ASSIGN_OR_RETURN(run::RunFile r, run::ReadRunFile(in.run_file));
    run.name = r.name;
    run.run_file = r.path;
    run.xxh3 = fmt::format("{:016x}", r.xxh3);
    if (ckpt_dir.empty() && !r.checkpoint_dir.empty()) ckpt_dir = r.Resolve(r.checkpoint_dir);
    if (launch_dir.empty() && !ckpt_dir.empty()) {
      std::string root = r.launch_dir.empty() ? ckpt_dir + "/launch" : r.Resolve(r.launch_dir);
      launch_dir = NewestSession(root);
    }
    if (metrics.empty() && !ckpt_dir.empty() && FileExists(ckpt_dir + "/train-metrics.jsonl")) {
      metrics = ckpt_dir + "/train-metrics.jsonl";
    }
    run_file = std::move(r);
  }

  // Telemetry: every file parsed on its own thread, then placed on the run's ranks.
  std::vector<Input> files;
  for (const auto& f : in.telemetry) files.push_back({f, false});
  for (const auto& f : in.dcgm) files.push_back({f, true});
  std::vector<Result<HostData>> parsed(files.size(), Result<HostData>(InternalError("not parsed")));
  {
    ThreadPool pool(
        std::min<size_t>(std::max<size_t>(1, files.size()), in.threads ? in.threads : 0));
    pool.ParallelFor(files.size(), [&](size_t i, size_t) {
      parsed[i] = ParseTelemetryFile(files[i], in.interval_s);
    });
  }
  std::vector<const HostData*> data;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!parsed[i].ok()) return parsed[i].status();
    data.push_back(&*parsed[i]);
    for (const auto& p : parsed[i]->problems) problems->push_back(p.ToString());
  }
  std::vector<std::string> layout_notes;
  run::Topology topo = run_file ? run_file->topology() : run::Topology();
  if (!files.empty()) {
    EK_ASSIGN_OR_RETURN(topo, Layout(files, data, run_file ? &*run_file : nullptr, &layout_notes));
  }
  // One row per rank of the layout: never more rows than the world.
  std::vector<RankInfo> ranks;
  for (int r = 0; r < topo.world(); ++r)
    ranks.push_back({r, topo.HostOf(topo.NodeOf(r)), topo.LocalRank(r)});
  auto rec = std::make_unique<Recorder>(ranks);
  rec->run = run;
  rec->run.world = topo.world();
  rec->run.nodes = topo.nodes();
  rec->run.gpus_per_node = topo.gpus_per_node();
  for (int n = 0; n < topo.nodes(); ++n) rec->run.hosts.push_back(topo.HostOf(n));
  rec->notes = std::move(layout_notes);

  if (files.empty()) {
    rec->notes.push_back(
        "no GPU telemetry given (--telemetry nvidia-smi CSV, --dcgm recorded scrapes): "
        "the heatmaps and triage verdicts are left out");
  } else {
    // Per rank at full precision, time-sorted, for the classifier; the recorder keeps bytes.
    std::vector<std::vector<Raw>> raw(ranks.size());
    for (auto& p : parsed) {
      for (size_t h = 0; h < p->hosts.size(); ++h) {
        for (size_t g = 0; g < p->raw[h].size(); ++g) {
          const int r = topo.Rank(p->hosts[h], static_cast<int>(g));
          if (r < 0 || r >= static_cast<int>(raw.size())) continue;  // Layout has refused these
          auto& dst = raw[r];
          auto& src = p->raw[h][g];
          if (dst.empty()) {
            dst = std::move(src);
          } else {
            dst.insert(dst.end(), src.begin(), src.end());
          }
          std::vector<Raw>().swap(src);
        }
      }
    }
    double first = 1e300, last = -1e300;
    for (auto& v : raw) {
      auto earlier = [](const Raw& a, const Raw& b) { return a.t < b.t; };
      if (!std::is_sorted(v.begin(), v.end(), earlier))
        std::stable_sort(v.begin(), v.end(), earlier);
      if (!v.empty()) first = std::min(first, v.front().t), last = std::max(last, v.back().t);
    }
    triage::Profile profile;
    if (first <= last) {
      EK_ASSIGN_OR_RETURN(profile, triage::LoadProfile(in.profile));
    }
    // The page's readings (AddReading: the per-rank bytes) and the triage replay below
    // (AddAssessment: the verdict windows) read the same sorted readings and write disjoint
    // parts of the recorder: the readings go on a thread of their own, beside the replay.
    std::thread readings([&raw, &rec] {
      for (size_t r = 0; r < raw.size(); ++r) {
        for (const Raw& x : raw[r]) {
          rec->AddReading(static_cast<int>(r), x.t,
                          std::isnan(x.util) ? std::nullopt : std::optional<double>(x.util),
                          std::isnan(x.power) ? std::nullopt : std::optional<double>(x.power));
        }
      }
    });
    if (first <= last) {
      triage::ClassifierOptions co;
      co.stale_after_s = std::max(co.stale_after_s, 3 * in.interval_s);
      triage::Classifier classifier(profile, co, static_cast<int>(ranks.size()));
      // The windows of evenkeel triage's replay: one per interval, the first one
      // interval after the first sample, each fed every reading up to its tick.
      std::vector<size_t> cursor(raw.size(), 0);
      constexpr size_t kAhead = 32;
      telemetry::Sample s;
      const double slack = 1e-6;
      for (double tick = first + in.interval_s; tick <= last + in.interval_s + slack;
           tick += in.interval_s) {
        for (size_t r = 0; r < raw.size(); ++r) {
          // Each rank's readings are a stream of their own, 1,024 of them at 1,024 GPUs, and
          // a tick reads one reading of each: too many streams for the hardware prefetcher,
          // so each tick's loads missed the cache (most of this loop's time). Ask a few
          // ranks ahead.
          if (r + kAhead < raw.size() && cursor[r + kAhead] < raw[r + kAhead].size()) {
            __builtin_prefetch(raw[r + kAhead].data() + cursor[r + kAhead]);
          }
          auto& v = raw[r];
          size_t& c = cursor[r];
          if (c < v.size() && v[c].t <= tick + slack) {
            s.host = ranks[r].host;
            s.gpu = ranks[r].gpu;
          }
          while (c < v.size() && v[c].t <= tick + slack) {
            s.time = v[c].t;
            s.util_pct = std::isnan(v[c].util) ? std::nullopt : std::optional<double>(v[c].util);
            s.power_w = std::isnan(v[c].power) ? std::nullopt : std::optional<double>(v[c].power);
            classifier.Observe(static_cast<int>(r), s);
            ++c;
          }
        }
        rec->AddAssessment(classifier.Evaluate(tick));
      }
    }
    readings.join();
  }

  if (!metrics.empty()) {
    EK_RETURN_IF_ERROR(ReadMetrics(metrics, rec.get(), problems));
  } else {
    rec->notes.push_back(
        "no trainer metrics (CHECKPOINT_DIR/train-metrics.jsonl, --metrics): tokens/s, step and "
        "loss are left out");
  }
  if (!launch_dir.empty() && FileExists(launch_dir + "/summary.json")) {
    EK_RETURN_IF_ERROR(ReadLaunch(launch_dir, rec.get()));
  } else {
    rec->notes.push_back(
        launch_dir.empty() ? "no launch records (evenkeel launch, --launch-dir): attempts and the "
                             "run summary are left out"
                           : "no summary.json in " + launch_dir +
                                 ": attempts and the run summary are "
                                 "left out");
  }
  if (!ckpt_dir.empty() && IsDir(ckpt_dir)) {
    auto list = ckpt::ListCheckpoints(ckpt_dir, ckpt::VerifyLevel::kStructure);
    if (list.ok()) {
      for (const auto& c : *list) {
        if (c.temp) continue;
        rec->checkpoints.push_back({c.step, c.mtime, c.path, c.ok, c.verdict});
      }
    }
  } else {
    rec->notes.push_back(
        "no checkpoint directory (run file, --checkpoints): checkpoint markers are left out");
  }
  if (!in.watch_log.empty()) {
    EK_RETURN_IF_ERROR(ReadWatchLog(in.watch_log, rec.get(), problems));
  } else {
    rec->notes.push_back(
        "no watcher log (--watch-log): incidents come from the triage verdicts alone");
  }
  return rec;
}

}  // namespace ek::report
