#include "ingest/json_source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "core/file.h"

namespace ek::ingest {

namespace {

constexpr size_t kJsonReadBytes = 1u << 20;
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// read(2) that retries EINTR; the error names the file.
Result<size_t> JsonReadSome(int fd, char* buf, size_t n, const std::string& path) {
  ssize_t got;
  do {
    got = ::read(fd, buf, n);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return ErrnoError(path, errno);
  return static_cast<size_t>(got);
}

bool BlankByte(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// A line of JSON lines as a record: its text without the byte-order mark that may open
// line 1, or nothing for a blank line. RecordCounter counts the same lines.
std::optional<std::string_view> RecordText(const TextLine& line) {
  std::string_view text = line.text;
  if (line.number == 1 && text.substr(0, kUtf8Bom.size()) == kUtf8Bom)
    text.remove_prefix(kUtf8Bom.size());
  for (char c : text) {
    if (!BlankByte(c)) return text;
  }
  return std::nullopt;
}

// Counts RecordText's records of a text fed in pieces of any size (a line may span
// pieces): for each line, is there a byte that is not blank, the byte-order mark of the
// text's first three bytes set aside.
class RecordCounter {
 public:
  void Feed(const char* p, size_t n) {
    size_t i = 0;
    while (bom_ && i < n && offset_ + i < kUtf8Bom.size()) {
      if (p[i] == kUtf8Bom[offset_ + i]) {
        ++i;
        continue;
      }
      if (offset_ + i > 0) content_ = true;  // a part of the mark is text
      bom_ = false;                          // and this byte is read below
    }
    while (i < n) {
      if (content_) {  // the rest of this line does not matter
        const void* nl = std::memchr(p + i, '\n', n - i);
        if (!nl) break;
        ++records_;
        content_ = false;
        i = static_cast<size_t>(static_cast<const char*>(nl) - p) + 1;
        continue;
      }
      const char c = p[i++];
      if (c != '\n' && !BlankByte(c)) content_ = true;
    }
    offset_ += n;
  }
  // The count, once every piece is fed.
  uint64_t Finish() const {
    const bool part_of_mark = bom_ && offset_ > 0 && offset_ < kUtf8Bom.size();
    return records_ + (content_ || part_of_mark ? 1 : 0);
  }

 private:
  uint64_t records_ = 0, offset_ = 0;
  bool content_ = false;  // the current line has a byte that is not blank
  bool bom_ = true;       // the bytes so far are the start of a byte-order mark
};

class GzipChunkReader final : public LineChunkReader {
 public:
  GzipChunkReader(int fd, std::string name, size_t chunk, uint64_t total)
      : fd_(fd), chunk_(chunk), total_(total) {
    path_ = std::move(name);
  }
  ~GzipChunkReader() override {
    if (init_) inflateEnd(&zs_);
    ::close(fd_);
  }
  Status Init() {
    std::memset(&zs_, 0, sizeof(zs_));
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK)  // 16: gzip header and trailer
      return InternalError(fmt::format("{}: zlib: inflateInit2 failed", path_));
    init_ = true;
    return Status::Ok();
  }

  Result<bool> Next(std::string_view* out) override {
    buf_.erase(0, handed_);
    handed_ = 0;
    while (!done_) {
      size_t nl = buf_.rfind('\n');
      if (nl != std::string::npos && buf_.size() >= chunk_) break;
      if (zs_.avail_in == 0) {
        in_buf_.resize(kJsonReadBytes);
        EK_ASSIGN_OR_RETURN(size_t n, JsonReadSome(fd_, in_buf_.data(), in_buf_.size(), path_));
        if (n == 0) {
          if (in_member_) {
            return CorruptError(fmt::format(
                "{}: truncated gzip stream: the file ends inside a compressed member (after "
                "{} compressed bytes); the file is damaged or still being written",
                path_, read_));
          }
          done_ = true;
          break;
        }
        read_ += n;
        zs_.next_in = reinterpret_cast<Bytef*>(in_buf_.data());
        zs_.avail_in = static_cast<uInt>(n);
      }
      const size_t old = buf_.size();
      buf_.resize(old + kJsonReadBytes);
      zs_.next_out = reinterpret_cast<Bytef*>(buf_.data() + old);
      zs_.avail_out = static_cast<uInt>(kJsonReadBytes);
      in_member_ = true;
      int r = inflate(&zs_, Z_NO_FLUSH);
      buf_.resize(old + (kJsonReadBytes - zs_.avail_out));
      if (r == Z_STREAM_END) {
        // Another member may follow (gzip files concatenate).
        in_member_ = false;
        inflateReset(&zs_);
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        return CorruptError(fmt::format("{}: gzip: {} (near compressed byte {})", path_,
                                        zs_.msg ? zs_.msg : "corrupt data", read_ - zs_.avail_in));
      }
    }
    if (buf_.empty()) return false;
    size_t nl = buf_.rfind('\n');
    handed_ = done_ || nl == std::string::npos ? buf_.size() : nl + 1;
    *out = std::string_view(buf_.data(), handed_);
    return true;
  }
  uint64_t total_bytes() const override { return total_; }
  uint64_t consumed_bytes() const override { return read_ - zs_.avail_in; }

 private:
  int fd_;
  size_t chunk_;
  uint64_t total_;
  z_stream zs_{};
  bool init_ = false, done_ = false, in_member_ = false;
  std::string in_buf_, buf_;
  size_t handed_ = 0;
  uint64_t read_ = 0;
};

class JsonLinesSource final : public RecordSource {
 public:
  JsonLinesSource(std::unique_ptr<LineChunkReader> reader, std::string path, FileKind kind)
      : reader_(std::move(reader)), path_(std::move(path)), kind_(kind) {}
  Result<bool> Next(std::vector<SourceRecord>* out) override {
    out->clear();
    while (out->empty()) {
      EK_ASSIGN_OR_RETURN(bool more, reader_->NextLines(&lines_));
      if (!more) return false;
      for (TextLine line; lines_.Next(&line);) {
        if (std::optional<std::string_view> text = RecordText(line))
          out->push_back(SourceRecord{*text, line.number, &path_, Unit::kLine});
      }
      records_ += out->size();
    }
    return true;
  }
  FileKind kind() const override { return kind_; }
  uint64_t consumed_bytes() const override { return reader_->consumed_bytes(); }
  uint64_t total_bytes() const override { return reader_->total_bytes(); }
  bool Identity(InputIdentity* id) const override {
    if (!reader_->Digest(&id->size, &id->xxh3)) return false;
    id->records = static_cast<int64_t>(records_);
    return true;
  }

 private:
  std::unique_ptr<LineChunkReader> reader_;
  LineSplitter lines_;
  uint64_t records_ = 0;  // handed out
  std::string path_;
  FileKind kind_;
};

// The array scanner's states; see OpenJsonArray.
enum class ArrayState { kStart, kFirst, kBefore, kIn, kAfter, kEnd };

// Bytes that leave the scanner's state as it is: inside a string all but '"' and '\\',
// outside one all but '"' and the brackets.
constexpr std::array<bool, 256> ArrayPlainBytes(std::string_view special) {
  std::array<bool, 256> t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = true;
  for (char c : special) t[static_cast<unsigned char>(c)] = false;
  return t;
}
constexpr std::array<bool, 256> kStringPlain = ArrayPlainBytes("\"\\");
constexpr std::array<bool, 256> kStructPlain = ArrayPlainBytes("\"{}[]");

class JsonArraySource final : public RecordSource {
 public:
  JsonArraySource(int fd, std::string path, uint64_t total, size_t batch)
      : fd_(fd), path_(std::move(path)), total_(total), batch_(batch) {}
  ~JsonArraySource() override { ::close(fd_); }

  Result<bool> Next(std::vector<SourceRecord>* out) override {
    out->clear();
    buf_.erase(0, handed_);
    base_ += handed_;
    pos_ -= handed_;
    if (state_ == ArrayState::kIn) start_ -= handed_;
    handed_ = 0;
    std::vector<std::pair<size_t, size_t>> spans;  // (start, length) in buf_
    size_t batch_bytes = 0;
    while (batch_bytes < batch_) {
      EK_RETURN_IF_ERROR(Scan(&spans, &batch_bytes));
      if (batch_bytes >= batch_) break;
      if (eof_) break;
      const size_t old = buf_.size();
      buf_.resize(old + kJsonReadBytes);
      EK_ASSIGN_OR_RETURN(size_t n, JsonReadSome(fd_, buf_.data() + old, kJsonReadBytes, path_));
      buf_.resize(old + n);
      if (n == 0) eof_ = true;
    }
    const bool at_end = eof_ && pos_ == buf_.size();
    if (at_end && state_ != ArrayState::kEnd) EK_RETURN_IF_ERROR(Truncated());
    handed_ = state_ == ArrayState::kIn ? start_ : pos_;
    for (size_t k = 0; k < spans.size(); ++k) {
      out->push_back(SourceRecord{std::string_view(buf_.data() + spans[k].first, spans[k].second),
                                  first_number_ + k, &path_, Unit::kElement});
    }
    first_number_ += spans.size();
    return !out->empty();  // empty only at the end (the loop above reads until then)
  }
  FileKind kind() const override { return FileKind::kJson; }
  uint64_t consumed_bytes() const override { return base_ + handed_; }
  uint64_t total_bytes() const override { return total_; }

 private:
  Status Bad(size_t at, std::string_view what) const {
    return InvalidArgumentError(fmt::format(
        "{}: byte {}: malformed JSON array: {} (a .json file is JSON lines or one array of "
        "objects; write one with Dataset.to_json(\"x.jsonl\"))",
        path_, base_ + at, what));
  }
  Status Truncated() const {
    if (state_ == ArrayState::kStart)  // only a byte-order mark or spaces: no records
      return Status::Ok();
    return Bad(buf_.size(), state_ == ArrayState::kIn
                                ? fmt::format("the file ends inside element {}", elements_ + 1)
                                : std::string("the file ends before the array's closing ']'"));
  }
  static bool Space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

  // Scans buf_ from pos_ to its end, appending each complete element to *spans.
  Status Scan(std::vector<std::pair<size_t, size_t>>* spans, size_t* batch_bytes) {
    const char* b = buf_.data();
    const size_t n = buf_.size();
    while (pos_ < n) {
      const char c = b[pos_];
      switch (state_) {
        case ArrayState::kStart:
          if (base_ + pos_ == 0 && n >= 3 && std::string_view(b, 3) == kUtf8Bom) {
            pos_ += 3;
            continue;
          }
          if (base_ + pos_ == 0 && n < 3 && !eof_ && c == '\xEF') return Status::Ok();
          if (Space(c)) break;
          if (c != '[') return Bad(pos_, fmt::format("expected '[', found '{}'", c));
          state_ = ArrayState::kFirst;
          break;
        case ArrayState::kFirst:
        case ArrayState::kBefore:
          if (Space(c)) break;
          if (c == ']' && state_ == ArrayState::kFirst) {
            state_ = ArrayState::kEnd;
            break;
          }
          if (c != '{') {
            return Bad(pos_, fmt::format("element {} is not an object (it starts with '{}')",
                                         elements_ + 1, c));
          }
          state_ = ArrayState::kIn;
          start_ = pos_;
          open_.assign(1, '}');
          in_string_ = escape_ = false;
          break;
        case ArrayState::kIn:
          if (!escape_) {
            // Skip the bytes that change nothing (most of an element) a table lookup each.
            const bool* plain = in_string_ ? kStringPlain.data() : kStructPlain.data();
            size_t k = pos_;
            while (k < n && plain[static_cast<unsigned char>(b[k])]) ++k;
            if (k != pos_) {
              pos_ = k;
              continue;
            }
          }
          if (in_string_) {
            if (escape_) {
              escape_ = false;
            } else if (c == '\\') {
              escape_ = true;
            } else if (c == '"') {
              in_string_ = false;
            }
          } else if (c == '"') {
            in_string_ = true;
          } else if (c == '{' || c == '[') {
            open_.push_back(c == '{' ? '}' : ']');
          } else if (c == '}' || c == ']') {
            if (c != open_.back()) {
              return Bad(pos_, fmt::format("element {}: '{}' closes a '{}'", elements_ + 1, c,
                                           open_.back() == '}' ? '{' : '['));
            }
            open_.pop_back();
            if (!open_.empty()) break;
            spans->emplace_back(start_, pos_ + 1 - start_);
            *batch_bytes += pos_ + 1 - start_;
            ++elements_;
            state_ = ArrayState::kAfter;
            ++pos_;
            if (*batch_bytes >= batch_) return Status::Ok();
            continue;
          }
          break;
        case ArrayState::kAfter:
          if (Space(c)) break;
          if (c == ',') {
            state_ = ArrayState::kBefore;
          } else if (c == ']') {
            state_ = ArrayState::kEnd;
          } else {
            return Bad(pos_, fmt::format("expected ',' or ']' after element {}, found '{}'",
                                         elements_, c));
          }
          break;
        case ArrayState::kEnd:
          if (!Space(c)) return Bad(pos_, "text after the array's closing ']'");
          break;
      }
      ++pos_;
    }
    return Status::Ok();
  }

  int fd_;
  std::string path_;
  uint64_t total_;
  size_t batch_;
  std::string buf_;
  uint64_t base_ = 0;  // file offset of buf_[0]
  size_t pos_ = 0, start_ = 0, handed_ = 0;
  ArrayState state_ = ArrayState::kStart;
  std::string open_;  // the closing brackets the element's open ones await, innermost last
  uint64_t elements_ = 0, first_number_ = 1;
  bool in_string_ = false, escape_ = false, eof_ = false;
};

}  // namespace

Result<std::unique_ptr<LineChunkReader>> OpenGzipLines(const std::string& path,
                                                       size_t chunk_bytes) {
  struct stat st;
  EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path, &st));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  auto r =
      std::make_unique<GzipChunkReader>(fd, path, chunk_bytes, static_cast<uint64_t>(st.st_size));
  EK_RETURN_IF_ERROR(r->Init());
  return std::unique_ptr<LineChunkReader>(std::move(r));
}

Result<std::unique_ptr<RecordSource>> OpenJsonLines(const std::string& path, Codec codec,
                                                    FileKind kind, const OpenOptions& options) {
  std::unique_ptr<LineChunkReader> reader;
  if (codec == Codec::kGzip) {
    EK_ASSIGN_OR_RETURN(reader, OpenGzipLines(path, options.batch_bytes));
  } else {
    // core's reader: plain, or zstd for a name ending in .zst (DetectKind has checked
    // that the name and the bytes agree).
    EK_ASSIGN_OR_RETURN(reader, LineChunkReader::Open(path, options.batch_bytes,
                                                      options.identify && codec == Codec::kPlain));
  }
  return std::unique_ptr<RecordSource>(new JsonLinesSource(std::move(reader), path, kind));
}

Result<InputIdentity> IdentifyPlainJsonLines(const std::string& path) {
  RecordCounter counter;
  InputIdentity id;
  EK_ASSIGN_OR_RETURN(id.xxh3, HashFile(path, &id.size, [&counter](std::string_view piece) {
                        counter.Feed(piece.data(), piece.size());
                      }));
  id.records = static_cast<int64_t>(counter.Finish());
  return id;
}

Result<std::unique_ptr<RecordSource>> OpenJsonArray(const std::string& path,
                                                    const OpenOptions& options) {
  struct stat st;
  EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path, &st));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<RecordSource>(new JsonArraySource(
      fd, path, static_cast<uint64_t>(st.st_size), std::max<size_t>(options.batch_bytes, 1)));
}

}  // namespace ek::ingest
