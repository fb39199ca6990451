#include "core/jsonl.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cerrno>
#include <cstring>

#include "core/file.h"
#include "core/utf8.h"

namespace ek {

namespace {

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

bool HasUnicodeEscape(std::string_view line) {
  const char* p = line.data();
  const size_t n = line.size();
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i backslash = _mm_set1_epi8('\\'), u = _mm_set1_epi8('u');
  for (; i + 17 <= n; i += 16) {  // a backslash at i + k and a 'u' at i + k + 1
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 1));
    if (_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, backslash), _mm_cmpeq_epi8(b, u))))
      return true;
  }
#endif
  for (; i + 1 < n; ++i) {
    if (p[i] == '\\' && p[i + 1] == 'u') return true;
  }
  return false;
}

Status SanitizeJsonLine(std::string_view* line, InvalidUtf8Policy policy, std::string* storage,
                        size_t* replaced) {
  size_t bad = simdjson::validate_utf8(line->data(), line->size()) ? std::string_view::npos
                                                                   : FirstInvalidUtf8(*line);
  bool maybe_surrogate = HasUnicodeEscape(*line);
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
  std::string_view cur = *line;
  if (bad != std::string_view::npos) {
    std::string repaired;
    *replaced += ReplaceInvalidUtf8(cur, &repaired);
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

class FdChunkReader final : public LineChunkReader {
 public:
  FdChunkReader(int fd, std::string name, size_t chunk, bool own, bool hash = false)
      : fd_(fd), chunk_(chunk), own_(own), hash_(hash ? XXH3_createState() : nullptr) {
    path_ = std::move(name);
    if (hash_) XXH3_64bits_reset(hash_);
  }
  ~FdChunkReader() override {
    if (own_) ::close(fd_);
    if (hash_) XXH3_freeState(hash_);
  }
  bool Digest(uint64_t* size, uint64_t* xxh3) const override {
    if (!hash_ || !eof_) return false;
    *size = consumed_;  // at the end every byte read has been handed out
    *xxh3 = XXH3_64bits_digest(hash_);
    return true;
  }
  Result<bool> Next(std::string_view* out) override {
    // Drop what was handed out last time.
    if (handed_ > 0) {
      std::memmove(buf_.get(), buf_.get() + handed_, size_ - handed_);
      size_ -= handed_;
      handed_ = 0;
    }
    while (!eof_) {
      const std::string_view have(buf_.get(), size_);
      if (size_ >= chunk_ && have.rfind('\n') != std::string_view::npos) break;
      Reserve(size_ + kRead);  // read(2) fills it: no zeros written first
      ssize_t n;
      do {
        n = ::read(fd_, buf_.get() + size_, kRead);
      } while (n < 0 && errno == EINTR);
      if (n < 0) return ErrnoError(path_, errno);
      if (hash_) XXH3_64bits_update(hash_, buf_.get() + size_, static_cast<size_t>(n));
      size_ += static_cast<size_t>(n);
      if (n == 0) eof_ = true;
    }
    if (size_ == 0) return false;
    const size_t nl = std::string_view(buf_.get(), size_).rfind('\n');
    handed_ = eof_ || nl == std::string_view::npos ? size_ : nl + 1;
    *out = std::string_view(buf_.get(), handed_);
    consumed_ += handed_;
    return true;
  }
  uint64_t total_bytes() const override { return total_; }
  uint64_t consumed_bytes() const override { return consumed_; }
  void set_total(uint64_t t) { total_ = t; }

 private:
  static constexpr size_t kRead = 1u << 20;
  void Reserve(size_t want) {
    if (want <= cap_) return;
    // A chunk and one read's room at once: growing by doubling up to it touched
    // (and copied) each smaller buffer on the way.
    const size_t cap = std::max({want, cap_ * 2, chunk_ + kRead});
    std::unique_ptr<char[]> bigger(new char[cap]);
    if (size_) std::memcpy(bigger.get(), buf_.get(), size_);
    buf_ = std::move(bigger);
    cap_ = cap;
  }
  int fd_;
  size_t chunk_;
  bool own_;
  XXH3_state_t* hash_;  // of every byte read, when asked
  uint64_t total_ = 0;
  std::unique_ptr<char[]> buf_;  // [0, size_) read; of cap_
  size_t size_ = 0, cap_ = 0;
  size_t handed_ = 0;
  uint64_t consumed_ = 0;
  bool eof_ = false;
};

// Streams a .zst file through ZSTD_decompressStream, reading 1 MiB at a time.
class ZstdChunkReader final : public LineChunkReader {
 public:
  ZstdChunkReader(int fd, std::string name, size_t chunk)
      : fd_(fd), chunk_(chunk), ds_(ZSTD_createDStream()) {
    path_ = std::move(name);
    ZSTD_initDStream(ds_);
  }
  ~ZstdChunkReader() override {
    ZSTD_freeDStream(ds_);
    ::close(fd_);
  }

  Result<bool> Next(std::string_view* out) override {
    buf_.erase(0, handed_);
    handed_ = 0;
    while (!done_) {
      size_t nl = buf_.rfind('\n');
      if (nl != std::string::npos && buf_.size() >= chunk_) break;
      if (in_.pos >= in_.size && !last_full_) {
        // Refill the compressed input.
        in_buf_.resize(1u << 20);
        ssize_t n;
        do {
          n = ::read(fd_, in_buf_.data(), in_buf_.size());
        } while (n < 0 && errno == EINTR);
        if (n < 0) return ErrnoError(path_, errno);
        if (n == 0) {
          if (!frame_done_) {
            return CorruptError(fmt::format("{}: truncated zstd stream at byte {}", path_, read_));
          }
          done_ = true;
          break;
        }
        in_buf_.resize(static_cast<size_t>(n));
        in_ = ZSTD_inBuffer{in_buf_.data(), in_buf_.size(), 0};
        read_ += static_cast<uint64_t>(n);
      }
      size_t old = buf_.size();
      buf_.resize(old + (1u << 20));
      ZSTD_outBuffer o{buf_.data() + old, 1u << 20, 0};
      size_t r = ZSTD_decompressStream(ds_, &o, &in_);
      buf_.resize(old + o.pos);
      last_full_ = o.pos == o.size;
      if (ZSTD_isError(r)) {
        return CorruptError(fmt::format("{}: zstd: {} (near compressed byte {})", path_,
                                        ZSTD_getErrorName(r), read_ - in_.size + in_.pos));
      }
      frame_done_ = r == 0;
    }
    if (buf_.empty()) return false;
    size_t nl = buf_.rfind('\n');
    handed_ = done_ || nl == std::string::npos ? buf_.size() : nl + 1;
    *out = std::string_view(buf_.data(), handed_);
    return true;
  }
  uint64_t total_bytes() const override { return total_; }
  uint64_t consumed_bytes() const override { return read_; }
  void set_total(uint64_t t) { total_ = t; }

 private:
  int fd_;
  size_t chunk_;
  ZSTD_DStream* ds_;
  std::string in_buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  std::string buf_;
  size_t handed_ = 0;
  uint64_t read_ = 0, total_ = 0;
  bool done_ = false;
  bool frame_done_ = true;
  bool last_full_ = false;
};

}  // namespace

Result<std::unique_ptr<LineChunkReader>> LineChunkReader::Open(const std::string& path,
                                                               size_t chunk, bool hash) {
  if (path == "-")
    return std::unique_ptr<LineChunkReader>(new FdChunkReader(0, "<stdin>", chunk, false));
  // Plain reads rather than a mapping keep resident memory independent of
  // the file's size.
  struct stat st;
  EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path, &st));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".zst") == 0) {
    auto* z = new ZstdChunkReader(fd, path, chunk);
    z->set_total(static_cast<uint64_t>(st.st_size));
    return std::unique_ptr<LineChunkReader>(z);
  }
  auto* r = new FdChunkReader(fd, path, chunk, true, hash);
  r->set_total(static_cast<uint64_t>(st.st_size));
  return std::unique_ptr<LineChunkReader>(r);
}

Result<bool> LineChunkReader::NextLines(LineSplitter* lines) {
  const uint64_t number = lines->next_number(), offset = lines->next_offset();
  std::string_view chunk;
  EK_ASSIGN_OR_RETURN(bool more, Next(&chunk));
  *lines =
      more ? LineSplitter(chunk, number, offset) : LineSplitter(std::string_view(), number, offset);
  return more;
}

Result<uint64_t> HashFile(const std::string& path, uint64_t* size,
                          const std::function<void(std::string_view)>& each) {
  EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::string buf(1u << 18, '\0');  // 256 KiB: the hash and `each` read it from the L2 cache
  *size = 0;
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      XXH3_freeState(st);
      ::close(fd);
      return ErrnoError(path, err);
    }
    if (n == 0) break;
    XXH3_64bits_update(st, buf.data(), static_cast<size_t>(n));
    if (each) each(std::string_view(buf.data(), static_cast<size_t>(n)));
    *size += static_cast<uint64_t>(n);
  }
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  ::close(fd);
  return h;
}

}  // namespace ek
