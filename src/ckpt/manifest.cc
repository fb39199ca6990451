#include "ckpt/manifest.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/parse.h"

namespace ek::ckpt {

namespace {

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

using simdjson::dom::element;

Status ReadFileRecord(const JsonFields& f, FileRecord* out) {
  EK_RETURN_IF_ERROR(f.Str("name", &out->name));
  EK_RETURN_IF_ERROR(f.U64("size", &out->size));
  EK_RETURN_IF_ERROR(f.Hex64("xxh3", &out->xxh3));
  EK_RETURN_IF_ERROR(f.U64("chunk_bytes", &out->chunk_bytes));
  if (out->chunk_bytes == 0) return f.Err("chunk_bytes", "must be positive");
  simdjson::dom::array a;
  EK_RETURN_IF_ERROR(f.Array("chunks", &a));
  size_t k = 0;
  for (element c : a) {
    std::string_view v;
    auto h = c.get(v) || v.size() != 16 ? std::nullopt : ParseUint64(v, 16);
    if (!h) return f.Err(fmt::format("chunks[{}]", k), "not a 16-digit hex xxh3");
    out->chunks.push_back(*h);
    k++;
  }
  uint64_t want = out->size / out->chunk_bytes + (out->size % out->chunk_bytes != 0 ? 1 : 0);
  if (out->chunks.size() != want) {
    return f.Err("chunks", fmt::format("{} hashes, a {}-byte file in {}-byte chunks has {}",
                                       out->chunks.size(), out->size, out->chunk_bytes, want));
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

// The train_state object (format 2): every field required and checked, so a
// manifest the launcher trusts for a full resume says exactly what it holds.
Status ReadTrainState(const JsonFields& f, TrainStateRef* out) {
  JsonFields ts = f;
  EK_RETURN_IF_ERROR(f.Object("train_state", &ts));
  EK_RETURN_IF_ERROR(ts.Str("format", &out->format));
  if (out->format != kTrainStateFormat) {
    return ts.Err("format", fmt::format("'{}' unknown (this evenkeel reads '{}')", out->format,
                                        kTrainStateFormat));
  }
  EK_RETURN_IF_ERROR(ts.Str("dir", &out->dir));
  if (out->dir != kTrainStateDir) {
    return ts.Err("dir", fmt::format("'{}', must be '{}'", out->dir, kTrainStateDir));
  }
  int64_t world = 0;
  EK_RETURN_IF_ERROR(ts.Int("world", INT64_MIN, INT64_MAX, &world));
  if (world < 1 || world > INT32_MAX) {
    return ts.Err("world", fmt::format("{}, must be at least 1", world));
  }
  out->world = static_cast<int>(world);
  EK_RETURN_IF_ERROR(ts.Str("precision", &out->precision));
  EK_RETURN_IF_ERROR(ts.StrList("contents", &out->contents));
  return Status::Ok();
}

// A file's name in `files`: a plain name, or "train_state/NAME" when the
// manifest has a train_state.
bool ListedNameOk(std::string_view name, bool has_train_state) {
  auto plain = [](std::string_view s) {
    return !s.empty() && s != "." && s != ".." && s.find('/') == std::string_view::npos;
  };
  if (plain(name)) return true;
  if (!has_train_state) return false;
  size_t slash = name.find('/');
  return name.substr(0, slash) == kTrainStateDir && plain(name.substr(slash + 1));
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
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject(JsonWriter::kLines);
  w.Key("format_version").Int(m.format_version);
  w.Key("step").Int(m.step);
  w.Key("epoch").Int(m.epoch);
  w.Key("step_in_epoch").Int(m.step_in_epoch);
  w.Key("epoch_complete").Bool(m.epoch_complete);
  w.Key("final").Bool(m.final);
  w.Key("tokens_seen").Uint(m.tokens_seen);
  w.Key("run").BeginObject().Key("name").Str(m.run.name).Key("path").Str(m.run.path);
  w.Key("xxh3").Str(Hex(m.run.xxh3)).EndObject();
  w.Key("pack").BeginObject().Key("dir").Str(m.pack.dir);
  w.Key("manifest_xxh3").Str(Hex(m.pack.manifest_xxh3)).Key("world").Int(m.pack.world);
  w.Key("seq_len").Int(m.pack.seq_len).EndObject();
  w.Key("dtype").Str(m.dtype);
  w.Key("created").Str(m.created);
  w.Key("evenkeel_version").Str(m.evenkeel_version);
  // The trainer's own object, its bytes as it gave them (CheckExtraJson checked them).
  w.Key("extra").Raw(m.extra.empty() ? "{}" : m.extra);
  if (m.train_state) {
    const TrainStateRef& t = *m.train_state;
    w.Key("train_state").BeginObject().Key("format").Str(t.format).Key("dir").Str(t.dir);
    w.Key("world").Int(t.world).Key("precision").Str(t.precision).Key("contents").BeginArray();
    for (const std::string& c : t.contents) w.Str(c);
    w.EndArray().EndObject();
  }
  w.Key("files").BeginArray(JsonWriter::kLines);
  for (const FileRecord& f : m.files) {
    w.BeginObject().Key("name").Str(f.name).Key("size").Uint(f.size).Key("xxh3").Str(Hex(f.xxh3));
    w.Key("chunk_bytes").Uint(f.chunk_bytes).Key("chunks").BeginArray();
    for (uint64_t c : f.chunks) w.Str(Hex(c));
    w.EndArray().EndObject();
  }
  w.EndArray().EndObject();
  return w.Line();
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
  EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, name));
  CheckpointManifest m;
  EK_RETURN_IF_ERROR(f.Int("format_version", &m.format_version));
  if (m.format_version < kOldestCheckpointFormatVersion ||
      m.format_version > kCheckpointFormatVersion) {
    return UnsupportedError(fmt::format("{}: format_version {} (this evenkeel reads {} to {})",
                                        name, m.format_version, kOldestCheckpointFormatVersion,
                                        kCheckpointFormatVersion));
  }
  EK_RETURN_IF_ERROR(f.Int("step", 0, INT64_MAX, &m.step));
  EK_RETURN_IF_ERROR(f.Int("epoch", 0, INT64_MAX, &m.epoch));
  EK_RETURN_IF_ERROR(f.Int("step_in_epoch", 0, INT64_MAX, &m.step_in_epoch));
  EK_RETURN_IF_ERROR(f.Bool("epoch_complete", &m.epoch_complete));
  EK_RETURN_IF_ERROR(f.Bool("final", &m.final));
  EK_RETURN_IF_ERROR(f.U64("tokens_seen", &m.tokens_seen));
  JsonFields run = f, pack = f, extra = f;
  EK_RETURN_IF_ERROR(f.Object("run", &run));
  EK_RETURN_IF_ERROR(run.Str("name", &m.run.name));
  EK_RETURN_IF_ERROR(run.Str("path", &m.run.path));
  EK_RETURN_IF_ERROR(run.Hex64("xxh3", &m.run.xxh3));
  EK_RETURN_IF_ERROR(f.Object("pack", &pack));
  EK_RETURN_IF_ERROR(pack.Str("dir", &m.pack.dir));
  EK_RETURN_IF_ERROR(pack.Hex64("manifest_xxh3", &m.pack.manifest_xxh3));
  int64_t v = 0;
  EK_RETURN_IF_ERROR(pack.Int("world", 0, INT32_MAX, &v));
  m.pack.world = static_cast<int>(v);
  EK_RETURN_IF_ERROR(pack.Int("seq_len", 0, INT32_MAX, &v));
  m.pack.seq_len = static_cast<int>(v);
  EK_RETURN_IF_ERROR(f.Str("dtype", &m.dtype));
  EK_RETURN_IF_ERROR(f.Str("created", &m.created));
  EK_RETURN_IF_ERROR(f.Str("evenkeel_version", &m.evenkeel_version));
  EK_RETURN_IF_ERROR(f.Object("extra", &extra));
  EK_ASSIGN_OR_RETURN(m.extra, RawExtra(padded, name));
  if (f.Has("train_state")) {
    if (m.format_version < 2) {
      return f.Err("train_state", fmt::format("present in a format_version {} manifest (format 2 "
                                              "added it)",
                                              m.format_version));
    }
    TrainStateRef t;
    EK_RETURN_IF_ERROR(ReadTrainState(f, &t));
    m.train_state = std::move(t);
  }
  simdjson::dom::array a;
  EK_RETURN_IF_ERROR(f.Array("files", &a));
  size_t i = 0;
  for (element e : a) {
    EK_ASSIGN_OR_RETURN(JsonFields item, f.Item(e, "files", i));
    FileRecord rec;
    EK_RETURN_IF_ERROR(ReadFileRecord(item, &rec));
    if (!ListedNameOk(rec.name, m.train_state.has_value())) {
      return item.Err("name", m.train_state
                                  ? fmt::format("'{}' is neither a plain file name nor "
                                                "{}/NAME",
                                                rec.name, kTrainStateDir)
                                  : fmt::format("'{}' is not a plain file name", rec.name));
    }
    for (const auto& g : m.files) {
      if (g.name == rec.name) return item.Err("name", fmt::format("'{}' listed twice", rec.name));
    }
    m.files.push_back(std::move(rec));
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
