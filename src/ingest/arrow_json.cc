#include "ingest/arrow_json.h"

#include <arrow/util/float16.h>
#include <fmt/format.h>

#include <cmath>
#include <string_view>

namespace ek::ingest {
namespace {

// --- types: which have a JSON form ------------------------------------------------

// "" when `type` (at column path `path`) and everything inside it has a JSON form;
// otherwise the path and type of the first part that has none.
std::string FirstUnjsonable(const arrow::DataType& type, const std::string& path) {
  using arrow::Type;
  switch (type.id()) {
    case Type::NA:
    case Type::BOOL:
    case Type::INT8:
    case Type::INT16:
    case Type::INT32:
    case Type::INT64:
    case Type::UINT8:
    case Type::UINT16:
    case Type::UINT32:
    case Type::UINT64:
    case Type::HALF_FLOAT:
    case Type::FLOAT:
    case Type::DOUBLE:
    case Type::STRING:
    case Type::LARGE_STRING:
    case Type::STRING_VIEW:
      return "";
    case Type::LIST:
    case Type::LARGE_LIST:
    case Type::FIXED_SIZE_LIST:
    case Type::LIST_VIEW:
    case Type::LARGE_LIST_VIEW:
      return FirstUnjsonable(*type.field(0)->type(), path + "[]");
    case Type::STRUCT: {
      for (const auto& f : type.fields()) {
        std::string bad = FirstUnjsonable(*f->type(), path + "." + f->name());
        if (!bad.empty()) return bad;
      }
      return "";
    }
    case Type::MAP: {
      const auto& map = static_cast<const arrow::MapType&>(type);
      const Type::type key = map.key_type()->id();
      if (key != Type::STRING && key != Type::LARGE_STRING && key != Type::STRING_VIEW)
        return fmt::format("\"{}\" (a map with {} keys; JSON objects have string keys)", path,
                           map.key_type()->ToString());
      return FirstUnjsonable(*map.item_type(), path + "{}");
    }
    case Type::DICTIONARY:
      return FirstUnjsonable(*static_cast<const arrow::DictionaryType&>(type).value_type(), path);
    default:
      break;
  }
  return fmt::format("\"{}\" ({})", path, type.ToString());
}

// --- cells: one writer per column, built once per record batch -----------------------

// The array, kept alive and cast once to its type.
template <class A>
class Typed {
 public:
  explicit Typed(ArrayPtr a) : keep_(std::move(a)), a_(static_cast<const A&>(*keep_)) {}
  const A& operator*() const { return a_; }
  const A* operator->() const { return &a_; }

 private:
  ArrayPtr keep_;
  const A& a_;
};

class NullCell final : public Cell {
 public:
  void Write(int64_t, JsonWriter* w) const override { w->Null(); }
};

template <class A>
class StrCell final : public Cell {
 public:
  explicit StrCell(ArrayPtr a) : a_(std::move(a)) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i))
      w->Null();
    else
      w->Str(std::string_view(a_->GetView(i)));
  }

 private:
  Typed<A> a_;
};

template <class A>
class IntCell final : public Cell {
 public:
  explicit IntCell(ArrayPtr a) : a_(std::move(a)) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i)) {
      w->Null();
    } else {
      const auto v = a_->Value(i);
      if constexpr (std::is_unsigned_v<decltype(v)>)
        w->Uint(v);
      else
        w->Int(v);
    }
  }

 private:
  Typed<A> a_;
};

void WriteDouble(double v, JsonWriter* w) {
  if (std::isfinite(v))
    w->Double(v);
  else
    w->Null();
}

template <class A>
class FloatCell final : public Cell {
 public:
  explicit FloatCell(ArrayPtr a) : a_(std::move(a)) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i))
      w->Null();
    else
      WriteDouble(static_cast<double>(a_->Value(i)), w);
  }

 private:
  Typed<A> a_;
};

class HalfCell final : public Cell {
 public:
  explicit HalfCell(ArrayPtr a) : a_(std::move(a)) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i))
      w->Null();
    else
      WriteDouble(arrow::util::Float16::FromBits(a_->Value(i)).ToDouble(), w);
  }

 private:
  Typed<arrow::HalfFloatArray> a_;
};

class BoolCell final : public Cell {
 public:
  explicit BoolCell(ArrayPtr a) : a_(std::move(a)) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i))
      w->Null();
    else
      w->Bool(a_->Value(i));
  }

 private:
  Typed<arrow::BooleanArray> a_;
};

// list, large_list, fixed_size_list, list_view, large_list_view: value_offset and
// value_length index the (unsliced) child array.
template <class A>
class ListCell final : public Cell {
 public:
  explicit ListCell(ArrayPtr a) : a_(std::move(a)), values_(MakeCell(a_->values())) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i)) {
      w->Null();
      return;
    }
    const int64_t begin = a_->value_offset(i), end = begin + a_->value_length(i);
    w->BeginArray();
    for (int64_t j = begin; j < end; ++j) values_->Write(j, w);
    w->EndArray();
  }

 private:
  Typed<A> a_;
  std::unique_ptr<Cell> values_;
};

class StructCell final : public Cell {
 public:
  explicit StructCell(ArrayPtr a) : a_(std::move(a)) {
    const auto& type = *a_->struct_type();
    for (int k = 0; k < type.num_fields(); ++k) {
      names_.push_back(type.field(k)->name());
      // field(k) carries the struct's own offset, so it is indexed like the struct.
      fields_.push_back(MakeCell(a_->field(k)));
    }
  }
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i)) {
      w->Null();
      return;
    }
    w->BeginObject();
    for (size_t k = 0; k < fields_.size(); ++k) {
      w->Key(names_[k]);
      fields_[k]->Write(i, w);
    }
    w->EndObject();
  }

 private:
  Typed<arrow::StructArray> a_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Cell>> fields_;
};

std::string_view KeyAt(const arrow::Array& keys, int64_t j) {
  switch (keys.type_id()) {
    case arrow::Type::LARGE_STRING:
      return static_cast<const arrow::LargeStringArray&>(keys).GetView(j);
    case arrow::Type::STRING_VIEW:
      return static_cast<const arrow::StringViewArray&>(keys).GetView(j);
    default:
      return static_cast<const arrow::StringArray&>(keys).GetView(j);
  }
}

// map<string, T>: an object, entries in stored order (Arrow's map keys are never null).
class MapCell final : public Cell {
 public:
  explicit MapCell(ArrayPtr a)
      : a_(std::move(a)), keys_(a_->keys()), items_(MakeCell(a_->items())) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i)) {
      w->Null();
      return;
    }
    const int64_t begin = a_->value_offset(i), end = begin + a_->value_length(i);
    w->BeginObject();
    for (int64_t j = begin; j < end; ++j) {
      w->Key(KeyAt(*keys_, j));
      items_->Write(j, w);
    }
    w->EndObject();
  }

 private:
  Typed<arrow::MapArray> a_;
  ArrayPtr keys_;
  std::unique_ptr<Cell> items_;
};

class DictCell final : public Cell {
 public:
  explicit DictCell(ArrayPtr a) : a_(std::move(a)), values_(MakeCell(a_->dictionary())) {}
  void Write(int64_t i, JsonWriter* w) const override {
    if (a_->IsNull(i))
      w->Null();
    else
      values_->Write(a_->GetValueIndex(i), w);
  }

 private:
  Typed<arrow::DictionaryArray> a_;
  std::unique_ptr<Cell> values_;
};

}  // namespace

Status CheckSchema(const arrow::Schema& schema, const std::string& file) {
  for (const auto& f : schema.fields()) {
    std::string bad = FirstUnjsonable(*f->type(), f->name());
    if (bad.empty()) continue;
    return UnsupportedError(fmt::format(
        "{}: column {} has no JSON form (evenkeel reads strings, numbers, booleans, nulls, "
        "lists, structs and string-keyed maps): drop the column "
        "(Dataset.remove_columns([\"{}\"])) or cast it to a string (Dataset.cast_column) "
        "and save the dataset again",
        file, bad, f->name()));
  }
  return Status::Ok();
}

// Only for types FirstUnjsonable accepts (checked when the file was opened).
std::unique_ptr<Cell> MakeCell(const ArrayPtr& a) {
  using arrow::Type;
  switch (a->type_id()) {
    case Type::BOOL:
      return std::make_unique<BoolCell>(a);
    case Type::INT8:
      return std::make_unique<IntCell<arrow::Int8Array>>(a);
    case Type::INT16:
      return std::make_unique<IntCell<arrow::Int16Array>>(a);
    case Type::INT32:
      return std::make_unique<IntCell<arrow::Int32Array>>(a);
    case Type::INT64:
      return std::make_unique<IntCell<arrow::Int64Array>>(a);
    case Type::UINT8:
      return std::make_unique<IntCell<arrow::UInt8Array>>(a);
    case Type::UINT16:
      return std::make_unique<IntCell<arrow::UInt16Array>>(a);
    case Type::UINT32:
      return std::make_unique<IntCell<arrow::UInt32Array>>(a);
    case Type::UINT64:
      return std::make_unique<IntCell<arrow::UInt64Array>>(a);
    case Type::HALF_FLOAT:
      return std::make_unique<HalfCell>(a);
    case Type::FLOAT:
      return std::make_unique<FloatCell<arrow::FloatArray>>(a);
    case Type::DOUBLE:
      return std::make_unique<FloatCell<arrow::DoubleArray>>(a);
    case Type::STRING:
      return std::make_unique<StrCell<arrow::StringArray>>(a);
    case Type::LARGE_STRING:
      return std::make_unique<StrCell<arrow::LargeStringArray>>(a);
    case Type::STRING_VIEW:
      return std::make_unique<StrCell<arrow::StringViewArray>>(a);
    case Type::LIST:
      return std::make_unique<ListCell<arrow::ListArray>>(a);
    case Type::LARGE_LIST:
      return std::make_unique<ListCell<arrow::LargeListArray>>(a);
    case Type::FIXED_SIZE_LIST:
      return std::make_unique<ListCell<arrow::FixedSizeListArray>>(a);
    case Type::LIST_VIEW:
      return std::make_unique<ListCell<arrow::ListViewArray>>(a);
    case Type::LARGE_LIST_VIEW:
      return std::make_unique<ListCell<arrow::LargeListViewArray>>(a);
    case Type::STRUCT:
      return std::make_unique<StructCell>(a);
    case Type::MAP:
      return std::make_unique<MapCell>(a);
    case Type::DICTIONARY:
      return std::make_unique<DictCell>(a);
    default:
      return std::make_unique<NullCell>();  // NA; nothing else passes CheckSchema
  }
}

}  // namespace ek::ingest
