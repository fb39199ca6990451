// The command table: one row per subcommand, one cmd_<name>.cc per row.
#pragma once

#include <span>
#include <string_view>

#include "core/status.h"

namespace ek::cli {

struct Command {
  std::string_view name;
  std::string_view summary;
  // argv[0] is the subcommand's name ("tokenize"); returns the exit code.
  int (*run)(int argc, char** argv);
};

std::span<const Command> Commands();

// Prints "evenkeel: error: <message>" to stderr and returns exit code 1.
int ReportError(const Status& status);
void Warn(std::string_view message);

int RunVersion(int argc, char** argv);
int RunFr(int argc, char** argv);
int RunTriage(int argc, char** argv);
int RunTokenize(int argc, char** argv);
int RunDetokenize(int argc, char** argv);
int RunPack(int argc, char** argv);
int RunInspect(int argc, char** argv);
int RunCkpt(int argc, char** argv);
int RunPlan(int argc, char** argv);
int RunGate(int argc, char** argv);
int RunAgent(int argc, char** argv);
int RunWatch(int argc, char** argv);
int RunLaunch(int argc, char** argv);
int RunReport(int argc, char** argv);
int RunLaunchRank(int argc, char** argv);
int RunTemplate(int argc, char** argv);

}  // namespace ek::cli
