#include "core/json_fields.h"

#include <fmt/core.h>

#include <cmath>

#include "core/json_check.h"
#include "core/parse.h"

namespace ek {

JsonFields::JsonFields(simdjson::dom::element obj, std::string file, std::string path)
    : obj_(obj), file_(std::move(file)), path_(std::move(path)) {}

Result<JsonFields> JsonFields::Root(simdjson::dom::element root, std::string file) {
  if (!root.is_object()) return CorruptError(fmt::format("{}: not a JSON object", file));
  return JsonFields(root, std::move(file));
}

std::string JsonFields::Where(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

Status JsonFields::Err(std::string_view key, std::string_view what) const {
  return CorruptError(fmt::format("{}: {}: {}", file_, Where(key), what));
}

bool JsonFields::Has(std::string_view key) const {
  simdjson::dom::element e;
  return obj_[key].get(e) == simdjson::SUCCESS;
}

Status JsonFields::Field(std::string_view key, simdjson::dom::element* out) const {
  auto r = obj_[key];
  if (r.error() == simdjson::NO_SUCH_FIELD) return Err(key, "missing");
  if (r.get(*out)) return Err(key, "unreadable");
  return Status::Ok();
}

Status JsonFields::Str(std::string_view key, std::string* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  std::string_view v;
  if (e.get(v)) return Err(key, "not a string");
  *out = std::string(v);
  return Status::Ok();
}

Status JsonFields::Int(std::string_view key, int64_t lo, int64_t hi, int64_t* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  int64_t v;
  if (e.get(v)) return Err(key, "not an integer");
  if (v < lo || v > hi) return Err(key, fmt::format("{} is out of range [{}, {}]", v, lo, hi));
  *out = v;
  return Status::Ok();
}

Status JsonFields::U64(std::string_view key, uint64_t* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  if (e.get(*out)) return Err(key, "not a non-negative integer");
  return Status::Ok();
}

Status JsonFields::Num(std::string_view key, double* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  double d;
  int64_t i;
  uint64_t u;
  if (!e.get(d)) {
    if (!std::isfinite(d)) return Err(key, "not a finite number");
    *out = d;
  } else if (!e.get(i)) {
    *out = static_cast<double>(i);
  } else if (!e.get(u)) {
    *out = static_cast<double>(u);
  } else {
    return Err(key, "not a number");
  }
  return Status::Ok();
}

Status JsonFields::Bool(std::string_view key, bool* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  if (e.get(*out)) return Err(key, "not true or false");
  return Status::Ok();
}

Status JsonFields::Hex64(std::string_view key, uint64_t* out) const {
  std::string s;
  EK_RETURN_IF_ERROR(Str(key, &s));
  auto v = s.size() == 16 ? ParseUint64(s, 16) : std::nullopt;
  if (!v) return Err(key, "not a 16-digit hex hash");
  *out = *v;
  return Status::Ok();
}

Status JsonFields::Object(std::string_view key, JsonFields* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  if (!e.is_object()) return Err(key, "not an object");
  *out = JsonFields(e, file_, Where(key));
  return Status::Ok();
}

Status JsonFields::Array(std::string_view key, simdjson::dom::array* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  if (e.get(*out)) return Err(key, "not an array");
  return Status::Ok();
}

Status JsonFields::OptStr(std::string_view key, std::string* out) const {
  return Has(key) ? Str(key, out) : Status::Ok();
}
Status JsonFields::OptNum(std::string_view key, double* out) const {
  return Has(key) ? Num(key, out) : Status::Ok();
}
Status JsonFields::OptBool(std::string_view key, bool* out) const {
  return Has(key) ? Bool(key, out) : Status::Ok();
}

Status JsonFields::NumOrNull(std::string_view key, std::optional<double>* out) const {
  simdjson::dom::element e;
  EK_RETURN_IF_ERROR(Field(key, &e));
  if (e.is_null()) {
    *out = std::nullopt;
    return Status::Ok();
  }
  double d = 0;
  EK_RETURN_IF_ERROR(Num(key, &d));
  *out = d;
  return Status::Ok();
}

Status JsonFields::OptNumOrNull(std::string_view key, std::optional<double>* out) const {
  if (!Has(key)) {
    *out = std::nullopt;
    return Status::Ok();
  }
  return NumOrNull(key, out);
}

Status JsonFields::StrList(std::string_view key, std::vector<std::string>* out) const {
  simdjson::dom::array a;
  EK_RETURN_IF_ERROR(Array(key, &a));
  out->clear();
  size_t i = 0;
  for (simdjson::dom::element e : a) {
    std::string_view v;
    if (e.get(v)) return Err(fmt::format("{}[{}]", key, i), "not a string");
    out->emplace_back(v);
    ++i;
  }
  return Status::Ok();
}

Status JsonFields::IntList(std::string_view key, int64_t lo, int64_t hi,
                           std::vector<int64_t>* out) const {
  simdjson::dom::array a;
  EK_RETURN_IF_ERROR(Array(key, &a));
  out->clear();
  size_t i = 0;
  for (simdjson::dom::element e : a) {
    int64_t v;
    if (e.get(v)) return Err(fmt::format("{}[{}]", key, i), "not an integer");
    if (v < lo || v > hi)
      return Err(fmt::format("{}[{}]", key, i),
                 fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    out->push_back(v);
    ++i;
  }
  return Status::Ok();
}

std::vector<std::string_view> JsonFields::Keys() const {
  std::vector<std::string_view> keys;
  simdjson::dom::object o;
  if (obj_.get(o)) return keys;
  for (auto [k, v] : o) keys.push_back(k);
  return keys;
}

Result<JsonFields> JsonFields::Item(simdjson::dom::element e, std::string_view array_key,
                                    size_t index) const {
  std::string where = fmt::format("{}[{}]", Where(array_key), index);
  if (!e.is_object()) return CorruptError(fmt::format("{}: {}: not an object", file_, where));
  return JsonFields(e, file_, where);
}

bool JsonFields::AbsentOrNull(std::string_view key) const {
  simdjson::dom::element e;
  return !Field(key, &e).ok() || e.is_null();
}

Result<JsonFields> JsonDocument::Parse(std::string_view json, std::string name) {
  simdjson::dom::element root;
  if (parser_.parse(json.data(), json.size()).get(root)) {
    return CorruptError(fmt::format("{}: malformed JSON: {}", name, LocateJsonError(json)));
  }
  return JsonFields::Root(root, std::move(name));
}

}  // namespace ek
