// Byte-level BPE model: vocabulary over raw bytes and ranked merges, with the
// merge order of Hugging Face tokenizers (lowest rank first, leftmost among
// equal ranks; models/bpe/word.rs merge_all).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ek::tokenize {

// Open-addressing map from byte strings to ids; keys live in a caller-owned
// table of strings indexed by id. Immutable after building: thread-safe reads.
class BytesToId {
 public:
  void Build(const std::vector<std::string>& keys_by_id, const std::vector<bool>& present);
  // Returns the id, or -1.
  int32_t Find(std::string_view key) const;

 private:
  struct Slot {
    uint64_t hash;
    int32_t id;  // -1: empty
  };
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  const std::vector<std::string>* keys_ = nullptr;
};

// Per-thread working memory for BpeModel::EncodeWord; reuse it across calls.
struct BpeScratch {
  std::vector<int32_t> sym;
  std::vector<uint32_t> rank;
  std::vector<int32_t> merged;
  std::vector<int32_t> prev, next;
  std::vector<uint64_t> heap;  // (rank << 32 | pos), min-heap
};

class BpeModel {
 public:
  // `tokens` are raw byte strings indexed by id (empty + !present for holes);
  // merges are (left id, right id) pairs in rank order.
  Status Init(std::vector<std::string> tokens, std::vector<bool> present,
              const std::vector<std::pair<int32_t, int32_t>>& merges, bool ignore_merges);

  // Appends the ids of one pre-tokenized piece (non-empty raw bytes).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out, BpeScratch* scratch) const;

  int32_t Find(std::string_view bytes) const { return vocab_.Find(bytes); }
  const std::string& TokenBytes(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  bool HasId(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < present_.size() && present_[static_cast<size_t>(id)];
  }
  size_t id_limit() const { return tokens_.size(); }
  size_t vocab_count() const { return vocab_count_; }
  size_t merge_count() const { return merge_count_; }

 private:
  // rank << 32 | merged id for the pair, or ~0 when the pair never merges.
  uint64_t LookupMerge(int32_t left, int32_t right) const {
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
                   static_cast<uint32_t>(right);
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (true) {
      const MergeSlot& s = merge_slots_[h];
      if (s.key == key) return s.value;
      if (s.key == kEmptyKey) return ~0ull;
      h = (h + 1) & merge_mask_;
    }
  }
  void MergeShort(size_t n, std::vector<int32_t>* out, BpeScratch* s) const;
  void MergeLong(size_t n, std::vector<int32_t>* out, BpeScratch* s) const;

  static constexpr uint64_t kEmptyKey = ~0ull;
  struct MergeSlot {
    uint64_t key;
    uint64_t value;
  };
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  BytesToId vocab_;
  int32_t byte_id_[256];
  std::vector<MergeSlot> merge_slots_;
  uint64_t merge_mask_ = 0;
  int shift_ = 64;
  bool ignore_merges_ = false;
  size_t vocab_count_ = 0;
  size_t merge_count_ = 0;
};

}  // namespace ek::tokenize
