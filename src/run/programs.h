// The programs a run names ([launch] torchrun and python) and the rule that finds
// the trainer's interpreter: one home, read by the launcher (which runs the trainer
// with it) and the gate (whose isolation check runs its probe with the same python).
#pragma once

#include <string>

#include "core/status.h"
#include "run/run_file.h"

namespace ek::run {

// A launch key naming a program (launch.torchrun, launch.python): a value with a
// '/' is a path, relative to the run file; a bare name is looked up on PATH, as a
// shell would. "" when that finds no executable.
std::string FindRunProgram(const RunFile& run, const std::string& value);
// Where FindRunProgram looked, for the error: "is not on PATH", or the path.
std::string WhereLooked(const RunFile& run, const std::string& value);

struct TrainerPython {
  std::string path;
  std::string from;  // how it was chosen, for messages: "launch.python", "the python beside ..."
};

// The trainer's interpreter: launch.python when set (NotFound naming it when it is
// not an executable); else the python beside `torchrun` (the path FindRunProgram
// found for launch.torchrun; a virtual environment's bin/ holds both); else python3
// on PATH; else NotFound saying to set launch.python.
Result<TrainerPython> FindTrainerPython(const RunFile& run, const std::string& torchrun);

}  // namespace ek::run
