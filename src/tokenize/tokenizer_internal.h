// Shared by the tokenizer's sources (tokenizer.cc and tokenizer_pieces.cc:
// encoding; tokenizer_json.cc and sentencepiece_json.cc: the tokenizer.json
// loader) and nothing else: the steps a loaded tokenizer runs, the parts of
// the SentencePiece-style family, and the per-thread encoding state.
#pragma once

#include <simdjson.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/huge_pages.h"
#include "tokenize/normalizer.h"
#include "tokenize/pattern.h"
#include "tokenize/piece_decoder.h"
#include "tokenize/sentencepiece_bpe.h"
#include "tokenize/tokenizer.h"
#include "tokjson/document.h"

namespace ek::tokenize {

// ---------------------------------------------------------------------------
// Per-thread state: a cache from piece bytes to ids, and reusable buffers.
// Defined here (not in tokenizer.cc's anonymous namespace) because both
// families' encoders use them.

// A piece's key for the cache: its first 16 bytes as two little-endian words,
// zero past its end (with the length they tell keys of up to 16 bytes apart),
// and its hash.
static_assert(std::endian::native == std::endian::little);  // the masks keep a key's first bytes
struct PieceKey {
  uint64_t w0 = 0, w1 = 0;
  uint64_t hash = 0;
};

// Open-addressing cache of pre-tokenized pieces. Most pieces repeat (words,
// spaces, punctuation), so most skip BPE. A slot (32 bytes) holds the piece's
// length and first 16 bytes (PieceKey: for most pieces, the whole key, so a
// match is two compares) and, for a piece of up to 16 bytes and 3 tokens (on
// the 50 MB corpus, 94% of the pieces probed), its ids: a hit reads one slot
// and nothing else. Otherwise the slot holds the first id and the offset in the
// arena of the key past 16 bytes and then the ids. The hash of a key of up to
// 16 bytes is a multiply of its words. The table grows fourfold as it fills,
// from 2^16 to 2^20 slots (2, 8, 32 MB; 12 MB of mixed languages has about 190k
// distinct pieces, 50 MB 470k: growing twofold, the rehashes and the fresh pages
// of the tables between cost 5% of a 50 MB pass); only past that, or past kMaxArena bytes of keys
// and ids, is it cleared and started again: at most 64 MB a thread. Both live on huge pages where
// the kernel gives them (core/huge_pages.h): probes of a 32 MB table otherwise miss the TLB.
class PieceCache {
 public:
  static constexpr size_t kMaxKey = 96;
  static constexpr size_t kFirstCapacity = size_t{1} << 16;
  static constexpr size_t kMaxCapacity = size_t{1} << 20;
  static constexpr size_t kMaxArena = size_t{32} << 20;

  // The table's and the arena's largest sizes are reserved at once and grow in
  // place: address space only, until used. Memory first touched is slow to fault
  // in on virtual machines (with huge pages, most of all where freed memory goes
  // back to the host), and growing into new blocks touched 42 MB for a 32 MB table.
  // The table is fresh memory (MapZeroed): an empty slot is all zero bytes, so the part
  // of the table never used needs no clearing, first or when it grows into it.
  PieceCache()
      : table_(static_cast<Entry*>(MapZeroed(kMaxCapacity * sizeof(Entry)))),
        mask_(kFirstCapacity - 1) {
    arena_.reserve(kMaxArena);
  }
  ~PieceCache() { UnmapZeroed(table_, kMaxCapacity * sizeof(Entry)); }
  PieceCache(const PieceCache&) = delete;
  PieceCache& operator=(const PieceCache&) = delete;

  // The key of `key`. Where 16 bytes from its start can be read (up to
  // `readable_end`, the end of the text it is part of), a short key is two
  // loads and two masks, with no branch on its length: pieces' lengths vary
  // from one to the next, and branches on them mispredict.
  static PieceKey Key(std::string_view key, const char* readable_end = nullptr) {
    PieceKey k;
    const char* p = key.data();
    const size_t n = key.size();
    if (n > 16) {
      std::memcpy(&k.w0, p, 8);
      std::memcpy(&k.w1, p + 8, 8);
      k.hash = XXH3_64bits(p, n);
      return k;
    }
    uint64_t w0, w1;
    if (readable_end && readable_end - p >= 16) {
      std::memcpy(&w0, p, 8);
      std::memcpy(&w1, p + 8, 8);
    } else {
      char buf[16] = {};
      std::memcpy(buf, p, n);
      std::memcpy(&w0, buf, 8);
      std::memcpy(&w1, buf + 8, 8);
    }
    const size_t bits = 8 * n;
    k.w0 = w0 & (bits >= 64 ? ~0ull : ~(~0ull << bits));
    k.w1 = w1 & (bits >= 128 ? ~0ull : bits <= 64 ? 0 : ~(~0ull << (bits - 64)));
    k.hash = ShortHash(k.w0, k.w1, n);
    return k;
  }

  // Pieces cached (vocabulary entries HoldVocab put in included).
  size_t used() const { return used_; }
  // Puts in each (key, id) of `vocab` (keys of 2 to kMaxKey bytes, no two equal) as that
  // one id, where not cached already, and marks the cache as holding them: a key that is
  // not cached is then none of them. Clear() takes the mark away (the
  // caller fills it again). For a model whose vocabulary keys encode as themselves
  // (ignore_merges): a piece the cache misses needs no vocabulary lookup.
  // Returns false, with no mark, for a vocabulary that would leave too little room for
  // pieces (over a quarter of the largest table).
  bool HoldVocab(const std::vector<std::pair<std::string_view, int32_t>>& vocab) {
    if (vocab.size() * 4 > kMaxCapacity) return false;
    if ((used_ + vocab.size()) * 8 >= kMaxCapacity * 5 ||
        arena_.size() + 20 * vocab.size() > kMaxArena) {
      Clear();  // else Insert would clear it on the way
    }
    while (mask_ + 1 < kMaxCapacity && (used_ + vocab.size()) * 2 >= mask_ + 1) Grow();
    const uint64_t clears = clears_;
    constexpr size_t kChunk = 16;  // keys made and their slots fetched a chunk ahead
    PieceKey keys[kChunk];
    for (size_t base = 0; base < vocab.size(); base += kChunk) {
      const size_t n = std::min(kChunk, vocab.size() - base);
      for (size_t j = 0; j < n; ++j) {
        keys[j] = Key(vocab[base + j].first);
        Prefetch(keys[j].hash);
      }
      for (size_t j = 0; j < n; ++j) {
        const auto& [key, id] = vocab[base + j];
        if (!Has(key, keys[j])) Insert(key, keys[j], &id, 1);
      }
    }
    holds_vocab_ = clears == clears_;  // (it grew no further and was not cleared: sizes above)
    return true;
  }
  bool holds_vocab() const { return holds_vocab_; }

  // Starts loading the slot where the key of hash h is first looked for.
  void Prefetch(uint64_t h) const { __builtin_prefetch(table_ + (h & mask_)); }

  // Writes the cached ids of `key` (PieceKey k) at `o` and returns how many, or
  // -1 if it is not cached. `o` has room for key.size() + 2 ids (three at least):
  // an inline entry's three ids are copied whatever its count (no branch on it).
  int Write(std::string_view key, const PieceKey& k, int32_t* o) const {
    const Entry* e = Find(key, k);
    if (!e) return -1;
    CopyIds(*e, o);
    return e->ids_len;
  }

  // Appends the cached ids of `key` (PieceKey k) to `out`; false if not cached.
  bool Append(std::string_view key, const PieceKey& k, std::vector<int32_t>* out) const {
    const Entry* e = Find(key, k);
    if (!e) return false;
    if (e->ids_len == 0) return true;  // a SentencePiece-style word can make none
    if (Inline(e->key_len, e->ids_len)) {
      int32_t ids[3];
      CopyIds(*e, ids);
      out->insert(out->end(), ids, ids + e->ids_len);
    } else {
      const size_t at = out->size();
      out->resize(at + e->ids_len);
      CopyIds(*e, out->data() + at);  // exactly ids_len, from the arena
    }
    return true;
  }

  // Whether `key` (PieceKey k) is cached.
  bool Has(std::string_view key, const PieceKey& k) const { return Find(key, k) != nullptr; }

  void Insert(std::string_view key, const PieceKey& k, const int32_t* ids, uint32_t n) {
    if (mask_ + 1 < kMaxCapacity ? used_ * 2 >= mask_ + 1 : used_ * 8 >= (mask_ + 1) * 5) {
      // Fourfold while it can; at the largest size, cleared at 5/8 full (not half: a
      // vocabulary put in by HoldVocab takes up to 130,000 slots of it).
      if (mask_ + 1 < kMaxCapacity) {
        Grow();
      } else {
        Clear();
      }
    }
    if (arena_.size() + key.size() + n * sizeof(int32_t) > kMaxArena) Clear();
    size_t pos = k.hash & mask_;
    while (table_[pos].key_len != 0) pos = (pos + 1) & mask_;
    Entry e;
    e.w0 = k.w0;
    e.w1 = k.w1;
    e.key_len = static_cast<uint8_t>(key.size());
    e.ids_len = static_cast<uint8_t>(n);
    e.ids[0] = n ? ids[0] : 0;
    if (Inline(e.key_len, e.ids_len)) {
      if (n > 1) e.ids[1] = ids[1];
      if (n > 2) e.rest = static_cast<uint32_t>(ids[2]);
    } else {
      e.rest = static_cast<uint32_t>(arena_.size());
      if (key.size() > 16) arena_.insert(arena_.end(), key.begin() + 16, key.end());
      if (n > 1) {
        const char* p = reinterpret_cast<const char*>(ids);
        arena_.insert(arena_.end(), p, p + n * sizeof(int32_t));
      }
    }
    table_[pos] = e;
    ++used_;
  }

 private:
  struct Entry {
    uint64_t w0 = 0, w1 = 0;  // PieceKey's
    uint8_t key_len = 0;      // 0: empty slot (pieces are never empty)
    uint8_t ids_len = 0;
    int32_t ids[2] = {0, 0};  // the first id; the second when Inline
    uint32_t rest = 0;        // Inline: the third id; else the offset in arena_ of the
                              // key past 16 bytes, then (ids_len > 1) the ids
  };
  static_assert(sizeof(Entry) == 32);
  static_assert(kMaxKey < 256);  // key_len and ids_len (at most one id a byte) fit a byte
  static bool Inline(size_t key_len, size_t ids_len) { return key_len <= 16 && ids_len <= 3; }
  // The entry of `key` (PieceKey k), or null.
  const Entry* Find(std::string_view key, const PieceKey& k) const {
    for (size_t pos = k.hash & mask_;; pos = (pos + 1) & mask_) {
      const Entry& e = table_[pos];
      if (e.key_len == 0) return nullptr;
      if (e.w0 == k.w0 && e.w1 == k.w1 && e.key_len == key.size() &&
          (key.size() <= 16 ||
           std::memcmp(arena_.data() + e.rest, key.data() + 16, key.size() - 16) == 0)) {
        return &e;
      }
    }
  }
  // An entry's ids at `o`: an inline entry's three slots whatever its count.
  void CopyIds(const Entry& e, int32_t* o) const {
    o[0] = e.ids[0];
    if (Inline(e.key_len, e.ids_len)) {
      o[1] = e.ids[1];
      o[2] = static_cast<int32_t>(e.rest);
    } else if (e.ids_len > 1) {
      std::memcpy(o, arena_.data() + e.rest + Rest(e.key_len), e.ids_len * sizeof(int32_t));
    }
  }
  static size_t Rest(size_t key_len) { return key_len > 16 ? key_len - 16 : 0; }
  static uint64_t ShortHash(uint64_t w0, uint64_t w1, size_t n) {
    uint64_t h = (w0 ^ (n * 0x9E3779B97F4A7C15ull)) * 0xD6E8FEB86659FD93ull;
    h = (h ^ (h >> 29) ^ w1) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
  }
  // The hash of an entry's key, as Key computed it.
  uint64_t HashOf(const Entry& e) const {
    if (e.key_len <= 16) return ShortHash(e.w0, e.w1, e.key_len);
    char key[kMaxKey];
    std::memcpy(key, &e.w0, 8);
    std::memcpy(key + 8, &e.w1, 8);
    std::memcpy(key + 16, arena_.data() + e.rest, e.key_len - 16);
    return XXH3_64bits(key, e.key_len);
  }
  // Fourfold, in place: the live entries are set aside, the old table cleared (the
  // memory after it was never written: still zero) and the larger one refilled.
  void Grow() {
    const size_t cap = mask_ + 1, grown = std::min(cap * 4, kMaxCapacity);
    std::vector<Entry> live;
    live.reserve(used_);
    for (size_t i = 0; i < cap; ++i) {
      if (table_[i].key_len != 0) live.push_back(table_[i]);
    }
    std::fill(table_, table_ + cap, Entry{});
    mask_ = grown - 1;
    for (const Entry& e : live) {
      size_t pos = HashOf(e) & mask_;
      while (table_[pos].key_len != 0) pos = (pos + 1) & mask_;
      table_[pos] = e;
    }
  }
  void Clear() {
    std::fill(table_, table_ + mask_ + 1, Entry{});
    arena_.clear();
    used_ = 0;
    holds_vocab_ = false;
    ++clears_;
  }
  Entry* table_;  // kMaxCapacity entries reserved, the first mask_ + 1 in use
  bool holds_vocab_ = false;
  uint64_t clears_ = 0;
  size_t mask_;
  std::vector<char, HugeFriendlyAllocator<char>> arena_;
  size_t used_ = 0;
};

struct EncodeScratch {
  uint64_t generation = 0;
  PieceCache cache;
  // The vocabulary cannot go in the cache (Tokenizer::FillCacheWithVocab said so once):
  // not asked again for each text.
  bool no_vocab_fill = false;
  BpeScratch bpe;
  std::string norm;
  std::vector<AddedSplit> raw_splits, norm_splits;
  std::vector<Span> spans;
  std::vector<std::string_view> pieces, next_pieces;
  std::deque<std::string> arena;
  std::vector<int32_t> word_ids;
  std::vector<int32_t> out;  // EncodeEach's ids, before they join the caller's
  // The SentencePiece-style family's: alignments of normalized text and of
  // Metaspace's output to their input, and Metaspace's output.
  std::string tmp, meta;
  std::vector<uint32_t> align, tmp_align, meta_align;
};

// Splits `text` at the added tokens `matcher` finds, appending their ids (and
// their ends, when `ends` is wanted), and calls segment(begin, end) for each
// stretch between them, in order: the one loop both families encode through.
template <class Segment>
void ForEachAddedSplit(const AddedTokenMatcher& matcher, std::string_view text,
                       std::vector<AddedSplit>* splits, std::vector<int32_t>* ids,
                       std::vector<uint32_t>* ends, Segment&& segment) {
  if (matcher.empty()) {
    segment(size_t{0}, text.size());
    return;
  }
  splits->clear();
  matcher.Split(text, splits);
  for (const AddedSplit& sp : *splits) {
    if (sp.token_id >= 0) {
      ids->push_back(sp.token_id);
      if (ends) ends->push_back(static_cast<uint32_t>(sp.end));
    } else {
      segment(sp.begin, sp.end);
    }
  }
}

// The steps of the pre_tokenizer `p`: itself, or each of a Sequence's
// pretokenizers, with the field path naming it ("pre_tokenizer.pretokenizers[1]").
// False: a Sequence without its list.
bool PreTokenizerSteps(simdjson::dom::element p,
                       std::vector<std::pair<simdjson::dom::element, std::string>>* steps);

// ---------------------------------------------------------------------------
// Pre-tokenizer steps.

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Tokenizer::PreStep {
  enum Kind { kSplit, kByteLevel } kind = kSplit;
  std::unique_ptr<Pattern> pattern;  // Split, or ByteLevel with use_regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;
};

// Splits `piece` by `pattern` as Hugging Face's Split pre-tokenizer does
// (pattern.rs find_matches, then the SplitDelimiterBehavior), appending the
// non-empty pieces to `out`. tokenizer.cc.
void ApplySplit(std::string_view piece, const Pattern& pattern, SplitBehavior behavior, bool invert,
                std::vector<Span>* spans, std::vector<std::string_view>* out);

// The SentencePiece-style family: Hugging Face's Metaspace pre-tokenizer
// (pre_tokenizers/metaspace.rs): each ' ' becomes the replacement; the
// replacement is put first unless the piece starts with it (always), only in
// the piece at the text's start (first), or never; with split, a piece starts
// at each replacement.
struct Metaspace {
  enum Prepend { kAlways, kFirst, kNever };
  std::string replacement;  // one character
  Prepend prepend = kAlways;
  bool split = true;
};

// model.dropout (none or 0), no affixes, ignore_merges: the BPE options both
// families read (tokenizer_json.cc). Errors name the field.
Status ReadModelOptions(const tokjson::Document& doc, bool* ignore_merges);

// A Split pre-tokenizer step at `where` (tokenizer_json.cc).
Status LoadSplitStep(std::string_view name, simdjson::dom::element e, const std::string& where,
                     Tokenizer::PreStep* step);

// Loads a tokenizer.json of the SentencePiece-style family (its decoder is
// Decoder::kPieces) into `t` (sentencepiece_json.cc).
Status LoadPieces(Tokenizer* t, const tokjson::Document& doc, const std::string& name);

struct Tokenizer::Pieces {
  Normalizer normalizer;
  std::vector<std::unique_ptr<PreStep>> splits;  // Split steps, in order
  bool has_metaspace = false;
  Metaspace metaspace;  // the last step, when has_metaspace
  CharBpe model;
  PieceDecoder decoder;
  std::string describe_pre;  // for Describe()
};

}  // namespace ek::tokenize
