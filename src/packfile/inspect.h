// Verifying a pack against its manifest: every rank file present, its size a
// whole number of blocks equal to the manifest's, its xxh3 equal, every token
// in [0, vocab_size) and none above tokenizer.max_id where the manifest records it
// (a manifest that understates its ids is a corrupt pack); its loss mask and its
// document boundaries (layout.h's CheckDocEntries, the checksum, the count of
// documents) where the pack has them. One pass over each file (hash and range
// check fused per cache-sized slice), ranks in parallel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "packfile/manifest.h"

namespace ek::pack {

struct RankCheck {
  int rank = 0;
  bool exists = false;
  uint64_t size = 0;
  uint64_t xxh3 = 0;
  uint64_t bad_tokens = 0;          // ids outside [0, vocab_size)
  int64_t first_bad_token_at = -1;  // token index
  int32_t first_bad_token = 0;
  uint64_t over_max_tokens = 0;    // ids in the vocabulary but above the manifest's max_id
  int64_t first_over_max_at = -1;  // token index
  int32_t first_over_max = 0;
  uint64_t documents = 0;             // document starts found in the docs file (0 without one)
  uint64_t pads = 0;                  // entries that begin a block's padding
  std::vector<std::string> problems;  // empty when the rank is sound
};

struct InspectReport {
  Manifest manifest;
  std::vector<RankCheck> ranks;  // one per manifest rank, in order
  bool ok() const;
};

// `threads` 0 = all cores. `check_tokens` false skips the range scan.
Result<InspectReport> Inspect(const std::string& dir, size_t threads = 0, bool check_tokens = true);
// Same, for a manifest already in hand.
InspectReport InspectWith(const Manifest& m, const std::string& dir, size_t threads,
                          bool check_tokens);

// The tokens of one block.
Result<std::vector<int32_t>> ReadBlock(const std::string& dir, const Manifest& m, int rank,
                                       uint64_t block);

}  // namespace ek::pack
