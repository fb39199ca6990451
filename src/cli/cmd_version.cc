#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "core/version.h"

namespace ek::cli {

int RunVersion(int argc, char** argv) {
  CLI::App app{"Print the evenkeel version.", "evenkeel version"};
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  std::printf("evenkeel %s\n", kVersion);
  return kExitOk;
}

}  // namespace ek::cli
