// One rank's block file (DIR/rank-NNNNN.i32, docs/pack_format.md), mapped
// read-only and checked against the pack's manifest before anything reads it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/file.h"
#include "core/status.h"
#include "packfile/layout.h"
#include "packfile/manifest.h"

namespace ek::loader {

// A validated, read-only mapping of one rank's blocks: blocks() x seq_len()
// little-endian int32 token ids. Movable, not copyable; every pointer and span
// it hands out lives as long as the BlockFile. Thread-safe for concurrent reads.
class BlockFile {
 public:
  // Reads DIR/manifest.json and opens the file of `rank`. Fails, naming the
  // file, when the manifest is missing or does not list the rank, the file is
  // missing, or its size is not the manifest's blocks * seq_len * 4.
  static Result<BlockFile> Open(const std::string& pack_dir, int rank);
  // As above with a manifest the caller already read from `pack_dir`.
  static Result<BlockFile> Open(const std::string& pack_dir, const pack::Manifest& manifest,
                                int rank);

  BlockFile() = default;
  BlockFile(BlockFile&&) noexcept = default;
  BlockFile& operator=(BlockFile&&) noexcept = default;

  // The first token of block 0; null when the file holds no blocks. Page-aligned.
  const int32_t* data() const { return reinterpret_cast<const int32_t*>(file_.data().data()); }
  uint64_t size_bytes() const { return file_.size(); }
  uint64_t blocks() const { return blocks_; }
  int seq_len() const { return seq_len_; }
  int rank() const { return rank_; }
  const std::string& path() const { return file_.path(); }
  const pack::Manifest& manifest() const { return manifest_; }

  // The loss mask (packs made with --loss-mask assistant): one byte per token,
  // aligned with data(), 1 where the token counts in the loss. Null otherwise.
  bool has_mask() const { return has_mask_; }
  const uint8_t* mask() const {
    return has_mask_ ? reinterpret_cast<const uint8_t*>(mask_file_.data().data()) : nullptr;
  }

  // The document boundaries (packfile/layout.h): the rank's entries, ascending
  // token offsets where a segment begins, bit 63 set where a block's padding
  // begins; checked against the manifest (size, checksum, order, range, count)
  // when opened. False and empty for a pack made before them.
  bool has_docs() const { return has_docs_; }
  std::span<const uint64_t> docs() const {
    if (!has_docs_ || docs_file_.size() == 0) return {};
    return {reinterpret_cast<const uint64_t*>(docs_file_.data().data()),
            docs_file_.size() / pack::kDocEntryBytes};
  }

  // Block `i` (precondition: i < blocks()).
  std::span<const int32_t> Block(uint64_t i) const {
    return {data() + i * static_cast<uint64_t>(seq_len_), static_cast<size_t>(seq_len_)};
  }

 private:
  MappedFile file_;
  MappedFile mask_file_;
  MappedFile docs_file_;
  bool has_mask_ = false;
  bool has_docs_ = false;
  pack::Manifest manifest_;
  uint64_t blocks_ = 0;
  int seq_len_ = 0;
  int rank_ = 0;
};

}  // namespace ek::loader
