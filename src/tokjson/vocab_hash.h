// The hash behind the vocabulary fingerprint (tokjson/vocab_fingerprint.h
// defines it; tokenize::Tokenizer::VocabFingerprint and
// VocabFingerprintOfJson both compute it): xxh3-64 over, per id in increasing
// order, {uint32 id, uint32 byte length} in host (little-endian) order, then
// the bytes. One home for the record's layout, so the two stay bit-identical.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace ek::tokjson {

class VocabHash {
 public:
  VocabHash() : state_(XXH3_createState()), buf_(new char[kBuffer]) { XXH3_64bits_reset(state_); }
  ~VocabHash() { XXH3_freeState(state_); }
  VocabHash(const VocabHash&) = delete;
  VocabHash& operator=(const VocabHash&) = delete;

  // Ids in increasing order; an absent id is not added. The records gather in a
  // buffer hashed 64 KiB at a time: the same xxh3 as one update per part (it is a
  // hash of the bytes in order, however they are cut), without a call per token
  // (two for each of a vocabulary's 150,000 ids took ~1.5 ms of every pack).
  void Add(int32_t id, std::string_view bytes) {
    const uint32_t head[2] = {static_cast<uint32_t>(id), static_cast<uint32_t>(bytes.size())};
    if (used_ + sizeof head + bytes.size() > kBuffer) Flush();
    if (sizeof head + bytes.size() > kBuffer) {  // a token larger than the buffer
      XXH3_64bits_update(state_, head, sizeof head);
      XXH3_64bits_update(state_, bytes.data(), bytes.size());
      return;
    }
    std::memcpy(buf_.get() + used_, head, sizeof head);
    std::memcpy(buf_.get() + used_ + sizeof head, bytes.data(), bytes.size());
    used_ += sizeof head + bytes.size();
  }
  uint64_t Digest() {
    Flush();
    return XXH3_64bits_digest(state_);
  }

 private:
  static constexpr size_t kBuffer = 64 << 10;
  void Flush() {
    XXH3_64bits_update(state_, buf_.get(), used_);
    used_ = 0;
  }
  XXH3_state_t* state_;
  size_t used_ = 0;
  std::unique_ptr<char[]> buf_;
};

}  // namespace ek::tokjson
