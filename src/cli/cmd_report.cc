// evenkeel report [RUN.toml] [inputs...] -o report.html: a run made visible, one
// self-contained HTML file (docs/report.md).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/file.h"
#include "report/html.h"
#include "report/inputs.h"

namespace ek::cli {

int RunReport(int argc, char** argv) {
  CLI::App app{
      "Build one self-contained HTML report of a run (opens from disk, no network): per-rank\n"
      "power and utilization heatmaps with the triage verdicts, tokens/s, step and loss,\n"
      "checkpoint and attempt markers, incidents and a summary. Inputs are named, or found\n"
      "from the run file (checkpoints, launch records, trainer metrics); missing parts are\n"
      "left out with a note. Details: docs/report.md.",
      "evenkeel report"};
  report::ReportInputs in;
  std::string out = "report.html";
  bool json = false;
  report::ModelOptions mo;
  app.add_option("RUN", in.run_file, "the run file (optional)");
  std::vector<std::string> telemetry, dcgm;
  app.add_option("--telemetry", telemetry,
                 "recorded nvidia-smi CSV: FILE (with a host column, or named after its host: "
                 "n1.csv) or HOST=FILE");
  app.add_option("--dcgm", dcgm,
                 "recorded dcgm-exporter scrapes ('# evenkeel-scrape TIME' marks): FILE named "
                 "after its host, or "
                 "HOST=FILE");
  app.add_option("--watch-log", in.watch_log, "evenkeel watch's JSON-lines log (incidents)");
  app.add_option("--launch-dir", in.launch_dir, "a launch session (CHECKPOINT_DIR/launch/RUN_ID)");
  app.add_option("--checkpoints", in.checkpoint_dir, "the checkpoint directory");
  app.add_option("--metrics", in.metrics, "the trainer's train-metrics.jsonl");
  app.add_option("--profile", in.profile, "triage power profile (B300, H100, H200, A100 or a file)")
      ->capture_default_str();
  app.add_option("--interval", in.interval_s, "the telemetry's sampling interval, seconds")
      ->capture_default_str();
  app.add_option("-o,--out", out, "the HTML file to write")->capture_default_str();
  size_t budget_mb = 12;
  app.add_option("--budget-mb", budget_mb, "heatmap bytes (before base64) the file may hold, MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--json", json, "write the data model (JSON) instead of the page");
  std::string from_model;
  app.add_option(
      "--from-model", from_model,
      "assemble the page around this data model (from --json, or made by hand for tests)");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  for (auto [args, out] : {std::pair{&telemetry, &in.telemetry}, {&dcgm, &in.dcgm}}) {
    for (const auto& a : *args) {
      auto f = report::ParseTelemetryArg(a);
      if (!f.ok()) return UsageError(std::string(f.status().message()));
      out->push_back(*f);
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  if (!from_model.empty()) {
    auto model = ReadFile(from_model);
    if (!model.ok()) return ReportError(model.status().WithContext("report"));
    if (Status st = WriteFileAtomic(out, report::AssembleHtml(*model)); !st.ok())
      return ReportError(st.WithContext("report"));
    std::printf("report: %s (from %s)\n", out.c_str(), from_model.c_str());
    return kExitOk;
  }
  std::vector<std::string> problems;
  auto rec = report::BuildRecorder(in, &problems);
  if (!rec.ok()) return ReportError(rec.status().WithContext("report"));
  for (size_t i = 0; i < problems.size() && i < 10; ++i) Warn("report: " + problems[i]);
  if (problems.size() > 10)
    Warn(fmt::format("report: ... and {} more input problem(s)", problems.size() - 10));
  mo.interval_s = in.interval_s;
  mo.byte_budget = budget_mb << 20;
  std::string model = (*rec)->ToJson(mo);
  std::string body = json ? model : report::AssembleHtml(model);
  if (Status st = WriteFileAtomic(out, body); !st.ok())
    return ReportError(st.WithContext("report"));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("report: %s (%.1f MB; %d ranks, %zu readings, %zu notes) in %.2f s\n", out.c_str(),
              body.size() / 1e6, static_cast<int>((*rec)->ranks().size()), (*rec)->readings(),
              (*rec)->notes.size(), secs);
  return kExitOk;
}

}  // namespace ek::cli
