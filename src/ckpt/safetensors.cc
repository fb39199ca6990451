#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "ckpt/internal.h"
#include "core/json_check.h"

namespace ek::ckpt {

int DtypeBits(std::string_view dtype) {
  // The dtypes of the safetensors crate (Dtype in safetensors/src/tensor.rs).
  struct Entry {
    std::string_view name;
    int bits;
  };
  static constexpr Entry kDtypes[] = {
      {"BOOL", 8},    {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8},
      {"F8_E8M0", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16},    {"BF16", 16},
      {"I32", 32},    {"U32", 32}, {"F32", 32}, {"F64", 64},    {"I64", 64},
      {"U64", 64},    {"C64", 64}, {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6},
  };
  for (const auto& e : kDtypes) {
    if (e.name == dtype) return e.bits;
  }
  return 0;
}

namespace {

using internal::Quoted;
using simdjson::ondemand::array;
using simdjson::ondemand::field;
using simdjson::ondemand::object;
using simdjson::ondemand::value;

uint64_t LoadLe64(std::string_view b) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(b[i]);
  return n;
}

// Reads one JSON key/value walk of the header. Every simdjson call's error is
// checked: the header is untrusted, and ondemand reports errors lazily.
class HeaderParser {
 public:
  HeaderParser(std::string_view name, const simdjson::padded_string& text)
      : name_(name), base_(text.data()) {}

  Status Err(uint64_t byte, std::string_view what) const {
    return CorruptError(fmt::format("{}: byte {}: {}", name_, byte, what));
  }
  // The file byte of a pointer into the header text.
  uint64_t ByteOf(const char* p) const { return 8 + static_cast<uint64_t>(p - base_); }

  Status Run(simdjson::ondemand::document& doc, SafetensorsHeader* out) {
    object root;
    if (doc.get_object().get(root)) return Err(8, "header is not a JSON object");
    bool have_metadata = false;
    for (auto f : root) {
      field entry;
      if (std::move(f).get(entry)) return Err(8, "malformed header");
      std::string_view key;
      // The opening quote; key() before unescaped_key(), which consumes it.
      uint64_t at = ByteOf(entry.key().raw()) - 1;
      if (entry.unescaped_key().get(key)) return Err(at, "malformed key");
      if (key == "__metadata__") {
        if (have_metadata) return Err(at, "__metadata__ appears twice");
        have_metadata = true;
        EK_RETURN_IF_ERROR(Metadata(entry.value(), at, out));
        continue;
      }
      TensorInfo t;
      t.name = std::string(key);
      t.header_offset = at;
      EK_RETURN_IF_ERROR(Tensor(entry.value(), &t));
      out->tensors.push_back(std::move(t));
    }
    // Names are unique (checked after the walk: views into the parser's string
    // buffer do not outlive the next key, the copies in tensors do).
    std::set<std::string_view> names;
    for (const auto& t : out->tensors) {
      if (!names.insert(t.name).second)
        return Err(t.header_offset, "tensor " + Quoted(t.name) + " appears twice");
    }
    return Status::Ok();
  }

 private:
  Status Metadata(value v, uint64_t at, SafetensorsHeader* out) {
    object o;
    if (v.get_object().get(o)) return Err(at, "__metadata__ is not an object");
    for (auto f : o) {
      field entry;
      std::string_view k, s;
      if (std::move(f).get(entry)) return Err(at, "malformed __metadata__");
      // key() before unescaped_key(): unescaping consumes the raw key.
      const uint64_t key_at = ByteOf(entry.key().raw()) - 1;
      if (entry.unescaped_key().get(k)) return Err(key_at, "malformed __metadata__ key");
      std::string key(k);
      if (entry.value().get_string().get(s))
        return Err(key_at, "__metadata__ value of " + Quoted(key) + " is not a string");
      out->metadata.emplace_back(std::move(key), std::string(s));
    }
    return Status::Ok();
  }

  Status U64Array(value v, uint64_t at, std::string_view what, std::vector<uint64_t>* out) {
    array a;
    if (v.get_array().get(a)) return Err(at, std::string(what) + " is not an array");
    for (auto x : a) {
      uint64_t u;
      if (x.get_uint64().get(u))
        return Err(at, std::string(what) + " holds something other than a non-negative integer");
      if (out->size() >= 64) return Err(at, std::string(what) + " has more than 64 entries");
      out->push_back(u);
    }
    return Status::Ok();
  }

  Status Tensor(value v, TensorInfo* t) {
    const uint64_t at = t->header_offset;
    const std::string who = "tensor " + Quoted(t->name);
    object o;
    if (v.get_object().get(o)) return Err(at, who + " is not an object");
    bool have_dtype = false, have_shape = false, have_offsets = false;
    std::vector<uint64_t> offsets;
    for (auto f : o) {
      field entry;
      std::string_view k;
      if (std::move(f).get(entry) || entry.unescaped_key().get(k))
        return Err(at, who + ": malformed entry");
      if (k == "dtype") {
        std::string_view s;
        if (have_dtype || entry.value().get_string().get(s))
          return Err(at, who + ": dtype twice or not a string");
        have_dtype = true;
        t->dtype = std::string(s);
      } else if (k == "shape") {
        if (have_shape) return Err(at, who + ": shape twice");
        have_shape = true;
        EK_RETURN_IF_ERROR(U64Array(entry.value(), at, who + ": shape", &t->shape));
      } else if (k == "data_offsets") {
        if (have_offsets) return Err(at, who + ": data_offsets twice");
        have_offsets = true;
        EK_RETURN_IF_ERROR(U64Array(entry.value(), at, who + ": data_offsets", &offsets));
      }
      // Other keys are ignored, as the safetensors crate ignores them.
    }
    if (!have_dtype) return Err(at, who + ": no dtype");
    if (!have_shape) return Err(at, who + ": no shape");
    if (!have_offsets) return Err(at, who + ": no data_offsets");
    int bits = DtypeBits(t->dtype);
    if (bits == 0) return Err(at, fmt::format("{}: unknown dtype {}", who, Quoted(t->dtype)));
    if (offsets.size() != 2) return Err(at, who + ": data_offsets is not [begin, end]");
    t->begin = offsets[0];
    t->end = offsets[1];
    if (t->end < t->begin)
      return Err(at,
                 fmt::format("{}: data_offsets [{}, {}] end before begin", who, t->begin, t->end));
    uint64_t numel = 1;
    for (uint64_t d : t->shape) {
      if (d != 0 && numel > UINT64_MAX / d) return Err(at, who + ": shape overflows 64 bits");
      numel *= d;
    }
    if (numel > UINT64_MAX / static_cast<uint64_t>(bits))
      return Err(at, who + ": byte size overflows 64 bits");
    uint64_t total_bits = numel * static_cast<uint64_t>(bits);
    if (total_bits % 8 != 0)
      return Err(
          at, fmt::format("{}: {} elements of {} do not fill whole bytes", who, numel, t->dtype));
    if (t->end - t->begin != total_bits / 8) {
      return Err(at,
                 fmt::format("{}: data_offsets [{}, {}] hold {} bytes, {} x {} needs {}", who,
                             t->begin, t->end, t->end - t->begin, numel, t->dtype, total_bits / 8));
    }
    return Status::Ok();
  }

  std::string_view name_;
  const char* base_;
};

// The file byte of a syntax error that LocateJsonError found in the header,
// read back from its "(byte B)"; 8 (the header's start) when it found none.
uint64_t SyntaxErrorByte(const std::string& where) {
  size_t p = where.find("(byte ");
  if (p == std::string::npos) return 8;
  uint64_t b = 0;
  for (p += 6; p < where.size() && where[p] >= '0' && where[p] <= '9' && b < UINT64_MAX / 10; ++p) {
    b = b * 10 + static_cast<uint64_t>(where[p] - '0');
  }
  return 8 + b;
}

// Sorts by offsets and checks the tensors tile [0, data end) exactly.
Status CheckCoverage(std::string_view name, SafetensorsHeader* h) {
  std::vector<const TensorInfo*> order;
  order.reserve(h->tensors.size());
  for (const auto& t : h->tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin < expected) {
      return CorruptError(
          fmt::format("{}: byte {}: tensor {} (data offsets {}-{}) overlaps tensor {} ({}-{})",
                      name, h->data_start + t->begin, Quoted(t->name), t->begin, t->end,
                      Quoted(prev->name), prev->begin, prev->end));
    }
    if (t->begin > expected) {
      return CorruptError(
          fmt::format("{}: byte {}: {} bytes before tensor {} belong to no tensor (a hole at data "
                      "offsets {}-{})",
                      name, h->data_start + expected, t->begin - expected, Quoted(t->name),
                      expected, t->begin));
    }
    expected = t->end;
    prev = t;
  }
  h->data_bytes = expected;
  return Status::Ok();
}

}  // namespace

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file_prefix, uint64_t file_size,
                                                 std::string_view name) {
  if (file_size < 8 || file_prefix.size() < 8) {
    return CorruptError(fmt::format(
        "{}: byte 0: file is {} bytes, too short for the 8-byte header length", name, file_size));
  }
  SafetensorsHeader h;
  h.file_size = file_size;
  h.header_length = LoadLe64(file_prefix);
  if (h.header_length > kMaxHeaderLength) {
    return CorruptError(fmt::format("{}: byte 0: header length {} exceeds the {}-byte limit", name,
                                    h.header_length, kMaxHeaderLength));
  }
  if (h.header_length > file_size - 8) {
    return CorruptError(fmt::format("{}: byte 8: header length {} exceeds the file ({} bytes)",
                                    name, h.header_length, file_size));
  }
  h.data_start = 8 + h.header_length;
  if (file_prefix.size() < h.data_start) {
    return InternalError(
        fmt::format("{}: ParseSafetensorsHeader given {} bytes of a {}-byte header", name,
                    file_prefix.size(), h.data_start));
  }
  std::string_view text = file_prefix.substr(8, h.header_length);
  if (text.empty() || text[0] != '{') {
    return CorruptError(fmt::format("{}: byte 8: header does not start with '{{'", name));
  }
  simdjson::padded_string padded(text);
  {
    // Full validation first (UTF-8, syntax, trailing bytes): ondemand below
    // only checks what it visits.
    simdjson::dom::parser validator;
    simdjson::dom::element root;
    if (auto err = validator.parse(padded).get(root)) {
      std::string where = LocateJsonError(text);
      if (where.empty()) where = simdjson::error_message(err);
      return CorruptError(fmt::format("{}: byte {}: malformed header JSON: header {}", name,
                                      SyntaxErrorByte(where), where));
    }
  }
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (auto err = parser.iterate(padded).get(doc)) {
    return CorruptError(
        fmt::format("{}: byte 8: malformed header JSON: {}", name, simdjson::error_message(err)));
  }
  HeaderParser p(name, padded);
  EK_RETURN_IF_ERROR(p.Run(doc, &h));
  EK_RETURN_IF_ERROR(CheckCoverage(name, &h));
  if (h.data_bytes > UINT64_MAX - h.data_start) {
    return CorruptError(fmt::format("{}: byte 8: tensor data offsets overflow 64 bits", name));
  }
  const uint64_t declared_end = h.data_start + h.data_bytes;
  if (declared_end > file_size) {
    return CorruptError(
        fmt::format("{}: truncated: header declares data up to byte {}, file ends at byte {}", name,
                    declared_end, file_size));
  }
  if (declared_end < file_size) {
    return CorruptError(fmt::format(
        "{}: byte {}: {} bytes after the data region (header declares data up to byte {}, "
        "file ends at byte {})",
        name, declared_end, file_size - declared_end, declared_end, file_size));
  }
  return h;
}

namespace {

Status PreadAll(int fd, char* buf, size_t n, uint64_t offset, std::string_view name) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError(name, errno);
    if (r == 0) {
      return CorruptError(
          fmt::format("{}: byte {}: file ended while reading the header", name, offset + done));
    }
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace

Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path, std::string_view name) {
  if (name.empty()) name = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError(fmt::format("{}: missing", name));
    return ErrnoError(name, err);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(name, errno);
  if (!S_ISREG(st.st_mode)) return CorruptError(fmt::format("{}: not a regular file", name));
  uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string head(std::min<uint64_t>(size, 8), '\0');
  EK_RETURN_IF_ERROR(PreadAll(fd, head.data(), head.size(), 0, name));
  if (size >= 8) {
    uint64_t n = LoadLe64(head);
    // Read the header only when its length is sane; the parser names the fault otherwise.
    if (n <= kMaxHeaderLength && n <= size - 8) {
      head.resize(8 + n);
      EK_RETURN_IF_ERROR(PreadAll(fd, head.data() + 8, n, 8, name));
    }
  }
  return ParseSafetensorsHeader(head, size, name);
}

}  // namespace ek::ckpt
