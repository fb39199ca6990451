// What evenkeel report reads: recorded GPU telemetry (nvidia-smi CSV, recorded
// dcgm-exporter scrapes), the triage verdicts computed from it, the trainer's
// metrics, the launcher's records, the checkpoints and the watcher's log.
// Inputs are named, or found from a run file; what is missing is left out
// with a note (Recorder::notes), never invented.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "report/recorder.h"

namespace ek::report {

// One recorded telemetry file and the host it belongs to. A file's readings are
// assigned to hosts by its host column (`host`, `hostname` or `node`), else by
// `host` (--telemetry HOST=FILE), else by its name (node-a.csv is node-a's).
// With a run file every host must be one of the run's and every GPU index below
// its gpus_per_node; the layout (which rank is GPU i of host h) is the run's
// run::Topology. Without one, the hosts come from the files, in order.
struct TelemetryFile {
  std::string path;
  std::string host;  // from HOST=FILE; empty: the host column or the file's name
};

// "FILE" or "HOST=FILE" (an '=' before any '/'; write ./a=b.csv for a file whose
// name holds one). An empty host or file is an error naming the argument.
Result<TelemetryFile> ParseTelemetryArg(const std::string& arg);

struct ReportInputs {
  std::string run_file;  // the rank layout; finds checkpoints, launch records, metrics
  std::vector<TelemetryFile> telemetry;  // nvidia-smi CSV (see TelemetryFile)
  std::vector<TelemetryFile>
      dcgm;                // recorded scrapes: "# evenkeel-scrape UNIX_TIME" before each scrape
  std::string watch_log;   // evenkeel watch --log (JSON lines)
  std::string launch_dir;  // a launch session (CHECKPOINT_DIR/launch/RUN_ID)
  std::string checkpoint_dir;
  std::string metrics;           // the trainer's train-metrics.jsonl
  std::string profile = "B300";  // triage power profile
  double interval_s = 1;         // the telemetry's sampling interval
  size_t threads = 0;            // parsing threads; 0: all cores
};

// Reads everything; errors only for inputs that were named and cannot be read
// or parsed (naming the file and line); parts not given are notes.
Result<std::unique_ptr<Recorder>> BuildRecorder(const ReportInputs& inputs,
                                                std::vector<std::string>* problems);

// Parses recorded dcgm-exporter scrapes of one host (see ReportInputs::dcgm).
Result<std::vector<telemetry::Sample>> ParseDcgmRecording(
    std::string_view text, const std::string& host, const std::string& where,
    std::vector<telemetry::Problem>* problems);

}  // namespace ek::report
