#include "telemetry/nvidia_smi_csv.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <ctime>

#include "core/parse.h"

namespace ek::telemetry {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Splits into `fields` (reused: no allocation per row once it has grown).
void SplitFields(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  for (;;) {
    const size_t comma = line.find(',');  // memchr
    fields->push_back(Trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    line.remove_prefix(comma + 1);
  }
}

// A value DropAbsurdValues would drop: only then is the row's location formatted.
bool AnyAbsurd(const Sample& s) {
  auto out = [](const std::optional<double>& v, double lo, double hi) {
    return v && !(*v >= lo && *v <= hi);
  };
  return out(s.util_pct, 0, 100) || out(s.power_w, 0, kMaxPowerW) ||
         out(s.mem_used_mib, 0, kMaxMemMiB) || out(s.energy_j, 0, 1e15) || out(s.sm_active, 0, 1) ||
         out(s.sm_clock_mhz, 0, 10000);
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
long DaysFromCivil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long>(doe) - 719468;
}

bool ReadInt(std::string_view s, size_t* pos, size_t digits, long* out) {
  if (*pos + digits > s.size()) return false;
  long v = 0;
  for (size_t i = 0; i < digits; ++i) {
    char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += digits;
  *out = v;
  return true;
}

bool Expect(std::string_view s, size_t* pos, std::string_view any_of) {
  if (*pos >= s.size() || any_of.find(s[*pos]) == std::string_view::npos) return false;
  ++*pos;
  return true;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_';
    if (!ok) return false;
  }
  return !(s[0] >= '0' && s[0] <= '9');
}

// A number with an optional unit, or missing. Returns false on garbage.
bool ParseValue(std::string_view field, std::string_view unit, std::optional<double>* out) {
  out->reset();
  if (field.empty() || field.front() == '[' || field == "N/A") return true;
  double v = 0;
  auto [p, ec] = FromCharsDouble(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || !std::isfinite(v)) return false;
  std::string_view rest = Trim(field.substr(static_cast<size_t>(p - field.data())));
  if (!rest.empty() && rest != unit) return false;
  *out = v;
  return true;
}

}  // namespace

std::optional<double> ParseTimestamp(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  size_t pos = 0;
  long y, mo, d, h, mi, sec;
  bool calendar = ReadInt(s, &pos, 4, &y) && Expect(s, &pos, "/-") && ReadInt(s, &pos, 2, &mo) &&
                  Expect(s, &pos, "/-") && ReadInt(s, &pos, 2, &d) && Expect(s, &pos, " T") &&
                  ReadInt(s, &pos, 2, &h) && Expect(s, &pos, ":") && ReadInt(s, &pos, 2, &mi) &&
                  Expect(s, &pos, ":") && ReadInt(s, &pos, 2, &sec);
  if (!calendar) {
    double v = 0;
    auto [p, ec] = FromCharsDouble(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v < 0) {
      return std::nullopt;
    }
    return v;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  double frac = 0;
  if (pos < s.size() && s[pos] == '.') {
    size_t start = pos;
    ++pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    if (pos == start + 1) return std::nullopt;
    std::from_chars(s.data() + start, s.data() + pos, frac);
  }
  if (pos < s.size() && s[pos] == 'Z') ++pos;
  if (pos != s.size()) return std::nullopt;
  double days =
      static_cast<double>(DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)));
  return days * 86400 + h * 3600 + mi * 60 + sec + frac;
}

std::string FormatTimestamp(double t) {
  double whole = std::floor(t);
  int ms = static_cast<int>(std::lround((t - whole) * 1000));
  if (ms == 1000) {
    whole += 1;
    ms = 0;
  }
  std::time_t tt = static_cast<std::time_t>(whole);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

NvidiaSmiCsvParser::NvidiaSmiCsvParser(std::string where, std::string default_host,
                                       double interval_s)
    : where_(std::move(where)), default_host_(std::move(default_host)), interval_s_(interval_s) {}

std::string NvidiaSmiCsvParser::Where() const { return fmt::format("{}:{}", where_, line_); }

bool NvidiaSmiCsvParser::TryHeader(const std::vector<std::string_view>& fields) {
  // A data row (its timestamp or index leads with a digit) is no header: said before the
  // loop below looks for units in every field of 22 million rows.
  if (!fields.empty() && !fields[0].empty() && fields[0][0] >= '0' && fields[0][0] <= '9') {
    return false;
  }
  std::vector<Col> cols;
  bool has_index = false;
  for (std::string_view f : fields) {
    size_t bracket = f.find(" [");
    if (bracket != std::string_view::npos && f.back() == ']') f = Trim(f.substr(0, bracket));
    if (!IsIdentifier(f)) return false;
    Col c = Col::kIgnore;
    if (f == "timestamp")
      c = Col::kTime;
    else if (f == "host" || f == "hostname" || f == "node")
      c = Col::kHost;
    else if (f == "index")
      c = Col::kIndex;
    else if (f == "utilization.gpu")
      c = Col::kUtil;
    else if (f == "power.draw" || f == "power.draw.average" || f == "power.draw.instant")
      c = Col::kPower;
    else if (f == "memory.used")
      c = Col::kMem;
    has_index |= c == Col::kIndex;
    cols.push_back(c);
  }
  if (!has_index) return false;
  has_host_column_ = false;
  for (Col c : cols) has_host_column_ |= c == Col::kHost;
  cols_ = std::move(cols);
  from_header_ = true;
  return true;
}

double NvidiaSmiCsvParser::TickTime(const std::string& host, int gpu) {
  Ticks& t = ticks_[host];
  if (static_cast<size_t>(gpu) >= t.seen.size()) t.seen.resize(static_cast<size_t>(gpu) + 1);
  if (t.seen[static_cast<size_t>(gpu)]) {
    ++t.tick;
    std::fill(t.seen.begin(), t.seen.end(), false);
  }
  t.seen[static_cast<size_t>(gpu)] = true;
  return static_cast<double>(t.tick) * interval_s_;
}

void NvidiaSmiCsvParser::ParseLine(std::string_view line, std::vector<Sample>* out,
                                   std::vector<Problem>* problems) {
  ++line_;
  if (Trim(line).empty()) return;
  SplitFields(line, &fields_);
  const std::vector<std::string_view>& fields = fields_;
  if (TryHeader(fields)) return;
  if (cols_.empty() || !from_header_) {
    if (fields.size() == 5) {
      cols_ = {Col::kTime, Col::kIndex, Col::kUtil, Col::kPower, Col::kMem};
    } else if (fields.size() == 4) {
      cols_ = {Col::kIndex, Col::kUtil, Col::kPower, Col::kMem};
    } else {
      problems->push_back({Where(), fmt::format("{} fields and no header; expected 5 "
                                                "(timestamp,index,utilization.gpu,power.draw,"
                                                "memory.used) or 4; row dropped",
                                                fields.size())});
      return;
    }
  }
  if (fields.size() != cols_.size()) {
    problems->push_back(
        {Where(), fmt::format("{} fields, expected {}; row dropped", fields.size(), cols_.size())});
    return;
  }
  // Built in place in *out (no move per row); a row dropped below takes it back out.
  Sample& s = out->emplace_back();
  s.host = default_host_;
  bool has_time = false;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string_view f = fields[i];
    bool ok = true;
    switch (cols_[i]) {
      case Col::kIgnore:
        break;
      case Col::kTime: {
        // nvidia-smi prints one timestamp for all GPUs of a round: parse it once.
        std::optional<double> t;
        if (f == last_time_text_) {
          t = last_time_;
        } else {
          t = ParseTimestamp(f);
          if (t) last_time_text_.assign(f), last_time_ = *t;
        }
        if (!t) {
          problems->push_back({Where(), fmt::format("bad timestamp '{}'; row dropped", f)});
          out->pop_back();
          return;
        }
        s.time = *t;
        has_time = true;
        break;
      }
      case Col::kHost:
        if (f.empty()) {
          problems->push_back({Where(), "empty host; row dropped"});
          out->pop_back();
          return;
        }
        s.host.assign(f);
        break;
      case Col::kIndex: {
        int v = -1;
        auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
        if (ec != std::errc() || p != f.data() + f.size() || v < 0 || v >= kMaxGpusPerHost) {
          problems->push_back({Where(), fmt::format("bad GPU index '{}'; row dropped", f)});
          out->pop_back();
          return;
        }
        s.gpu = v;
        break;
      }
      case Col::kUtil:
        ok = ParseValue(f, "%", &s.util_pct);
        break;
      case Col::kPower:
        ok = ParseValue(f, "W", &s.power_w);
        break;
      case Col::kMem:
        ok = ParseValue(f, "MiB", &s.mem_used_mib);
        break;
    }
    if (!ok) {
      problems->push_back(
          {Where(), fmt::format("bad value '{}' in column {}; treated as missing", f, i + 1)});
    }
  }
  if (s.gpu < 0) {
    problems->push_back({Where(), "no GPU index column; row dropped"});
    out->pop_back();
    return;
  }
  if (!has_time) s.time = TickTime(s.host, s.gpu);
  if (AnyAbsurd(s)) DropAbsurdValues(&s, Where(), problems);
}

}  // namespace ek::telemetry
