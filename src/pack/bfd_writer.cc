#include "pack/bfd_writer.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

#include "pack/bfd.h"
#include "packfile/layout.h"

namespace ek::pack {

Status Spill::Open(Env* env, const std::string& dir, bool masks) {
  EK_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(dir + "/.rank-spill.i32", env));
  file_ = std::make_unique<AtomicFile>(std::move(f));
  if (masks) {
    EK_ASSIGN_OR_RETURN(AtomicFile mf, AtomicFile::Create(dir + "/.rank-spill.mask", env));
    mask_file_ = std::make_unique<AtomicFile>(std::move(mf));
  }
  return Status::Ok();
}

Status Spill::Add(int owner, const int32_t* ids, const uint8_t* mask, size_t n) {
  if (n > UINT32_MAX) {
    return InvalidArgumentError(fmt::format("a record of {} tokens: bfd packs at most {}", n,
                                            static_cast<uint64_t>(UINT32_MAX)));
  }
  docs_.push_back({tokens_, static_cast<uint32_t>(n), static_cast<int32_t>(owner)});
  tokens_ += n;
  buf_.append(reinterpret_cast<const char*>(ids), n * kTokenBytes);
  if (mask_file_) mask_buf_.append(reinterpret_cast<const char*>(mask), n);
  return buf_.size() >= (8u << 20) ? Flush() : Status::Ok();
}

Status Spill::Map() {
  EK_RETURN_IF_ERROR(Flush());
  EK_RETURN_IF_ERROR(file_->Sync());
  EK_ASSIGN_OR_RETURN(map_, MappedFile::Open(file_->temp_path()));
  if (mask_file_) {
    EK_RETURN_IF_ERROR(mask_file_->Sync());
    EK_ASSIGN_OR_RETURN(mask_map_, MappedFile::Open(mask_file_->temp_path()));
  }
  if (map_.size() != tokens_ * kTokenBytes)
    return InternalError(fmt::format("{}: short spill", file_->temp_path()));
  return Status::Ok();
}

Status Spill::Flush() {
  EK_RETURN_IF_ERROR(file_->Write(buf_));
  buf_.clear();
  if (mask_file_) {
    EK_RETURN_IF_ERROR(mask_file_->Write(mask_buf_));
    mask_buf_.clear();
  }
  return Status::Ok();
}

Status WriteBfdBins(const PackOptions& opt, int64_t eos, bool masks, int lo, int hi, Spill* spill,
                    std::vector<std::unique_ptr<RankWriter>>* writers,
                    std::vector<RankInfo>* stats) {
  EK_RETURN_IF_ERROR(spill->Map());
  const size_t seq = static_cast<size_t>(opt.seq_len);
  const uint64_t world = static_cast<uint64_t>(opt.world);
  const auto& docs = spill->docs();
  std::vector<int32_t> block(seq);
  std::vector<uint8_t> block_mask(masks ? seq : 1);
  std::vector<uint32_t> starts;
  auto pack_group = [&](const std::vector<uint64_t>& group, int rank) -> Status {
    std::vector<uint32_t> lengths(group.size());
    for (size_t i = 0; i < group.size(); ++i) lengths[i] = docs[group[i]].length;
    const BfdPlan plan = PlanBfd(lengths, static_cast<uint32_t>(seq), opt.packing_seed);
    const uint64_t bins = plan.bins();
    const uint64_t kept = rank < 0 ? bins - bins % world : bins;
    for (uint64_t b = 0; b < bins; ++b) {
      const int r = rank < 0 ? static_cast<int>(b % world) : rank;
      RankInfo& st = (*stats)[static_cast<size_t>(r)];
      size_t pos = 0;
      uint64_t firsts = 0;
      bool split = false;
      starts.clear();
      for (uint64_t i = plan.bin_start[b]; i < plan.bin_start[b + 1]; ++i) {
        const BfdPiece& piece = plan.pieces[i];
        const Spill::Doc& d = docs[group[piece.doc]];
        // A document's first piece, or its last at a block's middle: a segment start.
        if (piece.offset == 0 || pos > 0) starts.push_back(static_cast<uint32_t>(pos));
        if (piece.offset == 0) {
          ++firsts;
          split |= d.length > seq;
        }
        const uint64_t from = d.at + piece.offset;
        std::memcpy(block.data() + pos, spill->tokens() + from * kTokenBytes,
                    piece.length * kTokenBytes);
        if (masks) std::memcpy(block_mask.data() + pos, spill->mask() + from, piece.length);
        pos += piece.length;
      }
      st.tokens += pos;
      if (b >= kept) {  // balanced's unfinished round
        st.dropped_tokens += pos;
        continue;
      }
      std::fill(block.begin() + static_cast<std::ptrdiff_t>(pos), block.end(),
                static_cast<int32_t>(eos));
      if (masks)
        std::fill(block_mask.begin() + static_cast<std::ptrdiff_t>(pos), block_mask.end(), 0);
      st.blocks += 1;
      st.records += firsts;
      st.padding_tokens += seq - pos;
      st.split_documents += split ? 1 : 0;
      if (RankWriter* w = (*writers)[static_cast<size_t>(r)].get()) {
        EK_RETURN_IF_ERROR(w->WriteBlock(block.data(), block_mask.data(), starts, split, pos));
      }
    }
    return Status::Ok();
  };
  if (opt.shard == ShardMode::kBalanced) {
    std::vector<uint64_t> all(docs.size());
    for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
    return pack_group(all, -1);
  }
  for (int r = lo; r <= hi; ++r) {
    std::vector<uint64_t> mine;
    for (uint64_t i = 0; i < docs.size(); ++i) {
      if (docs[i].owner == r) mine.push_back(i);
    }
    EK_RETURN_IF_ERROR(pack_group(mine, r));
  }
  return Status::Ok();
}

}  // namespace ek::pack
