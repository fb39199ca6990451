// The one error path of the CLI: a Status becomes "evenkeel: error: ..." and
// an exit code here and nowhere else (HACKING.md, "Exit codes and errors").
#include <cstdio>
#include <string>

#include "cli/commands.h"

namespace ek::cli {

namespace {

void PrintLine(const char* kind, std::string_view message) {
  std::fflush(stdout);  // a report printed before the error line stays before it on a terminal
  std::fprintf(stderr, "evenkeel: %s: %.*s\n", kind, static_cast<int>(message.size()),
               message.data());
}

}  // namespace

int ExitCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorrupt:
    case StatusCode::kUnsupported:
    case StatusCode::kFailedPrecondition:
      return kExitBadInput;
    case StatusCode::kUnavailable:
      return kExitUnavailable;
    case StatusCode::kIoError:
      return kExitIoError;
    case StatusCode::kInternal:
      return kExitInternal;
  }
  return kExitInternal;
}

int ReportError(const Status& status) {
  if (status.ok()) {
    PrintLine("error", "internal: an error was reported without one");
    return kExitInternal;
  }
  PrintLine("error", status.message());
  return ExitCodeFor(status.code());
}

int UsageError(std::string_view message) {
  PrintLine("error", message);
  return kExitUsage;
}

int ReportNo(std::string_view headline) {
  PrintLine("error", headline);
  return kExitNo;
}

void Warn(std::string_view message) { PrintLine("warning", message); }

}  // namespace ek::cli
