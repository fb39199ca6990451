// The ranks' output while a pack runs: each rank's block file, loss mask and document
// boundaries (docs/pack_format.md), written under hidden temporary names, hashed as
// they go, and renamed into place only by Commit; and balanced routing, which deals
// blocks to the ranks in rounds. Internal to the packer.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/file.h"
#include "core/status.h"
#include "packfile/manifest.h"

namespace ek::pack {

// Full blocks are appended (buffered) and hashed. A document start is held with its
// block until the block is written, so the docs file lists only the documents of
// blocks the rank keeps.
class RankWriter {
 public:
  static Result<std::unique_ptr<RankWriter>> Open(Env* env, const std::string& dir, int rank,
                                                  int seq_len, bool masks);
  ~RankWriter();
  RankWriter(const RankWriter&) = delete;
  RankWriter& operator=(const RankWriter&) = delete;

  // Stream mode (contiguous/strided): a document's tokens (and their mask bytes,
  // when the pack has masks) accumulate, full blocks go out; a partial block at the
  // end is not written. Not mixed with WriteBlock on one writer.
  Status Add(const int32_t* t, const uint8_t* mask, size_t n);
  // `starts`: the positions in the block where documents (or, bfd, the last
  // piece of a long one) begin, ascending; `split`: the block ends inside a
  // document that starts in it; the block is padding from `pad_from` on
  // (seq_len: none).
  Status WriteBlock(const int32_t* block, const uint8_t* mask, const std::vector<uint32_t>& starts,
                    bool split, size_t pad_from = SIZE_MAX);
  Status Flush();
  Status Sync();
  Status Commit();

  uint64_t blocks() const { return blocks_; }
  uint64_t digest() const { return XXH3_64bits_digest(hash_); }
  bool has_mask() const { return mask_file_ != nullptr; }
  uint64_t mask_digest() const { return XXH3_64bits_digest(mask_hash_); }
  uint64_t loss_tokens() const { return loss_tokens_; }
  uint64_t docs_digest() const { return XXH3_64bits_digest(docs_hash_); }
  uint64_t documents() const { return documents_; }
  uint64_t padding_tokens() const { return padding_tokens_; }
  uint64_t split_documents() const { return split_documents_; }
  int32_t max_id() const { return max_id_; }  // -1 before the first block

 private:
  RankWriter() = default;
  size_t seq_len_ = 0;
  std::unique_ptr<AtomicFile> file_, mask_file_, docs_file_;
  XXH3_state_t* hash_ = nullptr;
  XXH3_state_t* docs_hash_ = nullptr;
  XXH3_state_t* mask_hash_ = nullptr;
  // A block of buf_ (from byte `at`, whole) is done: its documents, hashes, counts
  // and mask; `top` is its largest id.
  Status CloseBlock(size_t at, const uint8_t* mask, const std::vector<uint32_t>& starts, bool split,
                    size_t pad_from, int32_t top);
  size_t partial_tokens_ = 0;  // Add's partial block: the last ids in buf_, not yet written
  int32_t partial_max_ = -1;
  std::vector<uint8_t> partial_mask_;
  std::vector<uint32_t> partial_docs_;     // document starts in the partial block
  std::string buf_, mask_buf_, docs_buf_;  // buf_: whole blocks, then the partial one
  uint64_t blocks_ = 0, loss_tokens_ = 0, documents_ = 0, padding_tokens_ = 0, split_documents_ = 0;
  int32_t max_id_ = -1;
};

// Balanced routing: one stream of every record's tokens, block i to rank i mod world,
// whole rounds only (a round is one block for every rank, written when it is full).
// `writers` holds the ranks written (null elsewhere), `stats` every rank's counts.
class BalancedRouter {
 public:
  BalancedRouter(size_t seq, size_t world, bool masks,
                 std::vector<std::unique_ptr<RankWriter>>* writers, std::vector<RankInfo>* stats);

  // The rank whose block the next record starts in.
  size_t next_rank() const { return block_index_ % world_; }
  // One record's tokens (EOS included) and, with masks, its mask bytes.
  Status Add(const int32_t* t, const uint8_t* mask, size_t n);
  // Counts what is dropped at the end: the blocks of the unfinished round and the
  // partial block.
  void Finish();

 private:
  Status WriteRound();

  const size_t seq_, world_;
  const bool masks_;
  std::vector<std::unique_ptr<RankWriter>>& writers_;
  std::vector<RankInfo>& stats_;
  std::vector<int32_t> cur_;
  std::vector<uint8_t> cur_mask_;
  std::vector<uint32_t> cur_docs_;  // document starts in `cur_`
  std::vector<std::vector<int32_t>> round_;
  std::vector<std::vector<uint8_t>> round_mask_;
  std::vector<std::vector<uint32_t>> round_docs_;
  std::vector<char> round_split_;
  uint64_t block_index_ = 0;
};

}  // namespace ek::pack
