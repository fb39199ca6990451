#include "run/programs.h"

#include <fmt/core.h>

#include <filesystem>

#include "core/process.h"

namespace ek::run {

std::string FindRunProgram(const RunFile& run, const std::string& value) {
  return FindExecutable(value.find('/') != std::string::npos ? run.Resolve(value) : value);
}

std::string WhereLooked(const RunFile& run, const std::string& value) {
  if (value.find('/') == std::string::npos) return "is not on PATH";
  return fmt::format("({}, relative to the run file) is not an executable file",
                     run.Resolve(value));
}

Result<TrainerPython> FindTrainerPython(const RunFile& run, const std::string& torchrun) {
  if (!run.launch_python.empty()) {
    std::string python = FindRunProgram(run, run.launch_python);
    if (python.empty()) {
      return NotFoundError(fmt::format("{}: launch.python '{}' {}", run.path, run.launch_python,
                                       WhereLooked(run, run.launch_python)));
    }
    return TrainerPython{python, "launch.python"};
  }
  if (!torchrun.empty()) {
    std::string beside =
        FindExecutable(std::filesystem::path(torchrun).replace_filename("python").string());
    if (!beside.empty()) return TrainerPython{beside, "the python beside " + torchrun};
  }
  std::string python3 = FindExecutable("python3");
  if (python3.empty()) {
    return NotFoundError(torchrun.empty()
                             ? fmt::format("{}: no python3 on PATH (set launch.python)", run.path)
                             : fmt::format("{}: no python beside launch.torchrun {} and no python3 "
                                           "on PATH (set launch.python)",
                                           run.path, torchrun));
  }
  return TrainerPython{
      python3, torchrun.empty() ? "python3 on PATH" : "python3 on PATH, none beside " + torchrun};
}

}  // namespace ek::run
