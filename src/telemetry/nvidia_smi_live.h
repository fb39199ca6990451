// Live nvidia-smi: runs `nvidia-smi --query-gpu=... --format=csv -l 1` as a
// child process and parses its lines as they come.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/process.h"
#include "telemetry/nvidia_smi_csv.h"
#include "telemetry/sample.h"

namespace ek::telemetry {

// The seam between the source and a process: lines of text until EOF.
class LineStream {
 public:
  virtual ~LineStream() = default;
  // Appends the complete lines (without newlines) that arrive before
  // `deadline` (Clock time of `clock`). Sets *eof when the stream ended.
  virtual Status ReadLines(double deadline, std::vector<std::string>* lines, bool* eof) = 0;
  // The producer's exit status once the stream has ended, if there is one.
  virtual std::optional<int> exit_status() const { return std::nullopt; }
};

// A child process's stdout as a LineStream. The child is killed (SIGTERM) and
// reaped when the stream is destroyed. Not thread-safe.
class ChildLineStream : public LineStream {
 public:
  // argv[0] is looked up on PATH. Unavailable if it cannot be started.
  static Result<std::unique_ptr<ChildLineStream>> Spawn(const std::vector<std::string>& argv,
                                                        Clock* clock);
  ~ChildLineStream() override;
  Status ReadLines(double deadline, std::vector<std::string>* lines, bool* eof) override;
  // The child's exit status after EOF.
  std::optional<int> exit_status() const override {
    return exit_status_ < 0 ? std::nullopt : std::optional<int>(exit_status_);
  }

 private:
  ChildLineStream() = default;
  Clock* clock_ = nullptr;
  Child child_;
  int fd_ = -1;  // child_'s output pipe, -1 after EOF
  std::string partial_;
  std::string name_;
  int exit_status_ = -1;
};

// The command line the field report uses (docs/triage.md), sampling every
// `interval_s` (nvidia-smi takes whole seconds; -lms for less).
std::vector<std::string> NvidiaSmiCommand(const std::string& program, double interval_s);

class NvidiaSmiSource : public Source {
 public:
  // Samples are stamped with `clock` at receipt, on host `host`. When the
  // child ends having failed (non-zero status) or without a single sample,
  // Poll returns Unavailable with its first unparsable line (nvidia-smi
  // writes its errors, "NVIDIA-SMI has failed ...", to stdout).
  NvidiaSmiSource(std::unique_ptr<LineStream> lines, Clock* clock, std::string host);
  Status Poll(double deadline, Batch* out) override;
  std::vector<std::string> hosts() const override { return {host_}; }
  bool live() const override { return true; }

 private:
  std::unique_ptr<LineStream> lines_;
  Clock* clock_;
  std::string host_;
  NvidiaSmiCsvParser parser_;
  bool ended_ = false;
  bool any_sample_ = false;
  std::string first_bad_line_;
};

// The local host name ("localhost" if the OS will not say).
std::string LocalHostName();

}  // namespace ek::telemetry
