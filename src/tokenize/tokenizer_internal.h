// Shared by the tokenizer's sources (tokenizer.cc and tokenizer_pieces.cc:
// encoding; tokenizer_json.cc and sentencepiece_json.cc: the tokenizer.json
// loader) and nothing else: the steps a loaded tokenizer runs, the parts of
// the SentencePiece-style family, and the per-thread encoding state.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// Open-addressing cache of pre-tokenized pieces. Most pieces repeat (words,
// spaces, punctuation), so most skip BPE. Cleared wholesale when full.
class PieceCache {
 public:
  static constexpr size_t kCapacity = 1 << 17;
  static constexpr size_t kMaxKey = 96;

  PieceCache() : table_(kCapacity) {}

  const int32_t* Find(std::string_view key, uint64_t h, uint32_t* n) const {
    size_t pos = h & (kCapacity - 1);
    while (true) {
      const Entry& e = table_[pos];
      if (e.key_len == 0) return nullptr;
      if (e.hash == h && e.key_len == key.size() &&
          std::memcmp(keys_.data() + e.key_off, key.data(), key.size()) == 0) {
        *n = e.ids_len;
        return ids_.data() + e.ids_off;
      }
      pos = (pos + 1) & (kCapacity - 1);
    }
  }

  void Insert(std::string_view key, uint64_t h, const int32_t* ids, uint32_t n) {
    if (used_ * 2 >= kCapacity || keys_.size() > (8u << 20)) Clear();
    size_t pos = h & (kCapacity - 1);
    while (table_[pos].key_len != 0) pos = (pos + 1) & (kCapacity - 1);
    table_[pos] = Entry{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()),
                        static_cast<uint32_t>(ids_.size()), n};
    keys_.append(key);
    ids_.insert(ids_.end(), ids, ids + n);
    ++used_;
  }

 private:
  struct Entry {
    uint64_t hash = 0;
    uint32_t key_off = 0;
    uint32_t key_len = 0;  // 0: empty slot (pieces are never empty)
    uint32_t ids_off = 0;
    uint32_t ids_len = 0;
  };
  void Clear() {
    std::fill(table_.begin(), table_.end(), Entry{});
    keys_.clear();
    ids_.clear();
    used_ = 0;
  }
  std::vector<Entry> table_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t used_ = 0;
};

struct EncodeScratch {
  uint64_t generation = 0;
  PieceCache cache;
  BpeScratch bpe;
  std::string norm;
  std::vector<AddedSplit> raw_splits, norm_splits;
  std::vector<Span> spans;
  std::vector<std::string_view> pieces, next_pieces;
  std::deque<std::string> arena;
  std::vector<int32_t> word_ids;
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
