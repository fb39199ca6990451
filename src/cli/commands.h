// The command table: one row per subcommand, one cmd_<name>.cc per row; and
// the one error path every command goes through (HACKING.md, "Exit codes and
// errors").
#pragma once

#include <atomic>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace CLI {
class App;
}

namespace ek::cli {

// Exit codes of every command. The 6x/7x codes are BSD sysexits.h's, so a
// scheduler or script can tell bad input from a broken disk from a bug.
// `launch` adds its own on top (src/launch/launcher.h) and `triage` exits with
// its verdict (src/triage/report.h); both stay clear of these.
inline constexpr int kExitOk = 0;
// A check or verdict said no: gate FAIL, ckpt verify failed, inspect mismatch.
inline constexpr int kExitNo = 1;
// Bad flags or arguments.
inline constexpr int kExitUsage = 2;
// EX_DATAERR: a file missing, unreadable, malformed, foreign or inconsistent;
// a record that cannot be used.
inline constexpr int kExitBadInput = 65;
// EX_UNAVAILABLE: an optional component (NVML) or a peer is not there.
inline constexpr int kExitUnavailable = 69;
// EX_SOFTWARE: a bug, including any exception that reaches main.
inline constexpr int kExitInternal = 70;
// EX_IOERR: the output cannot be written, the disk is full.
inline constexpr int kExitIoError = 74;

struct Command {
  std::string_view name;
  std::string_view summary;
  // argv[0] is the subcommand's name ("tokenize"); returns the exit code.
  int (*run)(int argc, char** argv);
};

std::span<const Command> Commands();

// The exit code of a failed Status: invalid argument, not found, corrupt,
// unsupported and failed precondition are bad input (65); unavailable 69;
// I/O 74; internal 70.
int ExitCodeFor(StatusCode code);
// Prints "evenkeel: error: <message>" to stderr and returns ExitCodeFor(code).
int ReportError(const Status& status);
// Prints "evenkeel: error: <message>" and returns kExitUsage.
int UsageError(std::string_view message);
// A check that ran and said no: prints "evenkeel: error: <headline>" and
// returns kExitNo.
int ReportNo(std::string_view headline);
// Prints "evenkeel: warning: <message>".
void Warn(std::string_view message);

// The one place a command sets signal dispositions (libraries never do): SIGINT and
// SIGTERM set StopRequested() and then call on_stop, which must be async-signal-safe,
// so a long-running command (triage --follow, watch, agent) ends cleanly; with
// ignore_sigpipe, a write to a closed socket is an error the writer sees, not a death.
std::atomic<bool>& StopRequested();
void CatchStopSignals(void (*on_stop)() = nullptr, bool ignore_sigpipe = false);

// Parses argv into `app`. Returns nullopt when the command should go on;
// otherwise its exit code: 0 after printing --help, kExitUsage after printing
// "evenkeel: error: ..." (a mistyped flag gets "(did you mean --x?)").
std::optional<int> ParseArgs(CLI::App& app, int argc, char** argv);

// The usage error for a failed parse, without printing: what ParseArgs says.
// `argv` is what was parsed (without the command name).
std::string DescribeParseError(const CLI::App& app, const std::vector<std::string>& argv,
                               const std::string& cli11_message, bool extras_error);

// The candidate nearest to `typed` by edit distance (a transposition counts
// one), when close enough to be a likely typo; empty otherwise.
std::string NearestName(std::string_view typed, const std::vector<std::string>& candidates);

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
