#include "core/jsonl.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>
#include <simdjson.h>

namespace ek {

namespace {

// Well-formed UTF-8 check with the offset of the first bad byte (npos if none).
size_t FirstBadUtf8(std::string_view sv) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t n = sv.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return i;
    for (size_t k = 1; k <= need; ++k) {
      if (i + k >= n) return i;
      unsigned char b = s[i + k];
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += need + 1;
  }
  return std::string_view::npos;
}

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses "\uXXXX" at s[i] (s[i] == '\\'); returns the code unit or -1.
int EscapeUnit(std::string_view s, size_t i) {
  if (i + 6 > s.size() || s[i + 1] != 'u') return -1;
  int v = 0;
  for (size_t k = 2; k < 6; ++k) {
    int h = HexVal(s[i + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// Offset of the first lone surrogate escape, or npos. Outside strings a
// backslash is a JSON syntax error anyway, so no string tracking is needed.
size_t FindLoneSurrogate(std::string_view s, std::string* fixed, size_t* replaced) {
  size_t first = std::string_view::npos, run = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != '\\') continue;
    int u = EscapeUnit(s, i);
    if (u < 0) {
      ++i;  // skip the escaped char (also "\\\\")
      continue;
    }
    if (u >= 0xD800 && u <= 0xDBFF) {
      int lo = i + 6 < s.size() && s[i + 6] == '\\' ? EscapeUnit(s, i + 6) : -1;
      if (lo >= 0xDC00 && lo <= 0xDFFF) {
        i += 11;
        continue;
      }
    } else if (!(u >= 0xDC00 && u <= 0xDFFF)) {
      i += 5;
      continue;
    }
    if (first == std::string_view::npos) first = i;
    if (fixed) {
      fixed->append(s.data() + run, i - run);
      fixed->append("\\ufffd");
      ++*replaced;
      run = i + 6;
    }
    i += 5;
  }
  if (fixed && first != std::string_view::npos) fixed->append(s.data() + run, s.size() - run);
  return first;
}

}  // namespace

Status SanitizeJsonLine(std::string_view* line, InvalidUtf8Policy policy, std::string* storage,
                        size_t* replaced) {
  size_t bad = simdjson::validate_utf8(line->data(), line->size()) ? std::string_view::npos
                                                                     : FirstBadUtf8(*line);
  bool maybe_surrogate = line->find("\\u") != std::string_view::npos;
  if (bad == std::string_view::npos && !maybe_surrogate) return Status::Ok();
  if (policy == InvalidUtf8Policy::kError) {
    if (bad != std::string_view::npos) {
      return InvalidArgumentError(fmt::format("byte {}: invalid UTF-8 (byte 0x{:02X})", bad,
                                              static_cast<unsigned char>((*line)[bad])));
    }
    size_t at = FindLoneSurrogate(*line, nullptr, nullptr);
    if (at != std::string_view::npos) {
      return InvalidArgumentError(
          fmt::format("byte {}: lone surrogate escape {}", at, line->substr(at, 6)));
    }
    return Status::Ok();
  }
  std::string repaired;
  std::string_view cur = *line;
  if (bad != std::string_view::npos) {
    // Python-style: one U+FFFD per maximal ill-formed subsequence.
    size_t i = 0, run = 0;
    const auto* s = reinterpret_cast<const unsigned char*>(cur.data());
    while (i < cur.size()) {
      size_t rest_bad = FirstBadUtf8(cur.substr(i));
      if (rest_bad == std::string_view::npos) break;
      i += rest_bad;
      repaired.append(cur.data() + run, i - run);
      repaired.append("\xEF\xBF\xBD");
      ++*replaced;
      // Length of the maximal subpart: the lead plus valid continuations.
      unsigned char c = s[i];
      size_t need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
      size_t k = 1;
      for (; k <= need && i + k < cur.size(); ++k) {
        unsigned char b = s[i + k];
        unsigned char lo = 0x80, hi = 0xBF;
        if (k == 1) {
          if (c == 0xE0) lo = 0xA0;
          if (c == 0xED) hi = 0x9F;
          if (c == 0xF0) lo = 0x90;
          if (c == 0xF4) hi = 0x8F;
        }
        if (b < lo || b > hi) break;
      }
      i += k;
      run = i;
    }
    repaired.append(cur.data() + run, cur.size() - run);
    *storage = std::move(repaired);
    cur = *storage;
  }
  if (maybe_surrogate) {
    std::string fixed;
    if (FindLoneSurrogate(cur, &fixed, replaced) != std::string_view::npos) {
      *storage = std::move(fixed);
      cur = *storage;
    }
  }
  *line = cur;
  return Status::Ok();
}

namespace {

class MappedChunkReader final : public LineChunkReader {
 public:
  MappedChunkReader(MappedFile f, size_t chunk) : f_(std::move(f)), chunk_(chunk) { path_ = f_.path(); }
  Result<bool> Next(std::string_view* out) override {
    std::string_view d = f_.data();
    if (pos_ >= d.size()) return false;
    size_t end = std::min(d.size(), pos_ + chunk_);
    if (end < d.size()) {
      size_t nl = d.find('\n', end);
      end = nl == std::string_view::npos ? d.size() : nl + 1;
    }
    *out = d.substr(pos_, end - pos_);
    pos_ = end;
    return true;
  }
  uint64_t total_bytes() const override { return f_.size(); }
  uint64_t consumed_bytes() const override { return pos_; }

 private:
  MappedFile f_;
  size_t chunk_;
  size_t pos_ = 0;
};

class FdChunkReader final : public LineChunkReader {
 public:
  FdChunkReader(int fd, std::string name, size_t chunk) : fd_(fd), chunk_(chunk) { path_ = std::move(name); }
  Result<bool> Next(std::string_view* out) override {
    // Drop what was handed out last time.
    buf_.erase(0, handed_);
    handed_ = 0;
    while (!eof_) {
      size_t nl = buf_.rfind('\n');
      if (nl != std::string::npos && buf_.size() >= chunk_) break;
      size_t old = buf_.size();
      buf_.resize(old + (1u << 20));
      ssize_t n;
      do {
        n = ::read(fd_, buf_.data() + old, 1u << 20);
      } while (n < 0 && errno == EINTR);
      if (n < 0) return ErrnoError(path_, errno);
      buf_.resize(old + static_cast<size_t>(n));
      if (n == 0) eof_ = true;
    }
    if (buf_.empty()) return false;
    size_t nl = buf_.rfind('\n');
    handed_ = eof_ || nl == std::string::npos ? buf_.size() : nl + 1;
    *out = std::string_view(buf_.data(), handed_);
    consumed_ += handed_;
    return true;
  }
  uint64_t total_bytes() const override { return 0; }
  uint64_t consumed_bytes() const override { return consumed_; }

 private:
  int fd_;
  size_t chunk_;
  std::string buf_;
  size_t handed_ = 0;
  uint64_t consumed_ = 0;
  bool eof_ = false;
};

}  // namespace

Result<std::unique_ptr<LineChunkReader>> LineChunkReader::Open(const std::string& path, size_t chunk) {
  if (path == "-") return std::unique_ptr<LineChunkReader>(new FdChunkReader(0, "<stdin>", chunk));
  EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  return std::unique_ptr<LineChunkReader>(new MappedChunkReader(std::move(f), chunk));
}

}  // namespace ek
