// A one-line progress display on stderr, shown only when stderr is a TTY and
// redrawn at most a few times a second. Not thread-safe: one reporter thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ek {

class Progress {
 public:
  explicit Progress(std::string label, bool enabled = true);
  ~Progress();
  // Redraws if enough time has passed. `done`/`total` in `unit`s; total 0 = unknown.
  void Update(uint64_t done, uint64_t total, const std::string& extra = "");
  void Finish();
  bool active() const { return active_; }

 private:
  std::string label_;
  bool active_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  size_t last_len_ = 0;
};

}  // namespace ek
