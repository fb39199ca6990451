#include "telemetry/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/file.h"
#include "core/jsonl.h"
#include "telemetry/nvidia_smi_csv.h"

namespace ek::telemetry {

std::string HostTimeAligner::Row::ToString() const {
  return line > 0 ? fmt::format("{}:{}", file, line) : std::string(file);
}

void HostTimeAligner::Accept(Sample&& s, const Row& where, std::vector<Sample>* out,
                             std::vector<Problem>* problems) {
  size_t g = static_cast<size_t>(s.gpu);
  if (g >= gpu_last_.size()) gpu_last_.resize(g + 1, -INFINITY);
  if (s.time < gpu_last_[g]) {
    problems->push_back(
        {where.ToString(),
         fmt::format("time goes backwards for GPU {} ({} after {}); row dropped", s.gpu,
                     FormatTimestamp(s.time), FormatTimestamp(gpu_last_[g]))});
    return;
  }
  gpu_last_[g] = s.time;
  last_ = last_ ? std::max(*last_, s.time) : s.time;
  out->push_back(std::move(s));
}

void HostTimeAligner::Add(Sample&& s, Row where, std::vector<Sample>* out,
                          std::vector<Problem>* problems) {
  double raw = s.time;
  s.time = raw + offset_;
  if (!last_ || std::fabs(s.time - *last_) <= clock_jump_s_) {
    if (held_) {
      problems->push_back({held_->where, fmt::format("time jumps by {:+.1f} s for one row only; "
                                                     "row dropped",
                                                     held_->jump)});
      held_.reset();
    }
    Accept(std::move(s), where, out, problems);
    return;
  }
  double jump = s.time - *last_;
  if (held_ && std::fabs(jump - held_->jump) <= clock_jump_s_) {
    // The host's clock stepped: continue one interval after the last good time.
    double shift = *last_ + interval_s_ - held_->sample.time;
    // The step is the gap beyond the one sampling interval that was due.
    problems->push_back({held_->where, fmt::format("clock jump of {:+.1f} s on host {}; "
                                                   "re-anchored to the previous time line",
                                                   held_->jump - interval_s_, s.host)});
    offset_ += shift;
    Sample first = std::move(held_->sample);
    std::string first_where = std::move(held_->where);
    held_.reset();
    first.time += shift;
    s.time += shift;
    Accept(std::move(first), Row{first_where, 0}, out, problems);
    Accept(std::move(s), where, out, problems);
    return;
  }
  if (held_) {
    problems->push_back({held_->where, fmt::format("time jumps by {:+.1f} s for one row only; "
                                                   "row dropped",
                                                   held_->jump)});
  }
  held_ = Held{std::move(s), where.ToString(), jump};
}

void HostTimeAligner::Finish(std::vector<Problem>* problems) {
  if (!held_) return;
  problems->push_back({held_->where, fmt::format("time jumps by {:+.1f} s at the end of the "
                                                 "trace; row dropped",
                                                 held_->jump)});
  held_.reset();
}

std::string HostFromPath(std::string_view path) {
  return std::filesystem::path(path).stem().string();  // "dir/node-a.csv" -> "node-a"
}

void ReplaySource::AddFile(const std::string& name, std::string_view text,
                           const ReplayOptions& options) {
  std::string where = std::filesystem::path(name).filename().string();
  NvidiaSmiCsvParser parser(where, HostFromPath(name), options.interval_s);
  std::vector<Sample> rows;
  std::vector<int> row_line;
  LineSplitter lines(text);
  for (TextLine line; lines.Next(&line);) {
    size_t before = rows.size();
    parser.ParseLine(line.text, &rows, &batch_.problems);
    if (rows.size() != before) row_line.push_back(parser.line_number());
  }
  if (!parser.has_host_column() && options.hosts.empty() &&
      std::find(hosts_.begin(), hosts_.end(), HostFromPath(name)) == hosts_.end()) {
    hosts_.push_back(HostFromPath(name));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    Sample& s = rows[i];
    if (options.hosts.empty() && std::find(hosts_.begin(), hosts_.end(), s.host) == hosts_.end()) {
      hosts_.push_back(s.host);
    }
    auto it = std::find_if(aligners_.begin(), aligners_.end(),
                           [&](const auto& a) { return a.first == s.host; });
    if (it == aligners_.end()) {
      aligners_.emplace_back(s.host, HostTimeAligner(options.interval_s, options.clock_jump_s));
      it = aligners_.end() - 1;
    }
    it->second.Add(std::move(s), HostTimeAligner::Row{where, row_line[i]}, &batch_.samples,
                   &batch_.problems);
  }
}

void ReplaySource::Finish(const ReplayOptions& options) {
  for (auto& [host, aligner] : aligners_) aligner.Finish(&batch_.problems);
  if (!options.hosts.empty()) hosts_ = options.hosts;
  std::stable_sort(batch_.samples.begin(), batch_.samples.end(),
                   [](const Sample& a, const Sample& b) { return a.time < b.time; });
  batch_.end = true;
}

Result<std::unique_ptr<ReplaySource>> ReplaySource::Open(const std::vector<std::string>& paths,
                                                         ReplayOptions options) {
  if (paths.empty()) return InvalidArgumentError("replay: no files given");
  std::unique_ptr<ReplaySource> source(new ReplaySource());
  for (const std::string& path : paths) {
    Result<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status().WithContext("replay");
    source->AddFile(path, *text, options);
  }
  source->Finish(options);
  return source;
}

std::unique_ptr<ReplaySource> ReplaySource::FromTexts(
    const std::vector<std::pair<std::string, std::string>>& files, ReplayOptions options) {
  std::unique_ptr<ReplaySource> source(new ReplaySource());
  for (const auto& [name, text] : files) source->AddFile(name, text, options);
  source->Finish(options);
  return source;
}

Status ReplaySource::Poll(double, Batch* out) {
  if (delivered_) {
    out->end = true;
    return Status::Ok();
  }
  delivered_ = true;
  for (auto& s : batch_.samples) out->samples.push_back(std::move(s));
  for (auto& p : batch_.problems) out->problems.push_back(std::move(p));
  out->end = true;
  batch_ = Batch();
  return Status::Ok();
}

}  // namespace ek::telemetry
