// nvidia-smi --query-gpu CSV: recorded files and the live child's output.
//
// Accepts what nvidia-smi writes with --format=csv, csv,noheader and
// csv,nounits (any mix), plus an optional `host` column for one file that
// holds many hosts. Without a header the columns are taken to be the live
// query's (timestamp,index,utilization.gpu,power.draw,memory.used) when a row
// has five fields, or the field report's (index,utilization.gpu,power.draw,
// memory.used) when it has four; rows of the latter have no time, so each new
// round of GPU indices is one sample interval later.
//
// "[N/A]", "[Not Supported]", any other "[...]" and blank fields are missing
// values, never zeros. A row that cannot be placed (garbage, missing columns,
// bad index or time) is dropped and reported with its line number; a bad
// value is dropped alone.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "telemetry/sample.h"

namespace ek::telemetry {

// Parses "2026/11/29 14:03:01.123" (nvidia-smi), "2026-11-29T14:03:01Z"
// (ISO 8601, optional fraction and Z) or a plain number of seconds since the
// epoch. Calendar times are read as UTC: only differences matter here.
std::optional<double> ParseTimestamp(std::string_view s);

// "2026-11-29T14:03:01.123Z" (milliseconds, UTC).
std::string FormatTimestamp(double t);

class NvidiaSmiCsvParser {
 public:
  // `where` names the input in problems ("node-a.csv"); `default_host` is the
  // host of rows when there is no host column; `interval_s` times rows that
  // have no timestamp column.
  NvidiaSmiCsvParser(std::string where, std::string default_host, double interval_s = 1.0);

  // Parses one line (without its newline); appends at most one sample.
  void ParseLine(std::string_view line, std::vector<Sample>* out, std::vector<Problem>* problems);
  int line_number() const { return line_; }
  // True once a header with a host column has been read.
  bool has_host_column() const { return has_host_column_; }

 private:
  enum class Col { kIgnore, kTime, kHost, kIndex, kUtil, kPower, kMem };
  bool TryHeader(const std::vector<std::string_view>& fields);
  std::string Where() const;
  double TickTime(const std::string& host, int gpu);

  std::string where_;
  std::string default_host_;
  double interval_s_;
  int line_ = 0;
  std::vector<Col> cols_;  // empty until a header or the first row decides
  bool from_header_ = false;
  bool has_host_column_ = false;
  struct Ticks {
    long tick = 0;
    std::vector<bool> seen;
  };
  std::unordered_map<std::string, Ticks> ticks_;
  std::vector<std::string_view> fields_;  // the current row's fields (reused)
  std::string last_time_text_;            // the previous row's timestamp field, and its value
  double last_time_ = 0;
};

}  // namespace ek::telemetry
