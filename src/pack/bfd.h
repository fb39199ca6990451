// Best-fit-decreasing bin packing of documents into blocks, as TRL's
// pack_dataset(strategy="bfd", on_seq_length_overflow="split") does it: a
// document longer than seq_len is cut into seq_len pieces first (the last one
// shorter), every piece packed as a document; pieces are taken by length,
// longest first, each into the open bin with the least room that still fits it
// (a segment tree over the bins' remaining room, O(log seq_len) a piece), a new
// bin when none fits. Ties of equal length are broken in a seeded order of the
// documents (core/random.h), a document's pieces staying in order; the bins'
// fill depends only on the lengths, so different seeds change which documents
// of equal length share a bin, nothing else. TRL's default
// (on_seq_length_overflow="truncate") drops a long document's tail; evenkeel
// never drops it.
//
// Memory: the lengths, the seeded order (16 bytes a document), one sort item
// (24 bytes), one placement (8) and one plan entry (16) a piece; never the tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace ek::pack {

struct BfdPiece {
  uint64_t doc = 0;     // index into the lengths
  uint32_t offset = 0;  // the piece's first token within its document
  uint32_t length = 0;
};

struct BfdPlan {
  // Bin b holds pieces[bin_start[b], bin_start[b + 1]) in this order, back to
  // back from position 0; the rest of the bin (seq_len minus their lengths) is padding.
  std::vector<uint64_t> bin_start{0};
  std::vector<BfdPiece> pieces;
  uint64_t split_documents = 0;  // documents longer than seq_len (more than one piece)
  uint64_t bins() const { return bin_start.size() - 1; }
  uint64_t fill(uint64_t b) const;  // tokens of bin b that are not padding
};

// `lengths`: each document's token count (0: a document with no tokens, placed
// nowhere). Deterministic: depends only on (lengths, seq_len, seed).
BfdPlan PlanBfd(const std::vector<uint32_t>& lengths, uint32_t seq_len, uint64_t seed);

}  // namespace ek::pack
