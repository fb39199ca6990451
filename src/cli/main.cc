// evenkeel: one binary, a table of subcommands (see commands.cc).
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/commands.h"
#include "core/version.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "evenkeel %s: safe, fast, observable multi-node full fine-tuning\n\n"
               "usage: evenkeel COMMAND [options]   (evenkeel COMMAND --help for each)\n\n"
               "commands:\n",
               ek::kVersion);
  for (const auto& c : ek::cli::Commands()) {
    std::fprintf(out, "  %-12.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (cmd == "--version") return ek::cli::RunVersion(argc - 1, argv + 1);
  for (const auto& c : ek::cli::Commands()) {
    if (c.name == cmd) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "evenkeel: error: unknown command '%s' (see evenkeel --help)\n", argv[1]);
  return 2;
}
