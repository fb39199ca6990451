#include "core/json_out.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>

namespace ek {

namespace {

// True when one of the 8 bytes in `v` is below 0x20, '"' or '\\': the bytes a JSON
// string escapes. The has-less and has-zero word tricks, exact as "any" tests (a byte
// >= 0x80 never matches), so a clean word of text is skipped in one step.
inline bool AnyToEscape(uint64_t v) {
  constexpr uint64_t k01 = 0x0101010101010101ULL, k80 = 0x8080808080808080ULL;
  const uint64_t quote = v ^ (k01 * '"'), backslash = v ^ (k01 * '\\');
  const uint64_t below_space = (v - k01 * 0x20) & ~v;
  const uint64_t is_quote = (quote - k01) & ~quote;
  const uint64_t is_backslash = (backslash - k01) & ~backslash;
  return ((below_space | is_quote | is_backslash) & k80) != 0;
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;
  for (size_t i = 0; i < s.size();) {
    // Eight bytes at a time while they need no escape: byte by byte, this loop was a
    // tenth of packing from Parquet (every row's strings pass through it).
    if (i + 8 <= s.size()) {
      uint64_t v;
      std::memcpy(&v, s.data() + i, 8);
      if (!AnyToEscape(v)) {
        i += 8;
        continue;
      }
    }
    unsigned char c = static_cast<unsigned char>(s[i++]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - 1 - run);
    run = i;
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

void JsonWriter::NewLine(size_t depth) {
  out_.push_back('\n');
  out_.append(2 * depth, ' ');
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (levels_.empty()) return;
  Level& level = levels_.back();
  if (level.has_items) out_.append(level.lines ? "," : spaced_ ? ", " : ",");
  if (level.lines) NewLine(levels_.size());
  level.has_items = true;
}

JsonWriter& JsonWriter::Open(char c, Layout layout) {
  Separate();
  out_.push_back(c);
  levels_.push_back({false, layout == kLines});
  return *this;
}

JsonWriter& JsonWriter::Close(char c) {
  if (!levels_.empty()) {
    if (levels_.back().lines && levels_.back().has_items) NewLine(levels_.size() - 1);
    levels_.pop_back();
  }
  after_key_ = false;
  out_.push_back(c);
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  Separate();
  AppendJsonString(&out_, key);
  out_.append(spaced_ ? ": " : ":");
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
  out_ += fmt::format("{}", v);  // fmt::format, not format_to: see Fixed
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
