// Byte-level BPE model: vocabulary over raw bytes and ranked merges, with the
// merge order of Hugging Face tokenizers (lowest rank first, leftmost among
// equal ranks; models/bpe/word.rs merge_all).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/huge_pages.h"
#include "core/status.h"

namespace ek::tokenize {

// A Bloom filter of 2^21 bits (256 KB: it stays in the L2 cache, where the
// megabyte tables it stands in front of do not), two bits a key, taken from a
// 64-bit hash's top 21 bits and its bits 20..40. No false "absent". With 2^20
// bits, Llama 3's 280,000 merges let 17% of the pairs with no merge through to
// the table, 400,000 needless probes over the 50 MB corpus; with 2^21, about 5%
// (the one-core encoder 3% faster; a third bit a key was level).
class Bloom {
 public:
  void Reset() { words_.assign(size_t{1} << (kBits - 6), 0); }
  void Add(uint64_t h) {
    words_[A(h) >> 6] |= uint64_t{1} << (A(h) & 63);
    words_[B(h) >> 6] |= uint64_t{1} << (B(h) & 63);
  }
  bool MayHold(uint64_t h) const {
    return ((words_[A(h) >> 6] >> (A(h) & 63)) & (words_[B(h) >> 6] >> (B(h) & 63)) & 1) != 0;
  }

 private:
  static constexpr int kBits = 21;
  static uint64_t A(uint64_t h) { return h >> (64 - kBits); }
  static uint64_t B(uint64_t h) { return (h >> 20) & ((uint64_t{1} << kBits) - 1); }
  std::vector<uint64_t> words_;
};

// Open-addressing map from byte strings to ids; keys live in a caller-owned
// table of strings indexed by id. Immutable after building: thread-safe reads.
class BytesToId {
 public:
  void Build(const std::vector<std::string>& keys_by_id, const std::vector<bool>& present);
  // Returns the id, or -1.
  int32_t Find(std::string_view key) const;
  // No two present keys are equal (Build saw none repeated): an id whose key
  // equals `key` is then Find(key), with no lookup.
  bool keys_unique() const { return keys_unique_; }

 private:
  struct Slot {
    uint64_t hash;
    int32_t id;  // -1: empty
  };
  std::vector<Slot, HugeFriendlyAllocator<Slot>> slots_;
  uint64_t mask_ = 0;
  // Over the keys' hashes. Most keys looked up once the tokenizer is loaded are
  // absent (Llama 3's ignore_merges asks for every piece the piece cache
  // misses; about nine in ten are no token), and most of those end here, not at
  // a slot in memory.
  Bloom bloom_;
  const std::vector<std::string>* keys_ = nullptr;
  bool keys_unique_ = true;
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
  // The two halves of Init, for a loader that resolves merges through Find().
  // `byte_level`: every byte must be a token (EncodeWord starts from them);
  // otherwise the tokens are texts (SentencePiece-style vocabularies) and the
  // caller gives the first symbols to MergeSymbols.
  Status InitVocab(std::vector<std::string> tokens, std::vector<bool> present, bool ignore_merges,
                   bool byte_level = true);
  Status InitMerges(std::span<const std::pair<int32_t, int32_t>> merges);

  // Appends the ids of one pre-tokenized piece (non-empty raw bytes). `not_a_key`: the
  // caller knows the word is no vocabulary key (ignore_merges then needs no lookup).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out, BpeScratch* scratch,
                  bool not_a_key = false) const;
  // Merges the `n` >= 1 ids in scratch->sym (the word's first symbols) by rank
  // and appends the result: EncodeWord's second half.
  void MergeSymbols(size_t n, std::vector<int32_t>* out, BpeScratch* scratch) const;

  // The plain path, for differential tests: words start from their bytes (no
  // atoms) and every merge goes through the heap, HF's merge_all order.
  void UsePlainPath() { plain_ = true; }

  int32_t Find(std::string_view bytes) const { return vocab_.Find(bytes); }
  // The token of one byte (a byte-level vocabulary's: InitVocab checked each).
  int32_t ByteId(unsigned char b) const { return byte_id_[b]; }
  const std::string& TokenBytes(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  bool HasId(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < present_.size() &&
           present_[static_cast<size_t>(id)];
  }
  size_t id_limit() const { return tokens_.size(); }
  size_t vocab_count() const { return vocab_count_; }
  size_t merge_count() const { return merge_count_; }
  // The merge table holds codes (8-byte slots: merged ids never fall with the rank).
  bool merge_codes() const { return code_shift_ >= 0; }
  // A word that is a vocabulary key is that one token (HF's ignore_merges).
  bool ignore_merges() const { return ignore_merges_; }
  // No two vocabulary entries have the same bytes (then Find(TokenBytes(id)) == id).
  bool keys_unique() const { return vocab_.keys_unique(); }

 private:
  static constexpr uint32_t kNoMerge = 0xFFFFFFFFu;
  // The order of merging (left, right), or kNoMerge: what merges are compared
  // by, lower first. It is the merge's rank, or with 8-byte slots its code
  // (code_shift_), which sorts as the rank does. Pairs of single bytes, the
  // first merges of every word, come from a dense 512 KB table.
  uint32_t Rank(int32_t left, int32_t right) const {
    int32_t merged;
    return RankMerged(left, right, &merged);
  }
  // Rank, and (when there is a merge) the merged token's id, which the table's
  // slot holds beside the pair, or its code: one memory access for both.
  uint32_t RankMerged(int32_t left, int32_t right, int32_t* merged) const {
    if (left < 256 && right < 256 && byte_pair_dense_) {
      const size_t at = (static_cast<size_t>(left) << 8) | static_cast<size_t>(right);
      if (code_shift_ >= 0) {
        const uint32_t code = byte_pair_code_[at];
        *merged = static_cast<int32_t>(code >> code_shift_);  // (no merge: unused)
        return code;
      }
      const uint64_t e = byte_pair_rank_[at];
      *merged = static_cast<int32_t>(e >> 32);
      return static_cast<uint32_t>(e);
    }
    const uint64_t key = PairKey(left, right);
    uint64_t mixed = key * 0x9E3779B97F4A7C15ull;
    if (!bloom_.MayHold(mixed)) return kNoMerge;
    uint64_t h = mixed >> shift_;
    if (code_shift_ >= 0) {  // pair and code only: the merged id is the code's top bits
      while (true) {
        const uint64_t e = pair_codes_[h];
        if ((e & kKeyMask) == key) {
          const auto code = static_cast<uint32_t>(e >> (2 * kIdBits));
          *merged = static_cast<int32_t>(code >> code_shift_);
          return code;
        }
        if (e == kEmptySlot) return kNoMerge;
        h = (h + 1) & merge_mask_;
      }
    }
    while (true) {
      const MergeSlot& slot = merge_slots_[h];
      if ((slot.pair_rank & kKeyMask) == key) {
        *merged = slot.merged;
        return static_cast<uint32_t>(slot.pair_rank >> (2 * kIdBits));
      }
      if (slot.pair_rank == kEmptySlot) return kNoMerge;
      h = (h + 1) & merge_mask_;
    }
  }
  // Starts loading the merge slot where the pair (left, right) is first looked
  // for (pairs of byte tokens need none: their table is small and hot).
  void PrefetchPair(int32_t left, int32_t right) const {
    const uint64_t h = (PairKey(left, right) * 0x9E3779B97F4A7C15ull) >> shift_;
    if (code_shift_ >= 0) {
      __builtin_prefetch(pair_codes_.data() + h);
    } else {
      __builtin_prefetch(merge_slots_.data() + h);
    }
  }
  void MergeShort(size_t n, std::vector<int32_t>* out, BpeScratch* s) const;
  void MergeLong(size_t n, std::vector<int32_t>* out, BpeScratch* s) const;
  // The word's first symbols: its bytes, except that a character whose token
  // provably forms before any merge joins it to a neighbour starts as that
  // token (atoms_). Returns the count, in scratch->sym.
  size_t FirstSymbols(std::string_view word, BpeScratch* s) const;
  // Fills atoms_ (byte-level vocabularies, after the merges are known);
  // order_by_rank: each merge's order (Rank's value).
  void BuildAtoms(std::span<const std::pair<int32_t, int32_t>> merges,
                  std::span<const uint32_t> order_by_rank);

  // A merge slot packs left id, right id (20 bits each) and rank or code (24 bits).
  static constexpr int kIdBits = 20;
  static constexpr uint64_t kKeyMask = (1ull << (2 * kIdBits)) - 1;
  static constexpr uint64_t kEmptySlot = ~0ull;
  // A slot's pair bits: left id above right id.
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(left) << kIdBits) | static_cast<uint64_t>(right);
  }
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  BytesToId vocab_;
  int32_t byte_id_[256];
  struct MergeSlot {
    uint64_t pair_rank = kEmptySlot;
    int32_t merged = -1;
    int32_t unused = 0;
  };
  std::vector<MergeSlot, HugeFriendlyAllocator<MergeSlot>> merge_slots_;
  // Over the merge pairs' mixed keys (InitMerges fills it): most pairs a word
  // looks up have no merge, and most of those end here.
  Bloom bloom_;
  // When the merged ids never decrease with the rank (every merge of Qwen2/3,
  // Llama 3, DeepSeek: tokens in merge order after the 256 bytes, some made by
  // more than one merge), merge_slots_ is empty and pair_codes_ holds each
  // slot's pair and code: 8 bytes, not 16, so the table (probed at random by
  // every merge of a word the piece cache misses: 4 MB for Llama 3, not 8)
  // takes half the cache lines. A merge's code is its merged id shifted left by
  // code_shift_, plus how many merges of lower rank make the same token: it
  // sorts as the rank does, and its top bits are the merged id. Else -1.
  std::vector<uint64_t, HugeFriendlyAllocator<uint64_t>> pair_codes_;
  int code_shift_ = -1;
  std::vector<uint64_t> byte_pair_rank_;  // rank | merged id << 32
  // With codes, the byte pairs' table holds the code alone (the merged id is its
  // top bits): 256 KB, not 512, of the L2 cache the merge of a missed piece reads.
  std::vector<uint32_t> byte_pair_code_;
  // Atoms: for each code point below U+10000 encoded in 2 or 3 bytes, the id of
  // its one-token form when that token is certain to form first (BuildAtoms
  // says when), else -1. Empty when no character qualifies.
  std::vector<int32_t> atoms_;
  bool byte_pair_dense_ = false;
  uint64_t merge_mask_ = 0;
  int shift_ = 64;
  bool ignore_merges_ = false;
  bool plain_ = false;
  size_t vocab_count_ = 0;
  size_t merge_count_ = 0;
};

}  // namespace ek::tokenize
