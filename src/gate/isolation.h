// The isolation check's probe: python -m evenkeel.isolation, run once per gate (a
// property of the model and data.attention, not of a node) with the trainer's
// python (run/programs.h), its one-line JSON verdict read strictly
// (docs/gate_format.md, "The isolation check").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "run/run_file.h"

namespace ek::gate {

// How long the probe may take: a cold one is seconds (torch's import and a tiny
// model); a machine loaded by other work can be many times slower.
inline constexpr double kIsolationProbeTimeoutS = 300;

struct IsolationVerdict {
  std::string verdict;  // pass | leak | refused | error
  std::string model_type;
  std::string implementation;  // the attention implementation it ran ("" when refused)
  std::string layer;           // leak: the first leaking layer's type; refused: the refused one
  int64_t layer_index = -1;
  double max_loss_diff = 0;
  double max_layer_diff = 0;
  double tolerance = 0;
  std::string message;
  bool cached = false;
  double seconds = 0;
};

// The probe's command line for `run`: PYTHON -m evenkeel.isolation --config CONFIG
// --seq-len N --attention A --json.
std::vector<std::string> IsolationProbeArgv(const std::string& python, const run::RunFile& run);

// Parses the probe's output: the last line that starts with '{' is the verdict;
// every field is required and typed (Corrupt naming `what` and the field).
Result<IsolationVerdict> ParseIsolationVerdict(std::string_view output, const std::string& what);

// Runs `argv` through core/process.h with stdout and stderr to a pipe, waiting up
// to `timeout_s` on `clock`: what it printed when it exited 0; an Unavailable
// error naming the program, the exit and the output's last line otherwise.
Result<std::string> SpawnIsolationProbe(const std::vector<std::string>& argv, double timeout_s,
                                        Clock* clock);

}  // namespace ek::gate
