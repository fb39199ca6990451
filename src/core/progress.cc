#include "core/progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

namespace ek {

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)),
      active_(enabled && ::isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { Finish(); }

void Progress::Update(uint64_t done, uint64_t total, const std::string& extra) {
  if (!active_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  double secs = std::chrono::duration<double>(now - start_).count();
  std::string line = fmt::format("{}: {}", label_, done);
  if (total > 0) {
    double frac = static_cast<double>(done) / static_cast<double>(total);
    line += fmt::format("/{} ({:.1f}%)", total, 100.0 * frac);
    if (frac > 0.001 && frac < 1.0) line += fmt::format(" ETA {:.0f}s", secs * (1 - frac) / frac);
  }
  if (!extra.empty()) line += "  " + extra;
  size_t len = line.size();
  if (len < last_len_) line.append(last_len_ - len, ' ');
  last_len_ = len;
  std::fprintf(stderr, "\r%s", line.c_str());
  std::fflush(stderr);
}

void Progress::Finish() {
  if (!active_) return;
  if (last_len_ > 0) std::fprintf(stderr, "\r%*s\r", static_cast<int>(last_len_), "");
  std::fflush(stderr);
  active_ = false;
}

}  // namespace ek
