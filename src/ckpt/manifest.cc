#include "ckpt/manifest.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "core/file.h"
#include "core/json_check.h"
#include "core/json_out.h"

namespace ek::ckpt {

namespace {

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

bool ParseHex16(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

using simdjson::dom::element;

// Strict field access on a parsed manifest: every getter names the field
// ("files[3].size") and the file when it is missing or has the wrong type.
class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}
  Status Err(std::string_view field, std::string_view what) const {
    return CorruptError(fmt::format("{}: {}: {}", name_, field, what));
  }
  Status Field(element obj, std::string_view path, std::string_view key, element* out) const {
    auto r = obj[key];
    if (r.error() == simdjson::NO_SUCH_FIELD) return Err(Join(path, key), "missing");
    if (r.get(*out)) return Err(Join(path, key), "unreadable");
    return Status::Ok();
  }
  Status Object(element obj, std::string_view path, std::string_view key, element* out) const {
    EK_RETURN_IF_ERROR(Field(obj, path, key, out));
    if (!out->is_object()) return Err(Join(path, key), "not an object");
    return Status::Ok();
  }
  Status Int(element obj, std::string_view path, std::string_view key, int64_t lo, int64_t hi,
             int64_t* out) const {
    element e;
    EK_RETURN_IF_ERROR(Field(obj, path, key, &e));
    int64_t v;
    if (e.get(v)) return Err(Join(path, key), "not an integer");
    if (v < lo || v > hi)
      return Err(Join(path, key), fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    *out = v;
    return Status::Ok();
  }
  Status U64(element obj, std::string_view path, std::string_view key, uint64_t* out) const {
    element e;
    EK_RETURN_IF_ERROR(Field(obj, path, key, &e));
    if (e.get(*out)) return Err(Join(path, key), "not a non-negative integer");
    return Status::Ok();
  }
  Status Bool(element obj, std::string_view path, std::string_view key, bool* out) const {
    element e;
    EK_RETURN_IF_ERROR(Field(obj, path, key, &e));
    if (e.get(*out)) return Err(Join(path, key), "not true or false");
    return Status::Ok();
  }
  Status Str(element obj, std::string_view path, std::string_view key, std::string* out) const {
    element e;
    EK_RETURN_IF_ERROR(Field(obj, path, key, &e));
    std::string_view v;
    if (e.get(v)) return Err(Join(path, key), "not a string");
    *out = std::string(v);
    return Status::Ok();
  }
  Status HexOf(element e, std::string_view field, uint64_t* out) const {
    std::string_view v;
    if (e.get(v) || !ParseHex16(v, out)) return Err(field, "not a 16-digit hex xxh3");
    return Status::Ok();
  }
  Status Hash(element obj, std::string_view path, std::string_view key, uint64_t* out) const {
    element e;
    EK_RETURN_IF_ERROR(Field(obj, path, key, &e));
    return HexOf(e, Join(path, key), out);
  }
  static std::string Join(std::string_view path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }

 private:
  const std::string& name_;
};

Status ReadFileRecord(const Reader& r, element e, size_t i, FileRecord* f) {
  const std::string path = fmt::format("files[{}]", i);
  if (!e.is_object()) return r.Err(path, "not an object");
  EK_RETURN_IF_ERROR(r.Str(e, path, "name", &f->name));
  EK_RETURN_IF_ERROR(r.U64(e, path, "size", &f->size));
  EK_RETURN_IF_ERROR(r.Hash(e, path, "xxh3", &f->xxh3));
  EK_RETURN_IF_ERROR(r.U64(e, path, "chunk_bytes", &f->chunk_bytes));
  if (f->chunk_bytes == 0) return r.Err(path + ".chunk_bytes", "must be positive");
  element chunks;
  EK_RETURN_IF_ERROR(r.Field(e, path, "chunks", &chunks));
  simdjson::dom::array a;
  if (chunks.get(a)) return r.Err(path + ".chunks", "not an array");
  size_t k = 0;
  for (element c : a) {
    uint64_t h = 0;
    EK_RETURN_IF_ERROR(r.HexOf(c, fmt::format("{}.chunks[{}]", path, k++), &h));
    f->chunks.push_back(h);
  }
  uint64_t want = f->size / f->chunk_bytes + (f->size % f->chunk_bytes != 0 ? 1 : 0);
  if (f->chunks.size() != want) {
    return r.Err(path + ".chunks", fmt::format("{} hashes, a {}-byte file in {}-byte chunks has {}",
                                               f->chunks.size(), f->size, f->chunk_bytes, want));
  }
  return Status::Ok();
}

// The text of the top-level "extra" object, as written (simdjson's DOM would
// re-serialize it; the trainer gets back its own bytes).
Result<std::string> RawExtra(const simdjson::padded_string& padded, const std::string& name) {
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root, extra;
  std::string_view raw;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(root) ||
      root.find_field_unordered("extra").get_object().get(extra) || extra.raw_json().get(raw)) {
    return CorruptError(fmt::format("{}: extra: unreadable", name));
  }
  while (!raw.empty() && IsJsonSpace(raw.back())) raw.remove_suffix(1);
  return std::string(raw);
}

}  // namespace

std::string_view SafetensorsDtypeFor(std::string_view torch_dtype) {
  if (torch_dtype == "bfloat16") return "BF16";
  if (torch_dtype == "float16") return "F16";
  if (torch_dtype == "float32") return "F32";
  return {};
}

Status CheckExtraJson(std::string_view text) {
  if (text.empty()) return Status::Ok();
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  element root;
  if (auto err = parser.parse(padded).get(root)) {
    std::string where = LocateJsonError(text);
    return InvalidArgumentError(
        "checkpoint extra: malformed JSON: " +
        (where.empty() ? std::string(simdjson::error_message(err)) : where));
  }
  if (!root.is_object()) return InvalidArgumentError("checkpoint extra: not a JSON object");
  return Status::Ok();
}

std::string CheckpointManifestToJson(const CheckpointManifest& m) {
  std::string o = "{\n";
  auto str = [&](std::string_view key, std::string_view v, bool comma = true) {
    o += "  ";
    AppendJsonString(&o, key);
    o += ": ";
    AppendJsonString(&o, v);
    o += comma ? ",\n" : "\n";
  };
  o += fmt::format("  \"format_version\": {},\n", m.format_version);
  o += fmt::format("  \"step\": {},\n", m.step);
  o += fmt::format("  \"epoch\": {},\n", m.epoch);
  o += fmt::format("  \"step_in_epoch\": {},\n", m.step_in_epoch);
  o += fmt::format("  \"epoch_complete\": {},\n", m.epoch_complete);
  o += fmt::format("  \"final\": {},\n", m.final);
  o += fmt::format("  \"tokens_seen\": {},\n", m.tokens_seen);
  o += "  \"run\": {\"name\": ";
  AppendJsonString(&o, m.run.name);
  o += ", \"path\": ";
  AppendJsonString(&o, m.run.path);
  o += fmt::format(", \"xxh3\": \"{}\"}},\n", Hex(m.run.xxh3));
  o += "  \"pack\": {\"dir\": ";
  AppendJsonString(&o, m.pack.dir);
  o += fmt::format(", \"manifest_xxh3\": \"{}\", \"world\": {}, \"seq_len\": {}}},\n",
                   Hex(m.pack.manifest_xxh3), m.pack.world, m.pack.seq_len);
  str("dtype", m.dtype);
  str("created", m.created);
  str("evenkeel_version", m.evenkeel_version);
  o += "  \"extra\": ";
  o += m.extra.empty() ? "{}" : m.extra;
  o += ",\n  \"files\": [";
  for (size_t i = 0; i < m.files.size(); ++i) {
    const FileRecord& f = m.files[i];
    o += i ? ",\n    {\"name\": " : "\n    {\"name\": ";
    AppendJsonString(&o, f.name);
    o += fmt::format(", \"size\": {}, \"xxh3\": \"{}\", \"chunk_bytes\": {}, \"chunks\": [", f.size,
                     Hex(f.xxh3), f.chunk_bytes);
    for (size_t k = 0; k < f.chunks.size(); ++k)
      o += fmt::format("{}\"{}\"", k ? ", " : "", Hex(f.chunks[k]));
    o += "]}";
  }
  o += m.files.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return o;
}

Result<CheckpointManifest> CheckpointManifestFromJson(std::string_view json,
                                                      const std::string& name) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element root;
  if (auto err = parser.parse(padded).get(root)) {
    std::string where = LocateJsonError(json);
    return CorruptError(fmt::format("{}: malformed JSON: {}", name,
                                    where.empty() ? simdjson::error_message(err) : where));
  }
  Reader r(name);
  if (!root.is_object()) return r.Err("(top level)", "not an object");
  CheckpointManifest m;
  int64_t v;
  EK_RETURN_IF_ERROR(r.Int(root, "", "format_version", INT32_MIN, INT32_MAX, &v));
  m.format_version = static_cast<int>(v);
  if (m.format_version != kCheckpointFormatVersion) {
    return UnsupportedError(fmt::format("{}: format_version {} (this evenkeel reads {})", name,
                                        m.format_version, kCheckpointFormatVersion));
  }
  EK_RETURN_IF_ERROR(r.Int(root, "", "step", 0, INT64_MAX, &m.step));
  EK_RETURN_IF_ERROR(r.Int(root, "", "epoch", 0, INT64_MAX, &m.epoch));
  EK_RETURN_IF_ERROR(r.Int(root, "", "step_in_epoch", 0, INT64_MAX, &m.step_in_epoch));
  EK_RETURN_IF_ERROR(r.Bool(root, "", "epoch_complete", &m.epoch_complete));
  EK_RETURN_IF_ERROR(r.Bool(root, "", "final", &m.final));
  EK_RETURN_IF_ERROR(r.U64(root, "", "tokens_seen", &m.tokens_seen));
  element run, pack, extra, files;
  EK_RETURN_IF_ERROR(r.Object(root, "", "run", &run));
  EK_RETURN_IF_ERROR(r.Str(run, "run", "name", &m.run.name));
  EK_RETURN_IF_ERROR(r.Str(run, "run", "path", &m.run.path));
  EK_RETURN_IF_ERROR(r.Hash(run, "run", "xxh3", &m.run.xxh3));
  EK_RETURN_IF_ERROR(r.Object(root, "", "pack", &pack));
  EK_RETURN_IF_ERROR(r.Str(pack, "pack", "dir", &m.pack.dir));
  EK_RETURN_IF_ERROR(r.Hash(pack, "pack", "manifest_xxh3", &m.pack.manifest_xxh3));
  EK_RETURN_IF_ERROR(r.Int(pack, "pack", "world", 0, INT32_MAX, &v));
  m.pack.world = static_cast<int>(v);
  EK_RETURN_IF_ERROR(r.Int(pack, "pack", "seq_len", 0, INT32_MAX, &v));
  m.pack.seq_len = static_cast<int>(v);
  EK_RETURN_IF_ERROR(r.Str(root, "", "dtype", &m.dtype));
  EK_RETURN_IF_ERROR(r.Str(root, "", "created", &m.created));
  EK_RETURN_IF_ERROR(r.Str(root, "", "evenkeel_version", &m.evenkeel_version));
  EK_RETURN_IF_ERROR(r.Object(root, "", "extra", &extra));
  EK_ASSIGN_OR_RETURN(m.extra, RawExtra(padded, name));
  EK_RETURN_IF_ERROR(r.Field(root, "", "files", &files));
  simdjson::dom::array a;
  if (files.get(a)) return r.Err("files", "not an array");
  size_t i = 0;
  for (element e : a) {
    FileRecord f;
    EK_RETURN_IF_ERROR(ReadFileRecord(r, e, i, &f));
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "." ||
        f.name == "..") {
      return r.Err(fmt::format("files[{}].name", i),
                   fmt::format("'{}' is not a plain file name", f.name));
    }
    for (const auto& g : m.files) {
      if (g.name == f.name)
        return r.Err(fmt::format("files[{}].name", i), fmt::format("'{}' listed twice", f.name));
    }
    m.files.push_back(std::move(f));
    ++i;
  }
  return m;
}

Result<CheckpointManifest> ReadCheckpointManifest(const std::string& dir) {
  std::string path = dir + "/" + std::string(kManifestName);
  if (!FileExists(path)) return NotFoundError(path + ": missing");
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return CheckpointManifestFromJson(text, path);
}

}  // namespace ek::ckpt
