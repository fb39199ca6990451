#include "flightrec/json_reader.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <bit>
#include <vector>

namespace ek::flightrec {

namespace {

constexpr int kMaxDepth = 64;

Result<NodeId> Convert(simdjson::dom::element e, Document* doc, int depth) {
  if (depth > kMaxDepth) return CorruptError("JSON nested too deeply");
  switch (e.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      return doc->AddScalar(Kind::kNone, 0);
    case simdjson::dom::element_type::BOOL:
      return doc->AddScalar(Kind::kBool, bool(e.get_bool()) ? 1 : 0);
    case simdjson::dom::element_type::INT64:
      return doc->AddScalar(Kind::kInt, static_cast<uint64_t>(int64_t(e.get_int64())));
    case simdjson::dom::element_type::UINT64: {
      uint64_t v = e.get_uint64();
      if (v > uint64_t{INT64_MAX}) return CorruptError("JSON integer does not fit in 64 bits");
      return doc->AddScalar(Kind::kInt, v);
    }
    case simdjson::dom::element_type::DOUBLE:
      return doc->AddScalar(Kind::kFloat, std::bit_cast<uint64_t>(double(e.get_double())));
    case simdjson::dom::element_type::STRING:
      return doc->AddString(std::string_view(e.get_string()));
    case simdjson::dom::element_type::ARRAY: {
      std::vector<NodeId> items;
      for (simdjson::dom::element x : e.get_array()) {
        EK_ASSIGN_OR_RETURN(NodeId id, Convert(x, doc, depth + 1));
        items.push_back(id);
      }
      NodeId list = doc->AddContainer(Kind::kList);
      doc->Extend(list, items);
      return list;
    }
    case simdjson::dom::element_type::OBJECT: {
      std::vector<NodeId> items;
      for (simdjson::dom::key_value_pair kv : e.get_object()) {
        items.push_back(doc->AddString(kv.key));
        EK_ASSIGN_OR_RETURN(NodeId id, Convert(kv.value, doc, depth + 1));
        items.push_back(id);
      }
      NodeId dict = doc->AddContainer(Kind::kDict);
      doc->Extend(dict, items);
      return dict;
    }
  }
  return CorruptError("unknown JSON value");
}

}  // namespace

Result<Document> ParseJson(std::string_view data) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(data);
  simdjson::dom::element root;
  auto err = parser.parse(padded).get(root);
  if (err) return CorruptError(fmt::format("invalid JSON: {}", simdjson::error_message(err)));
  Document doc;
  doc.Reserve(data.size() / 8 + 16, data.size() / 2 + 16);
  EK_ASSIGN_OR_RETURN(NodeId id, Convert(root, &doc, 0));
  doc.set_root(id);
  return doc;
}

}  // namespace ek::flightrec
