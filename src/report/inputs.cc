#include "report/inputs.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/core.h>
#include <simdjson.h>

#include "ckpt/checkpoint.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/thread_pool.h"
#include "run/run_file.h"
#include "telemetry/nvidia_smi_csv.h"
#include "telemetry/prometheus.h"
#include "telemetry/replay.h"
#include "triage/classifier.h"
#include "triage/profile.h"

namespace ek::report {

namespace {

using simdjson::dom::element;

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

double Mtime(const std::string& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return 0;
  return st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

std::optional<double> OptNum(element e, const char* k) {
  double d;
  if (!e[k].get(d)) return d;
  int64_t i;
  if (!e[k].get(i)) return static_cast<double>(i);
  uint64_t u;
  if (!e[k].get(u)) return static_cast<double>(u);
  return std::nullopt;
}

std::string Str(element e, const char* k) {
  std::string_view s;
  return e[k].get(s) ? std::string() : std::string(s);
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
  int widest = 0;  // largest GPU index + 1
};

// The newest launch session (a directory with summary.json or attempt-*) under `root`.
std::string NewestSession(const std::string& root) {
  std::string best;
  double best_t = -1;
  DIR* d = ::opendir(root.c_str());
  if (!d) return best;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string p = root + "/" + n;
    if (!IsDir(p)) continue;
    double t = std::max(Mtime(p + "/summary.json"), Mtime(p));
    if (t > best_t) best_t = t, best = p;
  }
  ::closedir(d);
  return best;
}

Status ReadLaunch(const std::string& dir, Recorder* rec) {
  const std::string path = dir + "/summary.json";
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields s, doc.Parse(text, path));
  Summary& m = rec->summary;
  std::string outcome, final_ckpt;
  EK_RETURN_IF_ERROR(s.OptStr("outcome", &outcome));
  EK_RETURN_IF_ERROR(s.OptStr("final_checkpoint", &final_ckpt));
  if (!outcome.empty()) m.outcome = outcome;
  if (!final_ckpt.empty()) m.final_checkpoint = final_ckpt;
  // Negative counts (-1) mean "not known" in the launcher's summary.
  auto set = [&](std::optional<double>* out, const char* k) -> Status {
    double v = -1;
    EK_RETURN_IF_ERROR(s.OptNum(k, &v));
    if (v >= 0) *out = v;
    return Status::Ok();
  };
  for (auto [out, key] : {std::pair{&m.steps, "steps"}, {&m.planned_steps, "planned_steps"}, {&m.tokens, "tokens"},
                          {&m.tokens_per_s, "tokens_per_s"}, {&m.attempts, "attempts"},
                          {&m.gpu_hours_used, "gpu_hours_used"}, {&m.gpu_hours_lost, "gpu_hours_lost"},
                          {&m.evenfix_dropped_blocks, "evenfix_dropped_blocks"}}) {
    EK_RETURN_IF_ERROR(set(out, key));
  }
  if (!s.Has("attempt_records")) return Status::Ok();
  simdjson::dom::array arr;
  EK_RETURN_IF_ERROR(s.Array("attempt_records", &arr));
  size_t i = 0;
  for (element e : arr) {
    EK_ASSIGN_OR_RETURN(JsonFields a, s.Item(e, "attempt_records", i++));
    AttemptMark mark;
    EK_RETURN_IF_ERROR(a.Int("attempt", &mark.attempt));
    EK_RETURN_IF_ERROR(a.Num("start", &mark.start));
    EK_RETURN_IF_ERROR(a.Num("end", &mark.end));
    EK_RETURN_IF_ERROR(a.Str("outcome", &mark.outcome));
    JsonFields d = a, fr = a;
    EK_RETURN_IF_ERROR(a.Object("decision", &d));
    EK_RETURN_IF_ERROR(d.Str("action", &mark.decision));
    EK_RETURN_IF_ERROR(d.Str("reason", &mark.reason));
    EK_RETURN_IF_ERROR(a.Object("flight_recorder", &fr));
    EK_RETURN_IF_ERROR(fr.Str("verdict", &mark.flight_recorder));
    rec->attempts.push_back(mark);
  }
  return Status::Ok();
}

// The trainer's train-metrics.jsonl: {"time", "step", "loss", "tok_s", ...} per logged step.
Status ReadMetrics(const std::string& path, Recorder* rec, std::vector<std::string>* problems) {
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  size_t line_no = 0, start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    line_no++;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    element e;
    if (parser.parse(line.data(), line.size()).get(e)) {
      problems->push_back(fmt::format("{}:{}: not JSON (skipped)", path, line_no));
      continue;
    }
    auto t = OptNum(e, "time");
    if (!t) {
      problems->push_back(fmt::format("{}:{}: no time (skipped)", path, line_no));
      continue;
    }
    if (auto v = OptNum(e, "tok_s")) rec->AddPoint(Recorder::Series::kTokensPerS, *t, *v);
    if (auto v = OptNum(e, "step")) rec->AddPoint(Recorder::Series::kStep, *t, *v);
    if (auto v = OptNum(e, "loss")) rec->AddPoint(Recorder::Series::kLoss, *t, *v);
  }
  return Status::Ok();
}

// The watcher's JSON-lines log: incident_opened / incident_resolved.
Status ReadWatchLog(const std::string& path, Recorder* rec, std::vector<std::string>* problems) {
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  simdjson::dom::parser parser;
  std::map<std::string, size_t> open;  // kind+key -> index in rec->incidents
  size_t line_no = 0, start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    line_no++;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    element e;
    if (parser.parse(line.data(), line.size()).get(e)) {
      problems->push_back(fmt::format("{}:{}: not JSON (skipped)", path, line_no));
      continue;
    }
    std::string event = Str(e, "event");
    element inc;
    if ((event != "incident_opened" && event != "incident_resolved") || e["incident"].get(inc)) continue;
    std::string key = Str(inc, "kind") + "/" + Str(inc, "key");
    std::optional<double> at;
    if (auto t = telemetry::ParseTimestamp(Str(e, "time"))) at = *t;
    if (event == "incident_resolved") {
      if (auto it = open.find(key); it != open.end()) {
        rec->incidents[it->second].until = at;
        open.erase(it);
      }
      continue;
    }
    Incident x;
    x.source = "watcher";
    x.kind = Str(inc, "kind");
    x.summary = Str(inc, "summary");
    x.evidence = Str(inc, "evidence");
    x.since = OptNum(inc, "since").value_or(at.value_or(0));
    x.gpu_hours = OptNum(inc, "gpu_hours").value_or(0);
    simdjson::dom::array arr;
    if (!inc["ranks"].get(arr)) {
      for (element r : arr) {
        int64_t v;
        if (!r.get(v)) x.ranks.push_back(static_cast<int>(v));
      }
    }
    if (!inc["hosts"].get(arr)) {
      for (element h : arr) {
        std::string_view v;
        if (!h.get(v)) x.hosts.emplace_back(v);
      }
    }
    open[key] = rec->incidents.size();
    rec->incidents.push_back(std::move(x));
  }
  return Status::Ok();
}

// Parses one file straight into compact readings: the replay's parser and
// clock alignment, without holding a Sample per row (22 million of them would
// take gigabytes).
Result<HostData> ParseTelemetryFile(const std::string& path, bool dcgm, double interval_s) {
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
  if (dcgm) {
    std::string host = telemetry::HostFromPath(path);
    EK_ASSIGN_OR_RETURN(auto samples, ParseDcgmRecording(text, host, path, &d.problems));
    index.emplace(host, 0);
    d.hosts.push_back(host);
    d.raw.emplace_back();
    for (const auto& s : samples) add(s);
    return d;
  }
  std::string file = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  const std::string default_host = telemetry::HostFromPath(path);
  telemetry::NvidiaSmiCsvParser parser(file, default_host, interval_s);
  std::map<std::string, telemetry::HostTimeAligner> aligners;
  auto aligner_for = aligners.end();  // the previous row's host (rows come in runs per host)
  std::vector<telemetry::Sample> row, aligned;
  size_t pos = 0;
  bool any = false;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    row.clear();
    parser.ParseLine(std::string_view(text).substr(pos, nl - pos), &row, &d.problems);
    pos = nl + 1;
    if (row.empty()) continue;
    any = true;
    auto it = aligner_for != aligners.end() && aligner_for->first == row[0].host ? aligner_for
                                                                                : aligners.find(row[0].host);
    if (it == aligners.end()) {
      it = aligners.emplace(row[0].host, telemetry::HostTimeAligner(interval_s, telemetry::ReplayOptions().clock_jump_s))
               .first;
    }
    aligner_for = it;
    aligned.clear();
    it->second.Add(std::move(row[0]), telemetry::HostTimeAligner::Row{file, parser.line_number()}, &aligned,
                   &d.problems);
    for (const auto& s : aligned) add(s);
  }
  for (auto& [host, a] : aligners) a.Finish(&d.problems);
  if (!any && d.hosts.empty() && !parser.has_host_column()) {
    d.hosts.push_back(default_host);
    d.raw.emplace_back();
  }
  return d;
}

}  // namespace

Result<std::vector<telemetry::Sample>> ParseDcgmRecording(std::string_view text, const std::string& host,
                                                          const std::string& where,
                                                          std::vector<telemetry::Problem>* problems) {
  std::vector<telemetry::Sample> out;
  constexpr std::string_view kMark = "# evenkeel-scrape ";
  size_t pos = 0, line_no = 1;
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
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line.starts_with(kMark)) {
      flush(pos);
      any_mark = true;
      time = telemetry::ParseTimestamp(line.substr(kMark.size()));
      if (!time) problems->push_back({fmt::format("{}:{}", where, line_no), "bad scrape time (scrape skipped)"});
      block = end + 1;
      block_line = line_no + 1;
    }
    pos = end + 1;
    line_no++;
  }
  flush(text.size());
  if (!any_mark && !text.empty()) {
    return InvalidArgumentError(fmt::format("{}: no '# evenkeel-scrape UNIX_TIME' line: not a recorded scrape "
                                            "(docs/report.md says how to record one)", where));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
  return out;
}

Result<std::unique_ptr<Recorder>> BuildRecorder(const ReportInputs& in, std::vector<std::string>* problems) {
  RunInfo run;
  std::string ckpt_dir = in.checkpoint_dir, launch_dir = in.launch_dir, metrics = in.metrics;
  int gpus_per_node = 0;
  std::vector<std::string> run_hosts;
  if (!in.run_file.empty()) {
    EK_ASSIGN_OR_RETURN(run::RunFile r, run::ReadRunFile(in.run_file));
    run.name = r.name;
    run.run_file = r.path;
    run.xxh3 = fmt::format("{:016x}", r.xxh3);
    run.world = r.world();
    run.nodes = r.nodes;
    run.gpus_per_node = r.gpus_per_node;
    run.hosts = r.hosts;
    gpus_per_node = r.gpus_per_node;
    run_hosts = r.hosts;
    if (ckpt_dir.empty() && !r.checkpoint_dir.empty()) ckpt_dir = r.Resolve(r.checkpoint_dir);
    if (launch_dir.empty() && !ckpt_dir.empty()) {
      std::string root = r.launch_dir.empty() ? ckpt_dir + "/launch" : r.Resolve(r.launch_dir);
      launch_dir = NewestSession(root);
    }
    if (metrics.empty() && !ckpt_dir.empty() && FileExists(ckpt_dir + "/train-metrics.jsonl")) {
      metrics = ckpt_dir + "/train-metrics.jsonl";
    }
  }

  // Telemetry: every file parsed on its own thread, then ranks in host order.
  std::vector<std::pair<std::string, bool>> files;
  for (const auto& f : in.telemetry) files.emplace_back(f, false);
  for (const auto& f : in.dcgm) files.emplace_back(f, true);
  std::vector<Result<HostData>> parsed(files.size(), Result<HostData>(InternalError("not parsed")));
  {
    ThreadPool pool(std::min<size_t>(std::max<size_t>(1, files.size()), in.threads ? in.threads : 0));
    pool.ParallelFor(files.size(), [&](size_t i, size_t) {
      parsed[i] = ParseTelemetryFile(files[i].first, files[i].second, in.interval_s);
    });
  }
  std::vector<std::string> hosts;
  std::map<std::string, int> host_index;
  int widest = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!parsed[i].ok()) return parsed[i].status();
    for (const auto& h : parsed[i]->hosts) {
      if (host_index.emplace(h, static_cast<int>(hosts.size())).second) hosts.push_back(h);
    }
    widest = std::max(widest, parsed[i]->widest);
    for (const auto& p : parsed[i]->problems) problems->push_back(p.ToString());
  }
  if (!run_hosts.empty()) {
    // The run file's order is the rank order; hosts it does not name come after.
    std::vector<std::string> ordered = run_hosts;
    for (const auto& h : hosts) {
      if (std::find(ordered.begin(), ordered.end(), h) == ordered.end()) ordered.push_back(h);
    }
    hosts = ordered;
    host_index.clear();
    for (size_t i = 0; i < hosts.size(); ++i) host_index[hosts[i]] = static_cast<int>(i);
  }
  int gpn = gpus_per_node > 0 ? std::max(gpus_per_node, widest) : widest;
  std::vector<RankInfo> ranks;
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (int g = 0; g < gpn; ++g) ranks.push_back({static_cast<int>(h) * gpn + g, hosts[h], g});
  }
  auto rec = std::make_unique<Recorder>(ranks);
  rec->run = run;
  if (rec->run.world == 0) {
    rec->run.world = static_cast<int>(ranks.size());
    rec->run.nodes = static_cast<int>(hosts.size());
    rec->run.gpus_per_node = gpn;
  }
  if (rec->run.hosts.empty()) rec->run.hosts = hosts;

  if (files.empty()) {
    rec->notes.push_back("no GPU telemetry given (--telemetry nvidia-smi CSV, --dcgm recorded scrapes): "
                         "the heatmaps and triage verdicts are left out");
  } else {
    // Per rank at full precision, time-sorted, for the classifier; the recorder keeps bytes.
    std::vector<std::vector<Raw>> raw(ranks.size());
    for (auto& p : parsed) {
      for (size_t h = 0; h < p->hosts.size(); ++h) {
        int hi = host_index[p->hosts[h]];
        for (size_t g = 0; g < p->raw[h].size() && static_cast<int>(g) < gpn; ++g) {
          auto& dst = raw[static_cast<size_t>(hi) * gpn + g];
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
    for (size_t r = 0; r < raw.size(); ++r) {
      auto& v = raw[r];
      auto earlier = [](const Raw& a, const Raw& b) { return a.t < b.t; };
      if (!std::is_sorted(v.begin(), v.end(), earlier)) std::stable_sort(v.begin(), v.end(), earlier);
      for (const Raw& x : v) {
        rec->AddReading(static_cast<int>(r), x.t, std::isnan(x.util) ? std::nullopt : std::optional<double>(x.util),
                        std::isnan(x.power) ? std::nullopt : std::optional<double>(x.power));
      }
      if (!v.empty()) first = std::min(first, v.front().t), last = std::max(last, v.back().t);
    }
    if (first <= last) {
      EK_ASSIGN_OR_RETURN(triage::Profile profile, triage::LoadProfile(in.profile));
      triage::ClassifierOptions co;
      co.stale_after_s = std::max(co.stale_after_s, 3 * in.interval_s);
      triage::Classifier classifier(profile, co, static_cast<int>(ranks.size()));
      // The windows of evenkeel triage's replay: one per interval, the first one
      // interval after the first sample, each fed every reading up to its tick.
      std::vector<size_t> cursor(raw.size(), 0);
      telemetry::Sample s;
      const double slack = 1e-6;
      for (double tick = first + in.interval_s; tick <= last + in.interval_s + slack; tick += in.interval_s) {
        for (size_t r = 0; r < raw.size(); ++r) {
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
  }

  if (!metrics.empty()) {
    EK_RETURN_IF_ERROR(ReadMetrics(metrics, rec.get(), problems));
  } else {
    rec->notes.push_back("no trainer metrics (CHECKPOINT_DIR/train-metrics.jsonl, --metrics): tokens/s, step and "
                         "loss are left out");
  }
  if (!launch_dir.empty() && FileExists(launch_dir + "/summary.json")) {
    EK_RETURN_IF_ERROR(ReadLaunch(launch_dir, rec.get()));
  } else {
    rec->notes.push_back(launch_dir.empty() ? "no launch records (evenkeel launch, --launch-dir): attempts and the "
                                              "run summary are left out"
                                            : "no summary.json in " + launch_dir + ": attempts and the run summary are "
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
    rec->notes.push_back("no checkpoint directory (run file, --checkpoints): checkpoint markers are left out");
  }
  if (!in.watch_log.empty()) {
    EK_RETURN_IF_ERROR(ReadWatchLog(in.watch_log, rec.get(), problems));
  } else {
    rec->notes.push_back("no watcher log (--watch-log): incidents come from the triage verdicts alone");
  }
  return rec;
}

}  // namespace ek::report
