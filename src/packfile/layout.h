// The layout of a pack's data files (docs/pack_format.md), stated once for the
// packer that writes them and every reader: a rank's block file holds `blocks`
// blocks of seq_len little-endian int32 token ids, back to back, nothing else;
// its loss mask (packs made with --loss-mask assistant) one byte per token of
// the block file, in the same order.
#pragma once

#include <cstdint>

#include "packfile/manifest.h"

namespace ek::pack {

inline constexpr uint64_t kTokenBytes = 4;         // int32, little-endian
inline constexpr uint64_t kMaskBytesPerToken = 1;  // 1: the token counts in the loss

// Bytes of one block in a rank's block file.
inline uint64_t BlockBytes(int seq_len) { return static_cast<uint64_t>(seq_len) * kTokenBytes; }

// Whether every rank of the pack has a loss-mask file.
inline bool HasLossMasks(const Manifest& m) { return m.loss_mask == "assistant"; }

}  // namespace ek::pack
