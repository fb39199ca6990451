// Small, allocation-friendly helpers for writing JSON. Parsing uses simdjson.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ek {

// Appends `s` as a quoted JSON string. `s` must be valid UTF-8; control
// characters, '"' and '\\' are escaped, everything else is copied as is.
void AppendJsonString(std::string* out, std::string_view s);
std::string JsonString(std::string_view s);

// Appends the decimal form of v (fast path for token ids and counters).
void AppendInt(std::string* out, int64_t v);

// Appends "[a,b,c]".
void AppendIntArray(std::string* out, const int32_t* v, size_t n);

// The one writer of evenkeel's JSON records: objects and arrays with the commas
// placed for the caller, keys in the order written, strings escaped by
// AppendJsonString. kSpaced writes ", " between members and ": " after a key
// (the launch records, docs/launch.md); kCompact neither; kIndented writes each
// member on a line of its own, two spaces a level, as Python's
// json.dumps(indent=2) does (files people read and edit: a triage profile).
//
//   JsonWriter w(JsonWriter::kSpaced);
//   w.BeginObject().Key("rank").Int(3).Key("time").Fixed(t, 3).EndObject();
//   WriteRecord(path, w.Line());  // "{"rank": 3, "time": 12.500}\n"
//
// Numbers: Int/Uint as decimals; Fixed(v, n) as fmt's "{:.nf}"; Double(v) as
// fmt's "{}" (the shortest form that reads back as v: 0.1, 1e-07, 52345.5).
// Neither spells NaN or infinity as JSON: a caller that may hold one writes Null. Raw(json) puts
// in a value written elsewhere (another record's writer), trailing newlines
// dropped. Nesting is the caller's to balance: a writer used out of order
// writes what it is told (tests pin the bytes of every record).
class JsonWriter {
 public:
  enum Style { kCompact, kSpaced, kIndented };
  explicit JsonWriter(Style style = kCompact) : style_(style) {}

  JsonWriter& BeginObject() { return Open('{'); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray() { return Open('['); }
  JsonWriter& EndArray() { return Close(']'); }
  // A member's key; the next call writes its value.
  JsonWriter& Key(std::string_view key);

  JsonWriter& Str(std::string_view v);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  JsonWriter& Fixed(double v, int decimals);
  JsonWriter& Double(double v);
  JsonWriter& Raw(std::string_view json);

  const std::string& str() const { return out_; }
  // The record as a file holds it: the JSON and one '\n'.
  std::string Line() const { return out_ + "\n"; }

 private:
  JsonWriter& Open(char c);
  JsonWriter& Close(char c);
  void Separate();  // before a value or a key: the comma, unless first or after a key
  void NewLine();   // kIndented: a line break and the indent of the open containers
  std::string out_;
  std::vector<bool> has_items_;  // one per open object or array
  Style style_;
  bool after_key_ = false;
};

// "0-2,4-15": sorted, deduplicated integers as compact ranges.
std::string CompactRanges(std::vector<int64_t> values);

}  // namespace ek
