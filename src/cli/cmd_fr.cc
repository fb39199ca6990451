// evenkeel fr DIR: read every rank's flight-recorder dump, match collectives
// across ranks and print the verdict (text, or --json for scripts).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "flightrec/analyzer.h"
#include "flightrec/loader.h"
#include "flightrec/report.h"

namespace ek::cli {

int RunFr(int argc, char** argv) {
  CLI::App app{
      "Read the flight-recorder dump of every rank (files <prefix><rank>, pickle or JSON) in DIR, "
      "match\n"
      "collectives across ranks per process group and sequence id as PyTorch's fr_trace does, and "
      "say\n"
      "which ranks sit in which collective. Exit status 0 when the analysis ran (whatever it "
      "found),\n"
      "2 usage, 65 no readable dump. Details: docs/fr.md.",
      "evenkeel fr"};
  std::string dir;
  flightrec::LoadOptions load_options;
  flightrec::AnalyzeOptions analyze_options;
  bool json = false;
  app.add_option("DIR", dir, "folder holding the per-rank dumps")->required();
  app.add_option("-p,--prefix", load_options.prefix,
                 "file-name prefix before the rank (default: inferred, e.g. nccl_trace_rank_)");
  app.add_flag("--json", json, "print one JSON object for scripts instead of text");
  app.add_option("-j,--threads", load_options.threads,
                 "threads that read dumps (default: all cores)");
  app.add_option("--mismatch-cap", analyze_options.mismatch_cap,
                 "stop after this many mismatches in one process group (fr_trace's default)")
      ->capture_default_str();
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  auto load = flightrec::LoadDumps(dir, load_options);
  if (!load.ok()) return ReportError(load.status().WithContext("fr"));
  for (const auto& bad : load->bad)
    Warn("fr: " + bad.status.message() + " (rank reported missing)");
  if (load->dumps.empty()) {
    return ReportError(InvalidArgumentError("fr: " + dir + ": no readable dump among " +
                                            std::to_string(load->bad.size()) + " files"));
  }
  flightrec::Analysis analysis = flightrec::Analyze(load->dumps, analyze_options);
  std::string out = json ? flightrec::RenderJson(dir, *load, analysis)
                         : flightrec::RenderText(dir, *load, analysis);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace ek::cli
