// A BPE tokenizer loaded from a Hugging Face tokenizer.json, bit-exact with
// Hugging Face tokenizers' encode(text, add_special_tokens=False) and
// decode(ids, skip_special_tokens=False). Two families, chosen at load by the
// decoder:
//
// Byte-level BPE (Qwen, Llama 3, DeepSeek V3, GPT-2): decoder ByteLevel or null
//   normalizer:    null, NFC, Sequence of NFC
//   pre_tokenizer: ByteLevel (add_prefix_space, use_regex), Split (Regex or
//                  String pattern, any behavior, invert), Sequence of these
//                  with ByteLevel last
// SentencePiece-style BPE (Gemma, Llama 2, Mistral v0.x, Phi-3): a decoder of
// Replace, ByteFallback, Fuse, Strip, Metaspace (or a Sequence of these)
//   normalizer:    null, Prepend, Replace (String or Regex), NFC, NFKC,
//                  Sequence of these (normalizer.h)
//   pre_tokenizer: null, Metaspace (replacement, prepend_scheme, split), Split,
//                  Sequence of Splits with Metaspace last
//   model:         BPE over characters with byte_fallback, unk_token and
//                  fuse_unk (sentencepiece_bpe.h)
// Both:
//   model:         BPE with string or pair merges, ignore_merges; no dropout,
//                  no continuing_subword_prefix / end_of_word_suffix
//   added_tokens:  special and not; lstrip, rstrip, single_word, normalized
// Anything else is refused at load, naming the part.
// The post_processor never changes ids here: evenkeel encodes without
// special tokens (a packer appends EOS itself).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenize/added_tokens.h"
#include "tokenize/bpe.h"
#include "tokenize/pattern.h"

namespace ek::tokjson {
class Document;
}

namespace ek::tokenize {

class Pattern;
struct EncodeScratch;
struct PieceKey;

class Tokenizer {
 public:
  // Loads a tokenizer.json. Errors name the file and the JSON location.
  static Result<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  // `name` is used in error messages in place of a path; `readable`, as
  // tokjson::Document::Parse's (a mapped file's pages), spares a copy of the text.
  static Result<std::unique_ptr<Tokenizer>> FromJson(std::string_view json, std::string_view name,
                                                     size_t readable = 0);
  ~Tokenizer();

  // Appends the ids of `text` to `ids`. `text` must be valid UTF-8 (an error
  // names the byte offset otherwise). Thread-safe: each thread keeps its own
  // piece cache.
  Status Encode(std::string_view text, std::vector<int32_t>* ids) const;
  Result<std::vector<int32_t>> Encode(std::string_view text) const;
  // Encode of text whose UTF-8 the caller has checked already (a string simdjson
  // parsed: its parse checks the UTF-8 of the whole document): no second check.
  // Invalid UTF-8 here is a caller's bug, with no error to say so.
  void EncodeChecked(std::string_view text, std::vector<int32_t>* ids) const;
  // Encode that also appends, per token, the byte offset in `text` where the
  // token ends (the next token starts there; the first starts at 0). Added
  // tokens end where their match ends (stripped white space included); model
  // tokens advance by their byte length, clamped to the piece of text between
  // added tokens, whose last token ends at the piece's end. Exact whenever the
  // normalizer leaves `text` unchanged (NFC text for an NFC tokenizer: see
  // normalizes_nfc) and no added token strips white space inside a piece. For
  // the SentencePiece-style family a token's end is mapped back through
  // Metaspace and the normalizer (a prepended "▁" takes no text, a "▁" that
  // replaced a space ends after it): exact but for NFC/NFKC changing the text,
  // and an unknown token fused over several characters (counted as one).
  Status EncodeWithOffsets(std::string_view text, std::vector<int32_t>* ids,
                           std::vector<uint32_t>* ends) const;
  // True when the tokenizer's normalizer is NFC (text is normalized before BPE;
  // for a SentencePiece-style one, NFC is its first step).
  bool normalizes_nfc() const { return nfc_; }
  // True for the SentencePiece-style family.
  bool sentencepiece() const { return pieces_ != nullptr; }
  // Turns the fast paths off, for differential tests: no piece cache, words
  // from their bytes, every merge through the heap (BpeModel::UsePlainPath).
  // Call before the first Encode.
  void UsePlainPath() {
    plain_ = true;
    bpe_.UsePlainPath();
  }
  // Where the model's ignore_merges makes every vocabulary key one token (Llama 3), a
  // thread's piece cache takes in the vocabulary's keys of up to 16 bytes once it holds
  // this many pieces (16,384; a short job, encoding a few texts, is spared the fill),
  // and the pieces it misses then need no vocabulary lookup. For tests: 0 fills it at
  // the first text. Call before the first Encode.
  void FillCacheWithVocabAfter(size_t pieces) { fill_vocab_after_ = pieces; }

  // Appends the bytes of `ids` (not necessarily valid UTF-8: a token can hold
  // part of a character). Unknown ids are an error naming the position.
  Status Decode(std::span<const int32_t> ids, std::string* out) const;

  // The id of a token given as text (an added token's content, or a vocabulary
  // entry in its raw-byte form), if any.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // xxh3-64 over every id's token bytes (id, length, bytes; ids in order, absent
  // ids skipped): equal for two tokenizer.json files that give every id the same
  // token, whatever else differs in them (formatting, merges order, normalizer).
  uint64_t VocabFingerprint() const;
  // One more than the largest id: every valid id is below it.
  int32_t vocab_size() const { return vocab_size_; }
  size_t model_vocab_count() const { return bpe_.vocab_count(); }
  size_t merge_count() const { return bpe_.merge_count(); }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  // A one-line description: pre-tokenizer kinds, sizes.
  std::string Describe() const;

  // Parts of a loaded tokenizer, defined in tokenizer_internal.h for the
  // tokenizer's own sources.
  struct PreStep;
  struct Pieces;

 private:
  Tokenizer();
  EncodeScratch& Scratch() const;
  void EncodeNormalizable(std::string_view text, std::vector<int32_t>* ids, EncodeScratch& s) const;
  void EncodePlain(std::string_view text, std::vector<int32_t>* ids, EncodeScratch& s) const;
  const Pattern* OnlySplit() const;
  void EncodeSpans(std::string_view text, const Pattern& split, std::vector<int32_t>* ids,
                   EncodeScratch& s) const;
  template <class PieceAt>
  void EncodeEach(size_t n, size_t bytes, const char* readable_end, PieceAt piece,
                  std::vector<int32_t>* ids, EncodeScratch& s) const;
  // The text id `id` (valid, no join_with_space_) decodes to on its own: its override (an
  // added token, a vocabulary entry outside the byte-level alphabet), else the model's
  // token. Decode, DecodePieces, the offsets' lengths and the fingerprint all read it.
  std::string_view TokenText(int32_t id) const {
    if (overridden_[static_cast<size_t>(id)]) {
      auto it = std::lower_bound(overrides_.begin(), overrides_.end(), id,
                                 [](const auto& o, int32_t v) { return o.first < v; });
      return it->second;
    }
    return bpe_.TokenBytes(id);
  }
  // After the loaders: decode_override_ into overrides_ and overridden_, and token_len_.
  void FinishDecoding();
  // EncodeImpl past its UTF-8 check: both families, offsets where `ends` is given.
  void EncodeChecked(std::string_view text, std::vector<int32_t>* ids,
                     std::vector<uint32_t>* ends) const;
  Status EncodeImpl(std::string_view text, std::vector<int32_t>* ids,
                    std::vector<uint32_t>* ends) const;

  // The SentencePiece-style family (tokenizer_pieces.cc).
  void EncodePieces(std::string_view text, std::vector<int32_t>* ids,
                    std::vector<uint32_t>* ends) const;
  void PiecesSegment(std::string_view seg, size_t base, std::vector<int32_t>* ids,
                     std::vector<uint32_t>* ends, EncodeScratch& s) const;
  void PiecesPlain(std::string_view norm, size_t off, size_t len, bool first, size_t base,
                   std::vector<int32_t>* ids, std::vector<uint32_t>* ends, EncodeScratch& s) const;
  void PiecesWord(std::string_view word, std::vector<int32_t>* ids, EncodeScratch& s) const;
  void PiecesPart(std::string_view word, std::vector<int32_t>* ids, EncodeScratch& s) const;
  Status DecodePieces(std::span<const int32_t> ids, std::string* out) const;

  friend class TokenizerLoader;
  friend Status LoadPieces(Tokenizer* t, const tokjson::Document& doc, const std::string& name);
  void FillCacheWithVocab(EncodeScratch& s) const;
  uint64_t generation_;
  bool plain_ = false;
  size_t fill_vocab_after_ = size_t{1} << 14;
  BpeModel bpe_;
  std::vector<std::unique_ptr<PreStep>> steps_;
  bool nfc_ = false;
  std::vector<AddedToken> added_;
  AddedTokenMatcher raw_matcher_;         // normalized == false
  AddedTokenMatcher normalized_matcher_;  // normalized == true
  // Decoding: model tokens decode to their bytes (bpe_), except these
  // (added tokens, non-byte-level vocabulary entries): the loaders fill
  // decode_override_, FinishDecoding moves it into overrides_ (sorted by id)
  // and overridden_ (one flag an id), which TokenText reads.
  std::unordered_map<int32_t, std::string> decode_override_;
  std::vector<std::pair<int32_t, std::string>> overrides_;
  std::vector<bool> overridden_;
  std::vector<bool> has_id_;
  bool join_with_space_ = false;  // no decoder: HF joins token strings with ' '
  std::unordered_map<int32_t, std::string> raw_token_text_;  // only when join_with_space_
  int32_t vocab_size_ = 0;
  std::vector<uint32_t> token_len_;  // bytes of each id's token (0: none), for offsets
  std::unique_ptr<Pieces> pieces_;   // set: the SentencePiece-style family
};

}  // namespace ek::tokenize
