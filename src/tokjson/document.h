// The one reader of Hugging Face's tokenizer.json format: the document parsed
// once, the parts every reader needs (the model's type, the vocabulary, the
// added tokens with the ids Hugging Face gives them, the decoder's kind) read
// into plain fields, the rest handed over as JSON for the reader that needs it
// (the tokenizer's loader: model options, normalizer, pre-tokenizer, merges).
// Below both readers of the format: the tokenizer (tokenize/tokenizer_json.cc)
// and the vocabulary fingerprint of a file (tokjson/vocab_fingerprint.h),
// which must not link the tokenizer; so this depends only on core.
//
// Errors name the file and the field ("t.json: model.vocab[b]: id is not a
// non-negative integer", "t.json: added_tokens[0]: bad id"): malformed JSON is
// located by line and column; a missing or mistyped field is kInvalidArgument;
// a model other than BPE or a decoder outside the two families is kUnsupported.
// Both exit 65. What Parse reads is what makes the ids mean tokens; a file
// whose encoding parts alone are wrong (merges, pre-tokenizer, normalizer)
// still parses, so it still has a fingerprint.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/huge_pages.h"
#include "core/status.h"
#include "tokjson/added_token.h"

namespace ek::tokjson {

enum class Decoder {
  kNone,       // "decoder": null or absent: Hugging Face joins token strings with ' '
  kByteLevel,  // the byte-level decoder: a token's bytes
  // SentencePiece-style: decoders over token strings (Replace, ByteFallback, Fuse,
  // Strip, Metaspace, or a Sequence of these), as Gemma, Llama 2 and Mistral ship.
  kPieces,
};

class Document {
 public:
  // Parses `json`; `name` names the file in every error. `readable`: the bytes that may
  // be read from json.data(); with room for simdjson's padding past json's end, the text
  // is parsed where it lies (a mapped file), else copied first.
  static Result<Document> Parse(std::string_view json, std::string_view name, size_t readable = 0);

  const std::string& name() const { return name_; }
  // The whole document and its "model" object (an object, Parse checked), for
  // the parts a reader interprets itself. Valid while this Document lives.
  simdjson::dom::element root() const { return root_; }
  simdjson::dom::element model() const { return model_; }

  Decoder decoder = Decoder::kNone;

  // model.vocab, indexed by id up to vocab_limit (one more than its largest
  // id). An entry whose key is in the byte-level alphabet (byte_level.h) has
  // its raw bytes in vocab_bytes and vocab_byte_level set; any other keeps its
  // own text in vocab_other (Hugging Face's ByteLevel decoder gives it as is).
  // vocab_key is each id's key as written (the text the no-decoder join uses).
  // With two keys on one id the later one wins, as in the tokenizer's tables.
  int32_t vocab_limit = 0;
  std::vector<std::string> vocab_bytes;
  std::vector<bool> vocab_byte_level;
  std::vector<std::string_view, HugeFriendlyAllocator<std::string_view>> vocab_key;
  std::unordered_map<int32_t, std::string> vocab_other;
  // in_vocab[id]: model.vocab has the id (vocab_limit entries).
  std::vector<bool> in_vocab;
  // The vocabulary map's length, Hugging Face's model.get_vocab_size(): every
  // distinct key. Added tokens outside the vocabulary are numbered from it.
  int64_t vocab_len = 0;

  // For each of keys[0, n), a key as written in model.vocab (raw, not decoded), the
  // lowest id whose vocab_key it is, or -1, into ids. The lookups of a batch overlap
  // their cache misses. Reads vocab_key (no loader moves it away).
  void FindKeys(const std::string_view* keys, size_t n, int32_t* ids) const;

  // added_tokens in file order, with the ids Hugging Face assigns when it
  // loads them (AddedVocabulary::add_tokens): content listed twice is one
  // token at the first one's place and id with the later flags; content that
  // is a vocabulary entry (byte-level or not) takes that entry's id; anything
  // else takes max(assigned ids) + 1, or vocab_len while no assigned id
  // reaches it. An empty content is dropped. The file's "id" is only a hint
  // there (Hugging Face warns when they differ); real files agree with this.
  std::vector<AddedToken> added_tokens;

  // One more than the largest id, vocabulary or added; has_id[id] says
  // whether a vocabulary entry or an added token has it.
  int32_t id_limit = 0;
  std::vector<bool> has_id;

  // FieldError and UnsupportedField (below) for this file.
  Status Error(std::string_view where, std::string_view what) const;
  Status Unsupported(std::string_view where, std::string_view what) const;

 private:
  // Accepts a decoder of the kPieces family, naming the first part that is not.
  Status CheckPieceDecoder(simdjson::dom::element d, const std::string& where) const;
  Status ReadVocab();
  Status ReadAddedTokens();
  // Fills key_slots_ from vocab_key, in id order; returns how many distinct keys.
  size_t BuildKeyIndex();
  // The slot holding `key` (XXH3 `hash`), else the empty slot that ends its chain.
  size_t KeySlot(std::string_view key, uint64_t hash) const;
  int32_t FindKey(std::string_view key, uint64_t hash) const;

  std::string name_;
  // The DOM the elements point into; on the heap, so a moved Document's
  // elements stay valid.
  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element root_;
  simdjson::dom::element model_;
  // model.vocab's keys as written, by their XXH3: open addressing, 8-byte slots (the
  // id + 1 above 32 bits of the hash; 0 is empty), at most 2/3 full. ReadMerges looks
  // each merge's two sides up here as they are written: a byte-level side is not
  // decoded first (the alphabet is one character per byte, so two keys are equal as
  // written exactly when their bytes are), nor compared with a token's bytes.
  std::vector<uint64_t, HugeFriendlyAllocator<uint64_t>> key_slots_;
  uint64_t key_mask_ = 0;
};

// An error naming the file and the field: "FILE: WHERE: WHAT" (kInvalidArgument;
// "FILE: WHAT" with no field), "FILE: WHERE: unsupported: WHAT" (kUnsupported).
Status FieldError(std::string_view file, std::string_view where, std::string_view what);
Status UnsupportedField(std::string_view file, std::string_view where, std::string_view what);

// The "type" string of a JSON object ("" when absent or not an object).
std::string TypeOf(simdjson::dom::element e);

// Merges as pairs of ids in rank order (a table of 2 MB for Llama 3's 280,000: huge pages).
using MergeList =
    std::vector<std::pair<int32_t, int32_t>, HugeFriendlyAllocator<std::pair<int32_t, int32_t>>>;

// Sizes `parser` for a document of `bytes` and advises its large buffers (tape, strings,
// structural indexes) to be backed by transparent huge pages (Document::Parse does this).
void AllocateParserHuge(simdjson::dom::parser* parser, size_t bytes);

// model.merges ("a b" strings or ["a", "b"] pairs, in rank order) as pairs of
// ids: each side is the vocabulary's lowest id with that key as written
// (Document::FindKeys, a batch of merges at a time). When `byte_level`, a side must
// be a byte-level key (vocab_byte_level: the id a lookup of its decoded bytes among
// the byte-level entries gives); else any key (the SentencePiece-style
// vocabularies' texts). Reads vocab_byte_level: call it before a loader moves that
// away. Errors name model.merges[i].
Result<MergeList> ReadMerges(const Document& doc, bool byte_level = true);

}  // namespace ek::tokjson
