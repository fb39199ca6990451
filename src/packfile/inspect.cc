#include "packfile/inspect.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <cstring>

#include "core/file.h"
#include "core/thread_pool.h"
#include "packfile/layout.h"

namespace ek::pack {

bool InspectReport::ok() const {
  for (const auto& r : ranks) {
    if (!r.problems.empty()) return false;
  }
  return manifest.complete();
}

namespace {

// The loss mask beside a block file: one byte per token, each 0 or 1, its
// checksum and count of ones as the manifest says.
void CheckMask(const Manifest& m, const RankInfo& info, const std::string& dir, RankCheck* out) {
  auto f = MappedFile::Open(dir + "/" + info.mask_file);
  if (!f.ok()) {
    out->problems.push_back(fmt::format("{}: {}", info.mask_file, f.status().message()));
    return;
  }
  const uint64_t want = info.blocks * static_cast<uint64_t>(m.seq_len);
  if (f->size() != want) {
    out->problems.push_back(fmt::format("{}: {} bytes, but {} has {} tokens (one mask byte each)",
                                        info.mask_file, f->size(), info.file, want));
    return;
  }
  const unsigned char* p = reinterpret_cast<const unsigned char*>(f->data().data());
  uint64_t ones = 0, bad = 0;
  int64_t first_bad = -1;
  for (uint64_t i = 0; i < want; ++i) {
    ones += p[i] == 1;
    if (p[i] > 1) {
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
      ++bad;
    }
  }
  uint64_t h = XXH3_64bits(p, want);
  if (h != info.mask_xxh3) {
    out->problems.push_back(fmt::format("{}: checksum {:016x}, manifest says {:016x}",
                                        info.mask_file, h, info.mask_xxh3));
  }
  if (bad) {
    out->problems.push_back(fmt::format("{}: {} byte(s) neither 0 nor 1 (first at token {})",
                                        info.mask_file, bad, first_bad));
  }
  if (ones != info.loss_tokens) {
    out->problems.push_back(fmt::format("{}: {} tokens marked, manifest says {}", info.mask_file,
                                        ones, info.loss_tokens));
  }
}

// The document boundaries beside a block file: CheckDocEntries' rules, the
// checksum and the count of documents as the manifest says.
void CheckDocs(const Manifest& m, const RankInfo& info, const std::string& dir, RankCheck* out) {
  auto f = MappedFile::Open(dir + "/" + info.docs_file);
  if (!f.ok()) {
    out->problems.push_back(fmt::format("{}: {}", info.docs_file, f.status().message()));
    return;
  }
  const uint64_t h = XXH3_64bits(f->data().data(), f->size());
  if (h != info.docs_xxh3) {
    out->problems.push_back(fmt::format("{}: checksum {:016x}, manifest says {:016x}",
                                        info.docs_file, h, info.docs_xxh3));
  }
  auto counts = CheckDocEntries(f->data(), info.blocks, m.seq_len, info.docs_file);
  if (!counts.ok()) {
    out->problems.push_back(counts.status().message());
    return;
  }
  out->documents = counts->documents;
  out->pads = counts->pads;
  if (counts->pads > 0 && m.packing != Packing::kBfd) {
    out->problems.push_back(fmt::format("{}: {} padding entries, but {} packing writes no padding",
                                        info.docs_file, counts->pads, PackingName(m.packing)));
  }
  if (counts->padding_tokens != info.padding_tokens) {
    out->problems.push_back(fmt::format("{}: {} padding tokens, manifest says {}", info.docs_file,
                                        counts->padding_tokens, info.padding_tokens));
  }
  if (counts->documents != info.documents) {
    out->problems.push_back(fmt::format("{}: {} document starts, manifest says {}", info.docs_file,
                                        counts->documents, info.documents));
  }
}

void CheckRank(const Manifest& m, const RankInfo& info, const std::string& dir, bool check_tokens,
               RankCheck* out) {
  out->rank = info.rank;
  std::string path = dir + "/" + info.file;
  auto f = MappedFile::Open(path);
  if (!f.ok()) {
    out->problems.push_back(fmt::format("{}: {}", info.file, f.status().message()));
    return;
  }
  out->exists = true;
  out->size = f->size();
  uint64_t block_bytes = BlockBytes(m.seq_len);
  if (out->size % block_bytes != 0) {
    out->problems.push_back(fmt::format("{}: {} bytes is not a whole number of {}-byte blocks",
                                        info.file, out->size, block_bytes));
  }
  if (out->size != info.bytes) {
    out->problems.push_back(
        fmt::format("{}: {} bytes, manifest says {}", info.file, out->size, info.bytes));
  }
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  const char* p = f->data().data();
  // Every id below vocab_size, and none above max_id where the manifest records it.
  const uint32_t vocab = static_cast<uint32_t>(m.vocab_size);
  const uint32_t limit = static_cast<uint32_t>(m.largest_id()) + 1;
  constexpr size_t kSlice = 256 << 10;
  for (size_t off = 0; off < out->size; off += kSlice) {
    size_t len = std::min(kSlice, static_cast<size_t>(out->size - off));
    XXH3_64bits_update(st, p + off, len);
    if (!check_tokens) continue;
    const size_t n = len / 4;
    // Branch-free scan: unsigned compare catches negatives too.
    uint32_t worst = 0;
    const char* q = p + off;
    for (size_t i = 0; i < n; ++i) {
      uint32_t v;
      std::memcpy(&v, q + 4 * i, 4);
      worst |= (v >= limit);
    }
    if (worst) {
      for (size_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, q + 4 * i, 4);
        if (static_cast<uint32_t>(v) >= vocab) {
          if (out->bad_tokens == 0) {
            out->first_bad_token_at = static_cast<int64_t>((off / 4) + i);
            out->first_bad_token = v;
          }
          ++out->bad_tokens;
        } else if (static_cast<uint32_t>(v) >= limit) {
          if (out->over_max_tokens == 0) {
            out->first_over_max_at = static_cast<int64_t>((off / 4) + i);
            out->first_over_max = v;
          }
          ++out->over_max_tokens;
        }
      }
    }
  }
  out->xxh3 = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  if (out->xxh3 != info.xxh3) {
    out->problems.push_back(fmt::format("{}: checksum {:016x}, manifest says {:016x}", info.file,
                                        out->xxh3, info.xxh3));
  }
  if (out->bad_tokens) {
    out->problems.push_back(
        fmt::format("{}: {} token(s) outside the vocabulary (first: {} at token {})", info.file,
                    out->bad_tokens, out->first_bad_token, out->first_bad_token_at));
  }
  if (out->over_max_tokens) {
    out->problems.push_back(fmt::format(
        "{}: {} token(s) above the manifest's tokenizer.max_id {} (first: {} at token {})",
        info.file, out->over_max_tokens, m.max_id, out->first_over_max, out->first_over_max_at));
  }
  if (HasLossMasks(m)) CheckMask(m, info, dir, out);
  if (!info.docs_file.empty()) CheckDocs(m, info, dir, out);
}

}  // namespace

InspectReport InspectWith(const Manifest& m, const std::string& dir, size_t threads,
                          bool check_tokens) {
  InspectReport report;
  report.manifest = m;
  report.ranks.resize(m.ranks.size());
  ThreadPool pool(threads);
  pool.ParallelFor(m.ranks.size(), [&](size_t i, size_t) {
    CheckRank(m, m.ranks[i], dir, check_tokens, &report.ranks[i]);
  });
  return report;
}

Result<InspectReport> Inspect(const std::string& dir, size_t threads, bool check_tokens) {
  EK_ASSIGN_OR_RETURN(Manifest m, ReadManifest(dir));
  return InspectWith(m, dir, threads, check_tokens);
}

Result<std::vector<int32_t>> ReadBlock(const std::string& dir, const Manifest& m, int rank,
                                       uint64_t block) {
  const RankInfo* info = nullptr;
  for (const auto& r : m.ranks) {
    if (r.rank == rank) info = &r;
  }
  if (!info) return NotFoundError(fmt::format("rank {} is not in this pack's manifest", rank));
  if (block >= info->blocks) {
    return InvalidArgumentError(
        fmt::format("rank {} has {} blocks; block {} does not exist", rank, info->blocks, block));
  }
  EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(dir + "/" + info->file));
  uint64_t bytes = BlockBytes(m.seq_len);
  if (f.size() < (block + 1) * bytes)
    return CorruptError(fmt::format("{}: shorter than the manifest says", f.path()));
  std::vector<int32_t> out(static_cast<size_t>(m.seq_len));
  std::memcpy(out.data(), f.data().data() + block * bytes, bytes);
  return out;
}

}  // namespace ek::pack
