// The hash behind the vocabulary fingerprint (tokjson/vocab_fingerprint.h
// defines it; tokenize::Tokenizer::VocabFingerprint and
// VocabFingerprintOfJson both compute it): xxh3-64 over, per id in increasing
// order, {uint32 id, uint32 byte length} in host (little-endian) order, then
// the bytes. One home for the record's layout, so the two stay bit-identical.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <string_view>

namespace ek::tokjson {

class VocabHash {
 public:
  VocabHash() : state_(XXH3_createState()) { XXH3_64bits_reset(state_); }
  ~VocabHash() { XXH3_freeState(state_); }
  VocabHash(const VocabHash&) = delete;
  VocabHash& operator=(const VocabHash&) = delete;

  // Ids in increasing order; an absent id is not added.
  void Add(int32_t id, std::string_view bytes) {
    const uint32_t head[2] = {static_cast<uint32_t>(id), static_cast<uint32_t>(bytes.size())};
    XXH3_64bits_update(state_, head, sizeof head);
    XXH3_64bits_update(state_, bytes.data(), bytes.size());
  }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

}  // namespace ek::tokjson
