// Replay of recorded nvidia-smi CSV traces: one file per host (the file name
// without its extension is the host: node-a.csv -> node-a), or files with a
// `host` column. Hosts are ordered as the files are given, then by first
// appearance inside a file, unless ReplayOptions::hosts says otherwise.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/sample.h"

namespace ek::telemetry {

struct ReplayOptions {
  double interval_s = 1.0;  // the recording's sampling period (nvidia-smi -l 1)
  // A step in one host's timestamps larger than this (either way) is a clock
  // jump (an NTP step, a VM resume), not a gap in the data. Five minutes: far
  // above any sampler hiccup, far below the hour-sized steps seen in practice.
  double clock_jump_s = 300;
  std::vector<std::string> hosts;  // explicit rank order; empty = as found
};

// Puts one host's recorded timestamps on a common time line. Rows whose time
// goes backwards for their GPU are dropped and reported. A jump larger than
// clock_jump_s is held for one row: if the next row continues from the new
// time, the host's clock stepped, and its samples are re-anchored to continue
// one interval after the last good one (reported); if not, the odd row is
// dropped (reported). Not thread-safe.
class HostTimeAligner {
 public:
  // Where a row came from, formatted ("node-a.csv:17") only when a problem
  // names it: 22 million rows must not cost 22 million strings.
  struct Row {
    std::string_view file;
    int line = 0;
    std::string ToString() const;
  };
  HostTimeAligner(double interval_s, double clock_jump_s)
      : interval_s_(interval_s), clock_jump_s_(clock_jump_s) {}
  // Takes the sample's contents (no copy: 22 million rows each moved once fewer).
  void Add(Sample&& s, Row where, std::vector<Sample>* out, std::vector<Problem>* problems);
  // Reports a held row that nothing confirmed.
  void Finish(std::vector<Problem>* problems);

 private:
  void Accept(Sample&& s, const Row& where, std::vector<Sample>* out,
              std::vector<Problem>* problems);
  struct Held {
    Sample sample;
    std::string where;
    double jump;
  };
  double interval_s_;
  double clock_jump_s_;
  double offset_ = 0;
  std::optional<double> last_;
  std::vector<double> gpu_last_;
  std::optional<Held> held_;
};

class ReplaySource : public Source {
 public:
  // Reads and parses every file now; a file that cannot be read is an error,
  // bad rows inside it are problems returned by the first Poll.
  static Result<std::unique_ptr<ReplaySource>> Open(const std::vector<std::string>& paths,
                                                    ReplayOptions options);
  // The same from memory: (name, content) pairs, name as a path would be.
  static std::unique_ptr<ReplaySource> FromTexts(
      const std::vector<std::pair<std::string, std::string>>& files, ReplayOptions options);

  // Returns every sample, sorted by aligned time, and every problem, with end set.
  Status Poll(double deadline, Batch* out) override;
  std::vector<std::string> hosts() const override { return hosts_; }
  bool live() const override { return false; }

 private:
  ReplaySource() = default;
  void AddFile(const std::string& name, std::string_view text, const ReplayOptions& options);
  void Finish(const ReplayOptions& options);

  std::vector<std::string> hosts_;
  std::vector<std::pair<std::string, HostTimeAligner>> aligners_;
  Batch batch_;
  bool delivered_ = false;
};

// "dir/node-a.csv" -> "node-a".
std::string HostFromPath(std::string_view path);

}  // namespace ek::telemetry
