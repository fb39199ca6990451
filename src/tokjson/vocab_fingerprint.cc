#include "tokjson/vocab_fingerprint.h"

#include <unordered_map>

#include "core/file.h"
#include "tokjson/byte_level.h"
#include "tokjson/document.h"
#include "tokjson/vocab_hash.h"

namespace ek::tokjson {

namespace {

// Tokenizer::VocabFingerprint: for a byte-level decoder, what Decode gives for
// each id alone (an added token's byte-level decoding, a key outside the
// byte-level alphabet its text, a byte-level entry its raw bytes); with no
// decoder or a decoder of pieces, the token text (an added token's content over
// a vocabulary key).
uint64_t Hash(const Document& doc) {
  const bool text = doc.decoder != Decoder::kByteLevel;
  std::unordered_map<int32_t, std::string> added;  // id -> its bytes in the hash
  for (const AddedToken& a : doc.added_tokens) {
    added[a.id] = text ? a.content : ByteLevelDecode(a.content);
  }
  VocabHash hash;
  for (int32_t id = 0; id < doc.id_limit; ++id) {
    const size_t i = static_cast<size_t>(id);
    if (!doc.has_id[i]) continue;
    std::string_view bytes;
    if (auto a = added.find(id); a != added.end()) {
      bytes = a->second;
    } else if (text) {
      bytes = doc.vocab_key[i];
    } else if (auto o = doc.vocab_other.find(id); o != doc.vocab_other.end()) {
      bytes = o->second;
    } else {
      bytes = doc.vocab_bytes[i];
    }
    hash.Add(id, bytes);
  }
  return hash.Digest();
}

}  // namespace

Result<uint64_t> VocabFingerprintOfJson(std::string_view json, std::string_view name) {
  EK_ASSIGN_OR_RETURN(Document doc, Document::Parse(json, name));
  return Hash(doc);
}

Result<uint64_t> VocabFingerprintOfFile(const std::string& path) {
  EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  return VocabFingerprintOfJson(f.data(), path);
}

}  // namespace ek::tokjson
