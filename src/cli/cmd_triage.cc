// evenkeel triage: name the state of a training run from GPU power and
// per-rank utilization (docs/triage.md), one line or JSON object per window.
// evenkeel triage calibrate: learn a profile from a healthy window.
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/file.h"
#include "run/plan.h"
#include "run/run_file.h"
#include "telemetry/nvidia_smi_live.h"
#include "telemetry/nvml.h"
#include "telemetry/prometheus.h"
#include "telemetry/replay.h"
#include "triage/calibrate.h"
#include "triage/profile.h"
#include "triage/report.h"
#include "triage/session.h"

namespace ek::cli {

namespace {

constexpr size_t kMaxWarnings = 50;

struct SourceFlags {
  std::string run_file;             // run.toml: hosts, GPUs per node, profile, checkpoint plan
  std::vector<std::string> source;  // KIND [ARG...]
  std::vector<std::string> files;   // positional: replay files
  double interval_s = 1;
  std::string hosts;  // comma-separated rank order for replay
  std::string nvidia_smi = "nvidia-smi";
  std::string nvml_library;
};

void AddSourceFlags(CLI::App* app, SourceFlags* f) {
  app->add_option("--source", f->source,
                  "nvidia-smi | nvml | prometheus URL... | replay FILE... (default: nvidia-smi, "
                  "or replay when FILEs are given)")
      ->expected(1, -1);
  app->add_option("FILE", f->files,
                  "recorded nvidia-smi CSVs to replay (one per host, or with a "
                  "host column)");
  app->add_option("--interval", f->interval_s, "seconds between samples and windows")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app->add_option("--run", f->run_file,
                  "run.toml: host order, GPUs per node, profile and planned checkpoint time; "
                  "prometheus without URLs scrapes HOST:9400 of each host");
  app->add_option("--hosts", f->hosts,
                  "replay: host order for global ranks, comma-separated "
                  "(default: files' order)");
  app->add_option("--nvidia-smi", f->nvidia_smi, "nvidia-smi program to run")
      ->capture_default_str();
  app->add_option("--nvml-library", f->nvml_library,
                  "NVML library to dlopen (default "
                  "libnvidia-ml.so.1)");
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

struct OpenSource {
  std::unique_ptr<net::HttpClient> http;
  std::unique_ptr<telemetry::Source> source;
};

Result<OpenSource> MakeSource(const SourceFlags& f) {
  std::vector<std::string> spec = f.source;
  if (spec.empty()) spec = {f.files.empty() ? "nvidia-smi" : "replay"};
  const std::string& kind = spec[0];
  std::vector<std::string> args(spec.begin() + 1, spec.end());
  args.insert(args.end(), f.files.begin(), f.files.end());
  Clock* clock = Clock::Default();
  OpenSource out;
  if (kind == "replay") {
    telemetry::ReplayOptions options;
    options.interval_s = f.interval_s;
    options.hosts = SplitComma(f.hosts);
    EK_ASSIGN_OR_RETURN(auto replay, telemetry::ReplaySource::Open(args, options));
    out.source = std::move(replay);
    return out;
  }
  if (!args.empty() && kind != "prometheus") {
    return InvalidArgumentError(
        fmt::format("--source {} takes no arguments (got {})", kind, args[0]));
  }
  if (kind == "nvidia-smi") {
    EK_ASSIGN_OR_RETURN(auto child,
                        telemetry::ChildLineStream::Spawn(
                            telemetry::NvidiaSmiCommand(f.nvidia_smi, f.interval_s), clock));
    out.source = std::make_unique<telemetry::NvidiaSmiSource>(std::move(child), clock,
                                                              telemetry::LocalHostName());
  } else if (kind == "nvml") {
    EK_ASSIGN_OR_RETURN(auto nvml, telemetry::LoadNvml(f.nvml_library));
    out.source =
        std::make_unique<telemetry::NvmlSource>(std::move(nvml), clock, telemetry::LocalHostName());
  } else if (kind == "prometheus") {
    if (args.empty()) {
      // dcgm-exporter's default port on every host of the run file.
      for (const auto& h : SplitComma(f.hosts)) args.push_back(h + ":9400");
    }
    if (args.empty()) {
      return InvalidArgumentError("--source prometheus needs URLs, or --run with cluster.hosts");
    }
    out.http = net::MakeHttpClient();
    EK_ASSIGN_OR_RETURN(out.source,
                        telemetry::PrometheusSource::Create(args, out.http.get(), clock));
  } else {
    return InvalidArgumentError(fmt::format(
        "unknown source '{}' (nvidia-smi, nvml, prometheus URL..., replay FILE...)", kind));
  }
  return out;
}

// Bad-input reports go to stderr, capped so a garbage file cannot flood it.
class Warnings {
 public:
  void Add(const std::vector<telemetry::Problem>& problems) {
    for (const auto& p : problems) {
      if (++count_ <= kMaxWarnings) Warn(p.ToString());
    }
  }
  ~Warnings() {
    if (count_ > kMaxWarnings) {
      Warn(fmt::format("{} more bad-input reports not shown", count_ - kMaxWarnings));
    }
  }

 private:
  size_t count_ = 0;
};

// Fills what the flags left open from the run file (docs/run_format.md):
// host order, GPUs per node, [watch] profile, and the planned checkpoint write
// time from the run plan (the checkpoint as written at checkpoint.write_gbps).
Status ApplyRunFile(bool profile_given, bool checkpoint_given, SourceFlags* f,
                    std::string* profile_name, triage::SessionOptions* options) {
  EK_ASSIGN_OR_RETURN(run::RunFile run, run::ReadRunFile(f->run_file));
  if (f->hosts.empty()) {
    for (const auto& h : run.hosts) f->hosts += (f->hosts.empty() ? "" : ",") + h;
  }
  if (options->gpus_per_host <= 0) options->gpus_per_host = run.gpus_per_node;
  if (!profile_given) *profile_name = run.Resolve(run.watch_profile);
  if (!profile_given && !FileExists(*profile_name)) *profile_name = run.watch_profile;
  if (!checkpoint_given) {
    auto model = run::ModelForRun(run);
    auto plan =
        model.ok() ? run::MakePlan(run, *model, nullptr) : Result<run::Plan>(model.status());
    if (plan.ok() && plan->checkpoint_write_s > 0) {
      options->classifier.checkpoint_planned_s = plan->checkpoint_write_s;
    }
  }
  return Status::Ok();
}

int RunCalibrate(int argc, char** argv) {
  CLI::App app{
      "Learn a triage profile (power bands) from a window of your own healthy run, and "
      "an idle window when given. Writes a profile file for --profile FILE. "
      "Details: docs/triage.md.",
      "evenkeel triage calibrate"};
  SourceFlags f;
  AddSourceFlags(&app, &f);
  std::vector<std::string> idle_files;
  std::string output;
  triage::CalibrationOptions options;
  double duration_s = 60;
  app.add_option("--idle", idle_files, "recorded CSVs of the same GPUs idle (sets the floor)");
  app.add_option("--name", options.name, "profile name")->capture_default_str();
  app.add_option("--duration", duration_s, "live sources: seconds to sample")
      ->capture_default_str();
  app.add_option("-o,--output", output, "profile file to write")->required();
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if (!f.run_file.empty()) {
    std::string unused_profile;
    triage::SessionOptions unused_options;
    Status applied = ApplyRunFile(true, true, &f, &unused_profile, &unused_options);
    if (!applied.ok()) return ReportError(applied.WithContext("triage calibrate"));
  }
  auto opened = MakeSource(f);
  if (!opened.ok()) return ReportError(opened.status().WithContext("triage calibrate"));
  telemetry::Source* source = opened->source.get();
  Warnings warnings;
  telemetry::Batch healthy;
  if (source->live()) {
    CatchStopSignals();  // --follow ends cleanly: the last window's verdict is the exit status
    Clock* clock = Clock::Default();
    double end = clock->Now() + duration_s;
    while (!StopRequested() && !healthy.end && clock->Now() < end) {
      telemetry::Batch b;
      Status s = source->Poll(std::min(end, clock->Now() + f.interval_s), &b);
      if (!s.ok()) return ReportError(s.WithContext("triage calibrate"));
      clock->SleepUntil(std::min(end, clock->Now() + f.interval_s));
      warnings.Add(b.problems);
      for (auto& x : b.samples) healthy.samples.push_back(std::move(x));
      healthy.end = b.end;
    }
  } else {
    Status s = source->Poll(0, &healthy);
    if (!s.ok()) return ReportError(s.WithContext("triage calibrate"));
    warnings.Add(healthy.problems);
  }
  telemetry::Batch idle;
  if (!idle_files.empty()) {
    auto replay = telemetry::ReplaySource::Open(idle_files, {});
    if (!replay.ok()) return ReportError(replay.status().WithContext("triage calibrate: --idle"));
    Status s = (*replay)->Poll(0, &idle);
    if (!s.ok()) return ReportError(s.WithContext("triage calibrate: --idle"));
    warnings.Add(idle.problems);
  }
  auto profile = triage::Calibrate(healthy.samples, idle.samples, options);
  if (!profile.ok()) return ReportError(profile.status());
  Status written = WriteFileAtomic(output, triage::ProfileToJson(*profile));
  if (!written.ok()) return ReportError(written.WithContext("triage calibrate"));
  std::printf(
      "%s: healthy %.0f-%.0f W, communication ~%.0f W, starvation ~%.0f W, floor ~%.0f W "
      "(%s)\n",
      output.c_str(), profile->healthy_lo_w, profile->healthy_hi_w, profile->communication_w,
      profile->starvation_w, profile->floor_w, profile->origin.c_str());
  return kExitOk;
}

}  // namespace

int RunTriage(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "calibrate") return RunCalibrate(argc - 1, argv + 1);
  CLI::App app{
      "Name the state of a training run from GPU board power and per-rank utilization, one line\n"
      "(or --json object) per sample window: HEALTHY, CHECKPOINT, DEADLOCK_SUSPECT, STARVATION,\n"
      "COMMUNICATION, IDLE or UNKNOWN, each with its reason. Exit status: the last window's\n"
      "verdict: 0 HEALTHY, 10 CHECKPOINT, 11 CHECKPOINT past its plan, 12 IDLE, 13 COMMUNICATION,\n"
      "14 STARVATION, 15 DEADLOCK_SUSPECT, 16 UNKNOWN; or 2 usage, 65 bad input (a recording\n"
      "with no usable sample), 69 source unavailable, 74 I/O error.\n"
      "`evenkeel triage calibrate --help` learns a profile. Details: docs/triage.md.",
      "evenkeel triage"};
  SourceFlags f;
  AddSourceFlags(&app, &f);
  std::string profile_name = "B300";
  bool follow = false, json = false, list_profiles = false;
  int windows = 3;
  triage::SessionOptions options;
  app.add_option("--profile", profile_name,
                 "B300, H100, H200, A100, limit:WATTS, or a file from `triage calibrate`")
      ->capture_default_str();
  app.add_flag("--follow", follow, "live sources: keep classifying until interrupted");
  app.add_flag("--json", json, "one JSON object per window instead of a line");
  app.add_option("--windows", windows, "live sources without --follow: windows to classify")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--gpus-per-host", options.gpus_per_host,
                 "GPUs per host (default: from the data)");
  app.add_option("--stale-after", options.classifier.stale_after_s,
                 "seconds after which a rank's data counts as missing")
      ->capture_default_str();
  app.add_option("--checkpoint-s", options.classifier.checkpoint_planned_s,
                 "planned checkpoint write time; 3x longer is flagged")
      ->capture_default_str();
  app.add_flag("--list-profiles", list_profiles, "print the built-in profiles and exit");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if (list_profiles) {
    for (const auto& name : triage::BuiltinProfileNames()) {
      triage::Profile p = *triage::BuiltinProfile(name);
      std::printf(
          "%-6s healthy %4.0f-%4.0f W  communication ~%3.0f W  starvation ~%3.0f W  "
          "floor ~%3.0f W  (%s)\n",
          p.name.c_str(), p.healthy_lo_w, p.healthy_hi_w, p.communication_w, p.starvation_w,
          p.floor_w, p.origin.c_str());
    }
    return kExitOk;
  }
  if (!f.run_file.empty()) {
    Status applied = ApplyRunFile(app.count("--profile") > 0, app.count("--checkpoint-s") > 0, &f,
                                  &profile_name, &options);
    if (!applied.ok()) return ReportError(applied.WithContext("triage"));
  }
  options.interval_s = f.interval_s;
  auto profile = triage::LoadProfile(profile_name);
  if (!profile.ok()) return ReportError(profile.status().WithContext("triage"));
  auto opened = MakeSource(f);
  if (!opened.ok()) return ReportError(opened.status().WithContext("triage"));
  telemetry::Source* source = opened->source.get();
  if (follow && !source->live()) {
    Warn("triage: --follow has no effect on a replay; classifying the whole recording");
  }
  if (source->live()) CatchStopSignals();
  triage::Session session(source, Clock::Default(), *profile, options);
  Warnings warnings;
  std::optional<triage::Assessment> last;
  int n = 0;
  while (!StopRequested()) {
    auto window = session.Next();
    if (!window.ok()) return ReportError(window.status().WithContext("triage"));
    if (!window->has_value()) break;
    warnings.Add((*window)->problems);
    const triage::Assessment& a = (*window)->assessment;
    std::string out = json ? triage::FormatJson(a, session.topology())
                           : triage::FormatLine(a, session.topology());
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    last = a;
    if (source->live() && !follow && ++n >= windows) break;
  }
  if (!last)
    return ReportError(FailedPreconditionError("triage: the source ended before the first window"));
  return triage::ExitCode(*last);
}

}  // namespace ek::cli
