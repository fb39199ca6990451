#include "loader/block_file.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "packfile/layout.h"

namespace ek::loader {

Result<BlockFile> BlockFile::Open(const std::string& pack_dir, int rank) {
  EK_ASSIGN_OR_RETURN(pack::Manifest manifest, pack::ReadManifest(pack_dir));
  return Open(pack_dir, manifest, rank);
}

Result<BlockFile> BlockFile::Open(const std::string& pack_dir, const pack::Manifest& manifest,
                                  int rank) {
  const std::string manifest_path = pack_dir + "/manifest.json";
  if (rank < 0 || rank >= manifest.world) {
    return InvalidArgumentError(fmt::format("loader: {}: rank {} is outside the pack's world of {}",
                                            manifest_path, rank, manifest.world));
  }
  if (manifest.seq_len <= 0) {
    return CorruptError(
        fmt::format("loader: {}: seq_len {} is not positive", manifest_path, manifest.seq_len));
  }
  const pack::RankInfo* info = nullptr;
  for (const pack::RankInfo& r : manifest.ranks) {
    if (r.rank == rank) info = &r;
  }
  if (info == nullptr) {
    return NotFoundError(
        fmt::format("loader: {}: rank {} is not in this pack (a node's part made with --ranks?)",
                    manifest_path, rank));
  }
  const std::string path =
      pack_dir + "/" + (info->file.empty() ? pack::RankFileName(rank) : info->file);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return NotFoundError(fmt::format("loader: {}: missing block file of rank {}", path, rank));
  }
  const uint64_t block_bytes = pack::BlockBytes(manifest.seq_len);
  const uint64_t want = info->blocks * block_bytes;
  if (static_cast<uint64_t>(st.st_size) != want) {
    return CorruptError(fmt::format(
        "loader: {}: {} bytes, but the manifest says {} blocks x {} tokens x {} = {} bytes ({})",
        path, static_cast<uint64_t>(st.st_size), info->blocks, manifest.seq_len, pack::kTokenBytes,
        want, static_cast<uint64_t>(st.st_size) < want ? "truncated" : "longer than the manifest"));
  }
  BlockFile out;
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status().WithContext("loader");
  out.file_ = std::move(mapped).value();
  if (out.file_.size() != want) {  // the file changed between stat and mmap
    return CorruptError(fmt::format("loader: {}: size changed while opening", path));
  }
  if (pack::HasLossMasks(manifest)) {
    const std::string mask_path =
        pack_dir + "/" + (info->mask_file.empty() ? pack::MaskFileName(rank) : info->mask_file);
    struct stat ms {};
    if (::stat(mask_path.c_str(), &ms) != 0) {
      return NotFoundError(
          fmt::format("loader: {}: missing loss-mask file of rank {} (the manifest says the pack "
                      "has assistant loss masks)",
                      mask_path, rank));
    }
    const uint64_t tokens =
        info->blocks * static_cast<uint64_t>(manifest.seq_len) * pack::kMaskBytesPerToken;
    if (static_cast<uint64_t>(ms.st_size) != tokens) {
      return CorruptError(
          fmt::format("loader: {}: {} bytes, but {} holds {} tokens (one mask byte each; {})",
                      mask_path, static_cast<uint64_t>(ms.st_size), path, tokens,
                      static_cast<uint64_t>(ms.st_size) < tokens ? "truncated" : "too long"));
    }
    auto mask = MappedFile::Open(mask_path);
    if (!mask.ok()) return mask.status().WithContext("loader");
    out.mask_file_ = std::move(mask).value();
    if (out.mask_file_.size() != tokens)
      return CorruptError(fmt::format("loader: {}: size changed while opening", mask_path));
    out.has_mask_ = true;
  }
  if (!info->docs_file.empty()) {
    const std::string docs_path = pack_dir + "/" + info->docs_file;
    struct stat ds {};
    if (::stat(docs_path.c_str(), &ds) != 0) {
      return NotFoundError(fmt::format(
          "loader: {}: missing document-boundaries file of rank {} (the manifest lists it)",
          docs_path, rank));
    }
    auto docs = MappedFile::Open(docs_path);
    if (!docs.ok()) return docs.status().WithContext("loader");
    out.docs_file_ = std::move(docs).value();
    const std::string_view bytes = out.docs_file_.data();
    const uint64_t h = XXH3_64bits(bytes.data(), bytes.size());
    if (h != info->docs_xxh3) {
      return CorruptError(fmt::format("loader: {}: checksum {:016x}, the manifest says {:016x}",
                                      docs_path, h, info->docs_xxh3));
    }
    auto counts = pack::CheckDocEntries(bytes, info->blocks, manifest.seq_len, docs_path);
    if (!counts.ok()) return counts.status().WithContext("loader");
    if (counts->documents != info->documents) {
      return CorruptError(fmt::format("loader: {}: {} document starts, the manifest says {}",
                                      docs_path, counts->documents, info->documents));
    }
    out.has_docs_ = true;
  }
  out.manifest_ = manifest;
  out.blocks_ = info->blocks;
  out.seq_len_ = manifest.seq_len;
  out.rank_ = rank;
  return out;
}

}  // namespace ek::loader
