// Small, allocation-friendly helpers for writing JSON. Parsing uses simdjson.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
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
// (the launch records, docs/launch.md); kCompact neither.
//
//   JsonWriter w(JsonWriter::kSpaced);
//   w.BeginObject().Key("rank").Int(3).Key("time").Fixed(t, 3).EndObject();
//   WriteRecord(path, w.Line());  // "{"rank": 3, "time": 12.500}\n"
//
// Numbers: Int/Uint as decimals; Fixed(v, n) as fmt's "{:.nf}"; Double(v) as
// fmt's "{}" (the shortest form that reads back as v: 0.1, 1e+21, 80000000000;
// NaN and infinities as fmt spells them, not JSON). Raw(json) puts in a value
// written elsewhere (another record's writer, a number in a format of its own),
// trailing newlines dropped. Nesting is the caller's to balance: a writer used
// out of order writes what it is told (tests pin the bytes of every record).
//
// Layout kLines opens a container whose members each start a line, indented two
// spaces a level, with the closer on a line of its own at the container's level
// (an empty one stays {} or []): the documents people read, the pack and
// checkpoint manifests and the gate log:
//
//   {
//     "seq_len": 2048,
//     "ranks": [
//       {"rank": 0, "blocks": 3}
//     ]
//   }
class JsonWriter {
 public:
  enum Style { kCompact, kSpaced };
  enum Layout { kInline, kLines };
  explicit JsonWriter(Style style = kCompact) : spaced_(style == kSpaced) {}

  JsonWriter& BeginObject(Layout layout = kInline) { return Open('{', layout); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray(Layout layout = kInline) { return Open('[', layout); }
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
  // [a,b,c] of a range of integers (Int, or Uint for an unsigned type) or of strings.
  template <class Range>
  JsonWriter& IntArray(const Range& values) {
    BeginArray();
    for (const auto& v : values) {
      if constexpr (std::is_unsigned_v<std::decay_t<decltype(v)>>)
        Uint(v);
      else
        Int(v);
    }
    return EndArray();
  }
  template <class Range>
  JsonWriter& StrArray(const Range& values) {
    BeginArray();
    for (const auto& v : values) Str(v);
    return EndArray();
  }

  // Empties the writer for the next document, keeping its buffer's capacity (a
  // writer reused for many records allocates once, not per record or batch).
  void Clear() {
    out_.clear();
    levels_.clear();
    after_key_ = false;
  }

  const std::string& str() const { return out_; }
  // The record as a file holds it: the JSON and one '\n'.
  std::string Line() const { return out_ + "\n"; }

 private:
  struct Level {  // one per open object or array
    bool has_items = false;
    bool lines = false;  // Layout kLines
  };
  JsonWriter& Open(char c, Layout layout);
  JsonWriter& Close(char c);
  // Before a value or a key: the comma, unless first or after a key; in a kLines
  // container, the line break and indent.
  void Separate();
  void NewLine(size_t depth);
  std::string out_;
  std::vector<Level> levels_;
  bool spaced_ = false;
  bool after_key_ = false;
};

// "0-2,4-15": sorted, deduplicated integers as compact ranges.
std::string CompactRanges(std::vector<int64_t> values);

}  // namespace ek
