// BPE over characters: Hugging Face tokenizers' BPE model on a vocabulary that
// is not byte-level, as the SentencePiece conversions (Gemma, Llama 2, Mistral
// v0.x, Phi-3) ship it (models/bpe/model.rs merge_word, then word.rs
// merge_all). Each character of a word starts as its own vocabulary token; one
// that is not in the vocabulary becomes, with byte_fallback, one <0xHH> token
// per UTF-8 byte when all of those are in the vocabulary, else the unknown
// token (consecutive unknowns fused into one with fuse_unk; dropped when there
// is no unk_token). The ranked merges then run as bpe.h's over those ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenize/bpe.h"

namespace ek::tokenize {

struct CharBpeOptions {
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;  // a word that is a token is that token, unmerged
  int32_t unk_id = -1;         // -1: no unk_token
};

class CharBpe {
 public:
  // `model` holds the vocabulary (token texts) and merges; it must outlive
  // this. Reads the byte-fallback tokens <0x00>..<0xFF> from it.
  void Init(const BpeModel* model, CharBpeOptions options);

  // Appends the ids of one pre-tokenized piece (non-empty valid UTF-8).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out, BpeScratch* scratch) const;

  // The bytes of a piece token `id` stands for: its text, one byte for a
  // byte-fallback token, one character for the unknown token (it may stand
  // for more when fused). For offsets.
  size_t PieceLength(int32_t id, std::string_view rest) const;
  bool IsByteToken(int32_t id) const;

  const CharBpeOptions& options() const { return opt_; }

  // Where a word may be cut into parts that encode alone to the word's own ids:
  // before a "▁" (U+2581) that follows a character c whose one-character token
  // exists and that no token holds followed by "▁" (no "c▁" anywhere in the
  // vocabulary). Every symbol BPE makes is a token, and a token across such a
  // cut would hold "c▁", so no merge ever crosses it and the parts merge
  // independently. Gemma 3's vocabulary has one such token (">▁</"), Llama 2's
  // and Gemma 1/2's none, so a whole text (Gemma's normalizer leaves no space
  // to pre-tokenize on) becomes words the piece cache serves. Off (`cuts()`
  // false) with ignore_merges (a whole word may be a token) or no "▁" token.
  bool cuts() const { return cuts_; }
  // The first cut in `word` after byte `from` (a character start), else word.size().
  size_t NextCut(std::string_view word, size_t from) const;

 private:
  void InitCuts();
  bool CutAfter(std::string_view ch) const;

  bool cuts_ = false;
  bool cut_after_ascii_[128];              // a cut may follow this ASCII character
  std::vector<std::string> no_cut_after_;  // non-ASCII characters c of tokens holding "c▁"

  const BpeModel* bpe_ = nullptr;
  CharBpeOptions opt_;
  int32_t ascii_[128];               // the token of each ASCII character, -1: none
  int32_t byte_token_[256];          // <0xHH>, -1: none
  std::vector<bool> is_byte_token_;  // by id
};

}  // namespace ek::tokenize
