// Arrow columns as JSON: which types have a JSON form, and a writer per column that
// turns a record batch's rows into JSON objects (arrow_source.cc's record sources).
// Internal to ingest; only built where Arrow C++ is found.
//
// A row becomes the JSON object of its columns, in schema order, written by core's
// JsonWriter: strings (string, large_string, string_view, dictionary-encoded) as
// strings, with their bytes as stored (the packer's UTF-8 check and --invalid-utf8
// apply to them as to JSON lines); integers of any width; float16/32/64 in JsonWriter's
// shortest round-trip form, NaN and infinities as null (JSON has no spelling for them;
// `datasets`' to_json writes them as NaN, which no strict reader takes); bool; null;
// lists (list, large_list, fixed_size_list, list_view) as arrays; structs as objects;
// maps with string keys as objects. Every other type (binary, timestamps, dates,
// decimals, unions, extension types) is refused when the file is opened, before any
// row, naming the file, the column's path and its type, with the `datasets` call that
// gets past it: packing reads text, and a guessed rendering of a timestamp or of bytes
// is a silent choice no user asked for.
#pragma once

#include <arrow/array.h>
#include <arrow/type.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/json_out.h"
#include "core/status.h"

namespace ek::ingest {

// Refuses a schema with a column that has no JSON form, naming `file`, the column's path
// and type, and the `datasets` call that gets past it.
Status CheckSchema(const arrow::Schema& schema, const std::string& file);

// Writes element i of one array as JSON. Built for a batch's arrays (the types are
// fixed, so the dispatch on type happens once per batch, not per cell). Each cell holds
// a reference to its array (a child that a parent array hands out may be a fresh object).
class Cell {
 public:
  virtual ~Cell() = default;
  virtual void Write(int64_t i, JsonWriter* w) const = 0;
};

using ArrayPtr = std::shared_ptr<arrow::Array>;
// A column's cell writer; only for a schema CheckSchema accepts.
std::unique_ptr<Cell> MakeCell(const ArrayPtr& array);

}  // namespace ek::ingest
