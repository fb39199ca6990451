#include "launch/cause.h"

#include <fmt/core.h>

#include <vector>

#include "core/jsonl.h"

namespace ek::launch {

namespace {

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e + 1 - b);
}

std::string Bounded(std::string s) {
  if (s.size() <= kMaxCauseBytes) return s;
  size_t cut = kMaxCauseBytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;  // not inside a UTF-8 sequence
  return s.substr(0, cut) + "...";
}

// "[rank R] error in PHASE after Xs at step S: REST" -> "REST (in PHASE)".
std::string FromErrorIn(std::string_view rest) {
  size_t after = rest.find(" after ");
  size_t colon = rest.find(": ", after == std::string_view::npos ? 0 : after);
  if (after == std::string_view::npos || colon == std::string_view::npos)
    return std::string(Trim(rest));
  std::string_view phase = rest.substr(0, after);
  return fmt::format("{} (in {})", Trim(rest.substr(colon + 2)), phase);
}

// A traceback's last line: the first line after "Traceback (most recent call last):"
// that is not indented (the frames and source lines are), nor only Python 3.11's
// position markers (^ and ~): those lose their indent when the source file changed
// on disk after the process read it (Python prints the file's line of today under
// the columns of the code that ran).
std::string_view TracebackEnd(const std::vector<std::string_view>& lines, size_t start) {
  for (size_t i = start + 1; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (l.empty() || l[0] == ' ' || l[0] == '\t') continue;
    if (l.starts_with("[rank ")) continue;  // another rank's or this one's own line, interleaved
    if (Trim(l).find_first_not_of("^~") == std::string_view::npos) continue;
    return Trim(l);
  }
  return {};
}

}  // namespace

std::string FirstError(std::string_view log, int rank) {
  // torch.distributed's excepthook prefixes each line of an uncaught exception's
  // traceback with "[rankR]: " once a process group exists (a KeyboardInterrupt, any
  // trainer that does not catch its errors): the traceback is read without it.
  const std::string torch_tag = fmt::format("[rank{}]: ", rank);
  std::vector<std::string_view> lines;
  LineSplitter split(log);
  for (TextLine next; split.Next(&next);) {
    std::string_view line = next.text;
    if (line.starts_with(torch_tag)) line.remove_prefix(torch_tag.size());
    lines.push_back(line);
  }
  const std::string tag = fmt::format("[rank {}] ", rank);
  std::string_view traceback_end;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (l.starts_with(tag)) {
      std::string_view rest = l.substr(tag.size());
      if (rest.starts_with("error in ")) return Bounded(FromErrorIn(rest.substr(9)));
      if (rest.starts_with("error: ")) return Bounded(std::string(Trim(rest.substr(7))));
      if (rest.starts_with("train: error: ")) return Bounded(std::string(Trim(rest.substr(14))));
    }
    if (traceback_end.empty() && Trim(l) == "Traceback (most recent call last):")
      traceback_end = TracebackEnd(lines, i);
  }
  return Bounded(std::string(traceback_end));
}

}  // namespace ek::launch
