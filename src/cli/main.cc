// evenkeel: one binary, a table of subcommands (see commands.cc).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

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
  std::fprintf(out,
               "\nexit status: 0 ok, 1 a check said no, 2 usage, 65 bad input, 69 unavailable,\n"
               "70 internal error, 74 I/O error (launch and triage add their own: see --help)\n");
}

int Dispatch(int argc, char** argv) {
  using namespace ek::cli;
  if (argc < 2) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    PrintUsage(stdout);
    return kExitOk;
  }
  if (cmd == "--version") return RunVersion(argc - 1, argv + 1);
  std::vector<std::string> names;
  for (const auto& c : Commands()) {
    if (c.name == cmd) return c.run(argc - 1, argv + 1);
    names.emplace_back(c.name);
  }
  std::string near = NearestName(cmd, names);
  std::string what = cmd.starts_with("-") ? "unknown flag " : "unknown command ";
  std::string hint = near.empty() ? "" : " (did you mean " + near + "?)";
  return UsageError(what + std::string(cmd) + hint + " (see evenkeel --help)");
}

}  // namespace

int main(int argc, char** argv) {
  // Libraries never throw; an exception here is a bug (or memory exhausted),
  // and it gets the same one-line treatment as any other error.
  try {
    return Dispatch(argc, argv);
  } catch (const std::exception& e) {
    return ek::cli::ReportError(ek::InternalError(std::string("internal: ") + e.what()));
  } catch (...) {
    return ek::cli::ReportError(ek::InternalError("internal: an unknown exception"));
  }
}
