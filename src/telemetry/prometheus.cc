#include "telemetry/prometheus.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "core/jsonl.h"

namespace ek::telemetry {

namespace {

enum class Field { kNone, kPower, kUtil, kMem, kSmActive, kEnergy };

Field FieldFor(std::string_view name) {
  if (name == "DCGM_FI_DEV_POWER_USAGE") return Field::kPower;
  if (name == "DCGM_FI_DEV_GPU_UTIL") return Field::kUtil;
  if (name == "DCGM_FI_DEV_FB_USED") return Field::kMem;
  if (name == "DCGM_FI_PROF_SM_ACTIVE") return Field::kSmActive;
  if (name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") return Field::kEnergy;
  return Field::kNone;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':';
}

// Parses `{k="v",...}` starting at line[*pos] == '{'; returns the gpu label
// value ("" if absent) or an error message in *error.
bool ParseLabels(std::string_view line, size_t* pos, std::string* gpu, std::string* error) {
  size_t i = *pos + 1;
  for (;;) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i < line.size() && line[i] == '}') {
      *pos = i + 1;
      return true;
    }
    size_t k = i;
    while (i < line.size() && IsNameChar(line[i])) ++i;
    std::string_view key = line.substr(k, i - k);
    if (key.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
      *error = "malformed label";
      return false;
    }
    i += 2;
    std::string value;
    for (;; ++i) {
      if (i >= line.size()) {
        *error = "unterminated label value";
        return false;
      }
      char c = line[i];
      if (c == '"') break;
      if (c == '\\' && i + 1 < line.size()) {
        char e = line[++i];
        value.push_back(e == 'n' ? '\n' : e);
      } else {
        value.push_back(c);
      }
    }
    ++i;
    if (key == "gpu") *gpu = std::move(value);
    while (i < line.size() && line[i] == ' ') ++i;
    if (i < line.size() && line[i] == ',') ++i;
  }
}

// Prometheus float: decimal, NaN, +Inf, -Inf.
bool ParseFloat(std::string_view s, double* v) {
  if (s == "NaN") {
    *v = NAN;
    return true;
  }
  if (s == "+Inf" || s == "Inf") {
    *v = INFINITY;
    return true;
  }
  if (s == "-Inf") {
    *v = -INFINITY;
    return true;
  }
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::vector<Sample> ParseDcgmExposition(std::string_view text, std::string_view host, double time,
                                        std::string_view where, std::vector<Problem>* problems) {
  std::map<int, Sample> by_gpu;
  LineSplitter lines(text);
  for (TextLine next; lines.Next(&next);) {
    std::string_view line = next.text;
    const uint64_t line_no = next.number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty() || line[0] == '#') continue;
    auto problem = [&](std::string what) {
      problems->push_back({fmt::format("{}:{}", where, line_no), std::move(what)});
    };
    size_t i = 0;
    while (i < line.size() && IsNameChar(line[i])) ++i;
    std::string_view name = line.substr(0, i);
    if (name.empty()) {
      problem("not a metric line; skipped");
      continue;
    }
    Field field = FieldFor(name);
    std::string gpu, error;
    if (i < line.size() && line[i] == '{' && !ParseLabels(line, &i, &gpu, &error)) {
      problem(error + "; line skipped");
      continue;
    }
    if (field == Field::kNone) continue;
    while (i < line.size() && line[i] == ' ') ++i;
    size_t end = line.find(' ', i);
    std::string_view value_text = line.substr(i, end == std::string_view::npos ? end : end - i);
    double v = 0;
    if (!ParseFloat(value_text, &v)) {
      problem(fmt::format("{}: bad value '{}'; treated as missing", name, value_text));
      continue;
    }
    int index = -1;
    auto [p, ec] = std::from_chars(gpu.data(), gpu.data() + gpu.size(), index);
    if (gpu.empty() || ec != std::errc() || p != gpu.data() + gpu.size() || index < 0 ||
        index >= kMaxGpusPerHost) {
      problem(fmt::format("{}: no usable gpu label ('{}'); skipped", name, gpu));
      continue;
    }
    if (std::isnan(v)) continue;  // the exporter's "no value"
    Sample& s = by_gpu[index];
    s.gpu = index;
    switch (field) {
      case Field::kPower:
        s.power_w = v;
        break;
      case Field::kUtil:
        s.util_pct = v;
        break;
      case Field::kMem:
        s.mem_used_mib = v;
        break;
      case Field::kSmActive:
        s.sm_active = v;
        break;
      case Field::kEnergy:
        s.energy_j = v / 1000.0;
        break;
      case Field::kNone:
        break;
    }
  }
  std::vector<Sample> out;
  out.reserve(by_gpu.size());
  for (auto& [index, s] : by_gpu) {
    s.time = time;
    s.host = std::string(host);
    DropAbsurdValues(&s, fmt::format("{} gpu {}", where, index), problems);
    out.push_back(std::move(s));
  }
  return out;
}

std::string NormalizeMetricsUrl(std::string_view url) {
  std::string u(url);
  if (u.find("://") == std::string::npos) u = "http://" + u;
  size_t authority = u.find("://") + 3;
  if (u.find('/', authority) == std::string::npos) u += "/metrics";
  return u;
}

namespace {

// "http://node-a:9400/metrics" -> {"node-a", "node-a:9400", "node-a:9400/metrics"}:
// names for a node from the shortest to the most specific.
std::vector<std::string> NamesOf(const std::string& url) {
  size_t a = url.find("://") + 3;
  size_t slash = url.find('/', a);
  std::string authority = url.substr(a, slash == std::string::npos ? slash : slash - a);
  size_t colon = authority.rfind(':');
  std::string name = colon == std::string::npos ? authority : authority.substr(0, colon);
  return {name, authority, url.substr(a)};
}

}  // namespace

Result<std::unique_ptr<PrometheusSource>> PrometheusSource::Create(
    const std::vector<std::string>& urls, net::HttpClient* http, Clock* clock) {
  if (urls.empty()) return InvalidArgumentError("prometheus: no URLs given");
  std::unique_ptr<PrometheusSource> source(new PrometheusSource(http, clock));
  std::vector<std::vector<std::string>> names;
  for (const auto& u : urls) {
    source->urls_.push_back(NormalizeMetricsUrl(u));
    names.push_back(NamesOf(source->urls_.back()));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    size_t level = 0;
    for (; level < 3; ++level) {
      bool shared = false;
      for (size_t j = 0; j < names.size(); ++j)
        shared |= j != i && names[j][level] == names[i][level];
      if (!shared) break;
    }
    if (level == 3) {
      return InvalidArgumentError(fmt::format("prometheus: {} is given twice", source->urls_[i]));
    }
    source->hosts_.push_back(names[i][level]);
  }
  return source;
}

Status PrometheusSource::Poll(double deadline, Batch* out) {
  double now = clock_->Now();
  double timeout = std::max(0.2, deadline - now);
  std::vector<Result<std::string>> bodies(urls_.size(), Result<std::string>(std::string()));
  // Bounded fan-out through the core pool: kScrapeThreads in flight, however many nodes.
  if (!pool_) pool_ = std::make_unique<ThreadPool>(std::min(urls_.size(), kScrapeThreads));
  pool_->ParallelFor(urls_.size(),
                     [&](size_t i, size_t) { bodies[i] = http_->Get(urls_[i], timeout); });
  double received = clock_->Now();
  for (size_t i = 0; i < urls_.size(); ++i) {
    if (!bodies[i].ok()) {
      out->problems.push_back({urls_[i], bodies[i].status().message()});
      continue;
    }
    std::vector<Sample> samples =
        ParseDcgmExposition(*bodies[i], hosts_[i], received, urls_[i], &out->problems);
    for (auto& s : samples) out->samples.push_back(std::move(s));
  }
  return Status::Ok();
}

}  // namespace ek::telemetry
