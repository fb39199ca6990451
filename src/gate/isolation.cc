#include "gate/isolation.h"

#include <errno.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "core/json_fields.h"
#include "core/jsonl.h"
#include "core/process.h"

namespace ek::gate {

std::vector<std::string> IsolationProbeArgv(const std::string& python, const run::RunFile& run) {
  return {python,           "-m",        "evenkeel.isolation",        "--config",
          run.ConfigPath(), "--seq-len", std::to_string(run.seq_len), "--attention",
          run.attention,    "--json"};
}

namespace {

std::string_view LastLineStartingWith(std::string_view text, char c) {
  std::string_view found;
  LineSplitter lines(text);
  for (TextLine line; lines.Next(&line);) {
    if (!line.text.empty() && line.text.front() == c) found = line.text;
  }
  return found;
}

std::string LastLine(std::string_view text) {
  size_t end = text.find_last_not_of(" \n\r\t");
  if (end == std::string_view::npos) return "";
  size_t start = text.find_last_of('\n', end);
  start = start == std::string_view::npos ? 0 : start + 1;
  return std::string(text.substr(start, end + 1 - start));
}

}  // namespace

Result<IsolationVerdict> ParseIsolationVerdict(std::string_view output, const std::string& what) {
  std::string_view line = LastLineStartingWith(output, '{');
  if (line.empty()) {
    std::string last = LastLine(output);
    return CorruptError(fmt::format("{}: printed no JSON verdict{}", what,
                                    last.empty() ? "" : " (last line: " + last + ")"));
  }
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(line, what));
  IsolationVerdict v;
  EK_RETURN_IF_ERROR(f.Str("verdict", &v.verdict));
  if (v.verdict != "pass" && v.verdict != "leak" && v.verdict != "refused" &&
      v.verdict != "error") {
    return CorruptError(
        fmt::format("{}: verdict: '{}' is not pass, leak, refused or error", what, v.verdict));
  }
  EK_RETURN_IF_ERROR(f.Str("message", &v.message));
  EK_RETURN_IF_ERROR(f.Bool("cached", &v.cached));
  EK_RETURN_IF_ERROR(f.Num("seconds", &v.seconds));
  if (v.verdict == "error") return v;  // the probe could not build the model: no more is known
  EK_RETURN_IF_ERROR(f.Str("model_type", &v.model_type));
  EK_RETURN_IF_ERROR(f.Str("layer", &v.layer));
  EK_RETURN_IF_ERROR(f.Int("layer_index", &v.layer_index));
  EK_RETURN_IF_ERROR(f.Num("tolerance", &v.tolerance));
  if (v.verdict == "refused") return v;
  EK_RETURN_IF_ERROR(f.Str("implementation", &v.implementation));
  EK_RETURN_IF_ERROR(f.Num("max_loss_diff", &v.max_loss_diff));
  EK_RETURN_IF_ERROR(f.Num("max_layer_diff", &v.max_layer_diff));
  return v;
}

Result<std::string> SpawnIsolationProbe(const std::vector<std::string>& argv, double timeout_s,
                                        Clock* clock) {
  SpawnOptions so;
  so.argv = argv;
  so.output_pipe = true;
  so.parent_death_signal = SIGKILL;
  auto child = Child::Spawn(so);
  if (!child.ok()) return child.status().WithContext("isolation probe");
  std::string out;
  char buf[4096];
  const double deadline = clock->Monotonic() + timeout_s;
  while (true) {
    struct pollfd p = {child->output_fd(), POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
      if (got > 0) {
        // Bounded: the verdict is one line; the rest (warnings) is kept only at the end.
        out.append(buf, static_cast<size_t>(got));
        if (out.size() > (1u << 20)) out.erase(0, out.size() - (1u << 19));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        break;
      }
    }
    if (clock->Monotonic() > deadline) {
      child->Stop(1, clock);
      return UnavailableError(fmt::format("{} -m evenkeel.isolation did not answer within {:g} s",
                                          argv.empty() ? "" : argv[0], timeout_s));
    }
  }
  ExitStatus st = child->Wait();
  if (st.ok()) return out;
  std::string last = LastLine(out);
  return UnavailableError(fmt::format("{} -m evenkeel.isolation: {}{}", argv.empty() ? "" : argv[0],
                                      st.ToString(), last.empty() ? "" : ": " + last));
}

}  // namespace ek::gate
