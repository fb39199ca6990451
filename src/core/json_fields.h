// Strict reading of a JSON object's fields, shared by every evenkeel format
// (pack and checkpoint manifests, gate parts, heartbeats, /status, launch
// records): a missing required field or a field of the wrong type is an error
// naming the file and the field's path ("manifest.json: ranks[3].blocks: not a
// non-negative integer"), never a silent 0. Optional fields may be absent;
// present, they are checked like required ones.
//
// Views into the simdjson document: the parser that produced it must outlive
// the JsonFields and the elements it returns.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ek {

class JsonFields;

// A parsed JSON document that JsonFields read: holds the parser's memory, so
// it must outlive the readers it hands out.
class JsonDocument {
 public:
  // The root object of `json`, read as `name`. Malformed JSON is Corrupt
  // ("NAME: malformed JSON: line L, column C: ..."); a root that is not an
  // object is Corrupt too.
  Result<JsonFields> Parse(std::string_view json, std::string name);

 private:
  simdjson::dom::parser parser_;
};

class JsonFields {
 public:
  // `obj` must be an object (see Root); `file` starts every error; `path` is
  // this object's place in the document ("" at the top, "ranks[3]" inside).
  JsonFields(simdjson::dom::element obj, std::string file, std::string path = "");
  // The document's top level, or an error when it is not an object.
  static Result<JsonFields> Root(simdjson::dom::element root, std::string file);

  bool Has(std::string_view key) const;
  // True when `key` is absent or null (Python's None).
  bool AbsentOrNull(std::string_view key) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  simdjson::dom::element element() const { return obj_; }

  Status Str(std::string_view key, std::string* out) const;
  Status Int(std::string_view key, int64_t lo, int64_t hi, int64_t* out) const;
  // An integer of type I within [lo, hi].
  template <typename I>
  Status IntIn(std::string_view key, int64_t lo, int64_t hi, I* out) const {
    int64_t v = 0;
    EK_RETURN_IF_ERROR(Int(key, lo, hi, &v));
    *out = static_cast<I>(v);
    return Status::Ok();
  }
  template <typename I>
  Status Int(std::string_view key, I* out) const {
    int64_t v = 0;
    EK_RETURN_IF_ERROR(
        Int(key, std::numeric_limits<I>::lowest(), std::numeric_limits<I>::max(), &v));
    *out = static_cast<I>(v);
    return Status::Ok();
  }
  Status U64(std::string_view key, uint64_t* out) const;
  Status Num(std::string_view key, double* out) const;  // an integer or a finite number
  Status Bool(std::string_view key, bool* out) const;
  Status Hex64(std::string_view key, uint64_t* out) const;  // "0123456789abcdef"
  Status Object(std::string_view key, JsonFields* out) const;
  Status Array(std::string_view key, simdjson::dom::array* out) const;

  // Absent: *out untouched, OK. Present: as the required form.
  Status OptStr(std::string_view key, std::string* out) const;
  template <typename I>
  Status OptInt(std::string_view key, I* out) const {
    return Has(key) ? Int(key, out) : Status::Ok();
  }
  Status OptNum(std::string_view key, double* out) const;
  Status OptBool(std::string_view key, bool* out) const;
  // A number or null (how evenkeel's writers spell NaN): null is nullopt.
  // Required: absent is an error; Opt: absent is nullopt too.
  Status NumOrNull(std::string_view key, std::optional<double>* out) const;
  Status OptNumOrNull(std::string_view key, std::optional<double>* out) const;

  // Arrays of one type; an element of another is an error naming it
  // ("hosts[2]: not a string").
  Status StrList(std::string_view key, std::vector<std::string>* out) const;
  Status IntList(std::string_view key, int64_t lo, int64_t hi, std::vector<int64_t>* out) const;
  // Calls `fn` with each object of the array `key`, in order, each named by its
  // path ("ranks[3]"); an element that is not an object, or fn's first error,
  // is the result.
  template <typename Fn>
  Status Objects(std::string_view key, Fn&& fn) const {
    simdjson::dom::array arr;
    EK_RETURN_IF_ERROR(Array(key, &arr));
    size_t i = 0;
    for (simdjson::dom::element e : arr) {
      EK_ASSIGN_OR_RETURN(JsonFields item, Item(e, key, i++));
      EK_RETURN_IF_ERROR(fn(item));
    }
    return Status::Ok();
  }
  // This object's keys in document order (a map's members: "rank_blocks").
  std::vector<std::string_view> Keys() const;

  // The element of an array at `index`, as fields ("ranks[3]").
  Result<JsonFields> Item(simdjson::dom::element e, std::string_view array_key, size_t index) const;
  Status Err(std::string_view key, std::string_view what) const;
  std::string Where(std::string_view key) const;

 private:
  Status Field(std::string_view key, simdjson::dom::element* out) const;
  simdjson::dom::element obj_;
  std::string file_, path_;
};

}  // namespace ek
