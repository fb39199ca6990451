#include "flightrec/document.h"

#include <cstring>

namespace ek::flightrec {

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
  }
  return "?";
}

double Document::AsFloat(NodeId id) const {
  if (kind(id) == Kind::kInt) return static_cast<double>(AsInt(id));
  double d;
  std::memcpy(&d, &nodes_[id].payload, sizeof d);
  return d;
}

bool Document::Find(NodeId dict, std::string_view key, NodeId* value) const {
  auto kids = Children(dict);
  for (size_t i = 0; i + 1 < kids.size(); i += 2) {
    if (kind(kids[i]) == Kind::kString && AsString(kids[i]) == key) {
      *value = kids[i + 1];
      return true;
    }
  }
  return false;
}

NodeId Document::AddScalar(Kind kind, uint64_t payload) {
  nodes_.push_back({kind, 0, payload});
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Document::AddString(std::string_view s) {
  nodes_.push_back({Kind::kString, static_cast<uint32_t>(s.size()), text_.size()});
  text_.append(s);
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Document::AddContainer(Kind kind) {
  nodes_.push_back({kind, 0, kids_.size()});
  return static_cast<NodeId>(nodes_.size() - 1);
}

void Document::Extend(NodeId id, std::span<const NodeId> items) {
  if (items.empty()) return;
  Node& n = nodes_[id];
  size_t width = n.kind == Kind::kDict ? 2 : 1;
  size_t have = n.size * width;
  if (n.payload + have != kids_.size()) {
    // Not at the end (a second SETITEMS/APPENDS batch after other containers
    // closed): move the existing items to the end first.
    std::vector<NodeId> old(kids_.begin() + n.payload, kids_.begin() + n.payload + have);
    n.payload = kids_.size();
    kids_.insert(kids_.end(), old.begin(), old.end());
  }
  kids_.insert(kids_.end(), items.begin(), items.end());
  n.size = static_cast<uint32_t>((have + items.size()) / width);
}

void Document::Reserve(size_t nodes, size_t text) {
  nodes_.reserve(nodes);
  kids_.reserve(nodes);
  text_.reserve(text);
}

}  // namespace ek::flightrec
