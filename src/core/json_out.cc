#include "core/json_out.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>

namespace ek {

void AppendJsonString(std::string* out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default: {
        char buf[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(buf, 6);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, static_cast<size_t>(r.ptr - buf));
}

void AppendIntArray(std::string* out, const int32_t* v, size_t n) {
  // Worst case 11 chars + ',' per value: format straight into the string.
  size_t start = out->size();
  out->resize(start + 2 + n * 12);
  char* p = out->data() + start;
  char* end = out->data() + out->size();
  *p++ = '[';
  for (size_t i = 0; i < n; ++i) {
    if (i) *p++ = ',';
    p = std::to_chars(p, end, v[i]).ptr;
  }
  *p++ = ']';
  out->resize(static_cast<size_t>(p - out->data()));
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (has_items_.empty()) return;
  if (has_items_.back()) out_.append(style_ == kSpaced ? ", " : ",");
  has_items_.back() = true;
  NewLine();
}

void JsonWriter::NewLine() {
  if (style_ != kIndented) return;
  out_.push_back('\n');
  out_.append(2 * has_items_.size(), ' ');
}

JsonWriter& JsonWriter::Open(char c) {
  Separate();
  out_.push_back(c);
  has_items_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::Close(char c) {
  if (!has_items_.empty()) {
    bool had_items = has_items_.back();
    has_items_.pop_back();
    if (had_items) NewLine();
  }
  after_key_ = false;
  out_.push_back(c);
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  Separate();
  AppendJsonString(&out_, key);
  out_.append(style_ == kCompact ? ":" : ": ");
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::Str(std::string_view v) {
  Separate();
  AppendJsonString(&out_, v);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  Separate();
  AppendInt(&out_, v);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t v) {
  Separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.append(buf, static_cast<size_t>(r.ptr - buf));
  return *this;
}

JsonWriter& JsonWriter::Bool(bool v) {
  Separate();
  out_.append(v ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::Null() {
  Separate();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::Fixed(double v, int decimals) {
  Separate();
  // fmt::format, not format_to: clang-14's mangling of format_to's buffer context is not the
  // one Debian's libfmt.so.9 (built by gcc) exports, so build-san would not link.
  out_ += fmt::format("{:.{}f}", v, decimals);
  return *this;
}

JsonWriter& JsonWriter::Double(double v) {
  Separate();
  out_ += fmt::format("{}", v);  // fmt::format, not format_to: as Fixed
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view json) {
  Separate();
  while (!json.empty() && json.back() == '\n') json.remove_suffix(1);
  out_.append(json);
  return *this;
}

std::string CompactRanges(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out.push_back(',');
    AppendInt(&out, values[i]);
    if (j > i) {
      out.push_back('-');
      AppendInt(&out, values[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace ek
