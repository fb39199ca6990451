// The layout of a pack's data files (docs/pack_format.md), stated once for the
// packer that writes them and every reader: a rank's block file holds `blocks`
// blocks of seq_len little-endian int32 token ids, back to back, nothing else;
// its loss mask (packs made with --loss-mask assistant) one byte per token of
// the block file, in the same order; its document boundaries (rank-NNNNN.docs)
// ascending little-endian uint64 token offsets where a segment begins.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/status.h"
#include "packfile/manifest.h"

namespace ek::pack {

inline constexpr uint64_t kTokenBytes = 4;         // int32, little-endian
inline constexpr uint64_t kMaskBytesPerToken = 1;  // 1: the token counts in the loss

// Bytes of one block in a rank's block file.
inline uint64_t BlockBytes(int seq_len) { return static_cast<uint64_t>(seq_len) * kTokenBytes; }

// Whether every rank of the pack has a loss-mask file.
inline bool HasLossMasks(const Manifest& m) { return m.loss_mask == "assistant"; }

// Document boundaries (rank-NNNNN.docs). An entry is a token offset into the
// rank's token stream (block b, position p: b * seq_len + p) where a segment
// begins; a segment runs to the next entry or to the end of its block,
// whichever comes first, and every block start begins one implicitly. Stored:
// the first token of every document placed in the rank's blocks, and (packs
// with padding) the first pad token of a block's padding with kDocPadBit set,
// from where to the block's end every token is padding.
inline constexpr uint64_t kDocEntryBytes = 8;  // uint64, little-endian
inline constexpr uint64_t kDocPadBit = uint64_t{1} << 63;
inline constexpr bool IsPadEntry(uint64_t entry) { return (entry & kDocPadBit) != 0; }
inline constexpr uint64_t EntryOffset(uint64_t entry) { return entry & ~kDocPadBit; }

// Entry `i` of a docs file's bytes (precondition: (i + 1) * 8 <= bytes.size()).
inline uint64_t DocEntryAt(std::string_view bytes, uint64_t i) {
  uint64_t v;
  std::memcpy(&v, bytes.data() + i * kDocEntryBytes, sizeof v);
  return v;
}

// Whether the pack has document boundaries: every rank of the manifest lists a
// docs file (an older pack has none; ManifestFromJson refuses a mix).
inline bool HasDocs(const Manifest& m) { return !m.ranks.empty() && !m.ranks[0].docs_file.empty(); }

struct DocsCounts {
  uint64_t entries = 0;
  uint64_t documents = 0;       // entries without kDocPadBit
  uint64_t pads = 0;            // entries with it
  uint64_t padding_tokens = 0;  // tokens from each pad entry to its block's end
};

// Checks the bytes of a docs file `file` for a rank of `blocks` blocks: a whole
// number of 8-byte entries, offsets strictly ascending and below blocks *
// seq_len, a pad entry never at a block start and never followed by another
// entry in its block. The error (kCorrupt) names the file and the byte offset
// of the first bad entry. The checksum and the manifest's counts are the
// caller's to compare.
Result<DocsCounts> CheckDocEntries(std::string_view bytes, uint64_t blocks, int seq_len,
                                   const std::string& file);

}  // namespace ek::pack
