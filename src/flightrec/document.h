// A parsed dump before it is given meaning: a tree of None/bool/int/float/
// string/list/tuple/dict values, the common ground of the pickle and JSON
// readers. Nodes live in flat arrays (one allocation per array, not per value)
// because a 2,000-entry dump holds ~60,000 values and a job has 1,000 dumps.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ek::flightrec {

enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };

std::string_view KindName(Kind kind);

using NodeId = uint32_t;

// Immutable once built. A node may be referenced from several parents (pickle
// memo references), so the tree is a DAG; readers never mutate through it.
// Thread-compatible: one builder, then any number of readers.
class Document {
 public:
  Kind kind(NodeId id) const { return nodes_[id].kind; }
  bool AsBool(NodeId id) const { return nodes_[id].payload != 0; }
  int64_t AsInt(NodeId id) const { return static_cast<int64_t>(nodes_[id].payload); }
  double AsFloat(NodeId id) const;
  std::string_view AsString(NodeId id) const {
    return std::string_view(text_).substr(nodes_[id].payload, nodes_[id].size);
  }
  // Items of a list or tuple; for a dict, keys and values interleaved.
  std::span<const NodeId> Children(NodeId id) const {
    return {kids_.data() + nodes_[id].payload,
            nodes_[id].size * (kind(id) == Kind::kDict ? 2u : 1u)};
  }
  // Number of items (pairs for a dict).
  uint32_t Size(NodeId id) const { return nodes_[id].size; }
  // Linear search of a dict's keys for a string key; returns false if absent.
  bool Find(NodeId dict, std::string_view key, NodeId* value) const;
  NodeId root() const { return root_; }
  size_t node_count() const { return nodes_.size(); }

  // --- building (used by the readers) ---
  NodeId AddScalar(Kind kind, uint64_t payload);
  NodeId AddString(std::string_view s);
  NodeId AddContainer(Kind kind);
  // Appends `items` (pairs for a dict) to container `id`.
  void Extend(NodeId id, std::span<const NodeId> items);
  void set_root(NodeId id) { root_ = id; }
  // Empties the document but keeps its buffers, for reuse on the next file.
  void Clear() {
    nodes_.clear();
    kids_.clear();
    text_.clear();
    root_ = 0;
  }
  void Reserve(size_t nodes, size_t text);

 private:
  struct Node {
    Kind kind;
    uint32_t size;     // string length, or item count (pairs for a dict)
    uint64_t payload;  // bool/int bits, double bits, text offset, or kids offset
  };
  std::vector<Node> nodes_;
  std::vector<NodeId> kids_;
  std::string text_;
  NodeId root_ = 0;
};

}  // namespace ek::flightrec
