// The vocabulary fingerprint a pack records (manifest.json tokenizer.vocab_xxh3,
// docs/pack_format.md), computed from a tokenizer.json without building the
// tokenizer: the document is read by the one tokenizer.json reader
// (tokjson/document.h), of which only the vocabulary (model.vocab), the added
// tokens and the decoder count, so that the pack-vs-model check (run/model_dir.h)
// links no tokenizer engine, Unicode tables or regex library.
//
// The fingerprint is xxh3-64 over every id's token bytes, ids in increasing
// order, absent ids skipped: per id, {uint32 id, uint32 byte length} in host
// (little-endian) order, then the bytes. An id's bytes are what decoding that
// one id gives (tokenize::Tokenizer::Decode): a byte-level vocabulary entry its
// raw bytes; an entry outside the byte-level alphabet its own UTF-8; an added
// token its content, byte-level decoded where it can be; with no decoder, the
// token text itself (Hugging Face joins token strings). With a SentencePiece-style
// decoder (Decoder::kPieces: Replace, ByteFallback, Fuse, Strip, Metaspace), also
// the token text as written ("▁the", "<0x0A>", an added token's content): decoding
// one id alone there drops what marks a word's start (Strip, Metaspace take a
// leading space off the text), so the text is what tells the ids apart. Added tokens take ids as
// Hugging Face assigns them (tokjson::Document::added_tokens). It equals
// tokenize::Tokenizer::VocabFingerprint() for every file the tokenizer loads
// (pack_test: VocabFingerprint.*, over the real tokenizer.json files in .deps).
//
// A file the tokenizer would refuse for its encoding parts alone (pre-tokenizer,
// normalizer, merges, model options, truncation) still has a fingerprint here:
// the ids still mean tokens. What makes the ids meaningless is refused, naming
// the field: a missing or mistyped model.vocab, a vocabulary id that is not a
// non-negative integer, a vocabulary too sparse to index, an added token without
// an id or content or with a flag that is not a bool, a model other than BPE or a
// decoder outside the byte-level and SentencePiece-style families.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ek::tokjson {

// `name` names the file in errors ("model/tokenizer.json: model.vocab: missing").
Result<uint64_t> VocabFingerprintOfJson(std::string_view json, std::string_view name);
Result<uint64_t> VocabFingerprintOfFile(const std::string& path);

}  // namespace ek::tokjson
