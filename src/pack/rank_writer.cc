#include "pack/rank_writer.h"

#include <algorithm>
#include <cstring>

#include "packfile/layout.h"

namespace ek::pack {

Result<std::unique_ptr<RankWriter>> RankWriter::Open(Env* env, const std::string& dir, int rank,
                                                     int seq_len, bool masks) {
  auto w = std::unique_ptr<RankWriter>(new RankWriter());
  w->seq_len_ = static_cast<size_t>(seq_len);
  EK_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(dir + "/" + RankFileName(rank), env));
  w->file_ = std::make_unique<AtomicFile>(std::move(f));
  w->hash_ = XXH3_createState();
  XXH3_64bits_reset(w->hash_);
  EK_ASSIGN_OR_RETURN(AtomicFile df, AtomicFile::Create(dir + "/" + DocsFileName(rank), env));
  w->docs_file_ = std::make_unique<AtomicFile>(std::move(df));
  w->docs_hash_ = XXH3_createState();
  XXH3_64bits_reset(w->docs_hash_);
  if (masks) {
    EK_ASSIGN_OR_RETURN(AtomicFile mf, AtomicFile::Create(dir + "/" + MaskFileName(rank), env));
    w->mask_file_ = std::make_unique<AtomicFile>(std::move(mf));
    w->mask_hash_ = XXH3_createState();
    XXH3_64bits_reset(w->mask_hash_);
  }
  return w;
}

RankWriter::~RankWriter() {
  if (hash_) XXH3_freeState(hash_);
  if (docs_hash_) XXH3_freeState(docs_hash_);
  if (mask_hash_) XXH3_freeState(mask_hash_);
}

// The partial block is the tail of buf_ (partial_tokens_ ids): a document's ids are
// copied once, into the output buffer, and a block is hashed and written from there.
Status RankWriter::Add(const int32_t* t, const uint8_t* mask, size_t n) {
  partial_docs_.push_back(static_cast<uint32_t>(partial_tokens_));
  bool first = true;  // the block the document starts in
  while (n > 0) {
    const size_t take = std::min(n, seq_len_ - partial_tokens_);
    buf_.append(reinterpret_cast<const char*>(t), take * sizeof(int32_t));
    int32_t top = partial_max_;
    for (size_t i = 0; i < take; ++i) top = std::max(top, t[i]);
    partial_max_ = top;
    if (mask_file_) partial_mask_.insert(partial_mask_.end(), mask, mask + take);
    t += take;
    mask += mask_file_ ? take : 0;
    n -= take;
    partial_tokens_ += take;
    if (partial_tokens_ == seq_len_) {
      partial_tokens_ = 0;  // the block is whole: Flush may write it
      EK_RETURN_IF_ERROR(CloseBlock(buf_.size() - BlockBytes(static_cast<int>(seq_len_)),
                                    partial_mask_.data(), partial_docs_, first && n > 0, SIZE_MAX,
                                    partial_max_));
      first = false;
      partial_max_ = -1;
      partial_mask_.clear();
      partial_docs_.clear();
    }
  }
  return Status::Ok();
}

Status RankWriter::WriteBlock(const int32_t* block, const uint8_t* mask,
                              const std::vector<uint32_t>& starts, bool split, size_t pad_from) {
  if (partial_tokens_ != 0) {
    return InternalError("RankWriter: a whole block written while Add's block is partial");
  }
  int32_t top = -1;
  for (size_t i = 0; i < seq_len_; ++i) top = std::max(top, block[i]);
  const size_t at = buf_.size();
  buf_.append(reinterpret_cast<const char*>(block), BlockBytes(static_cast<int>(seq_len_)));
  return CloseBlock(at, mask, starts, split, pad_from, top);
}

Status RankWriter::CloseBlock(size_t at, const uint8_t* mask, const std::vector<uint32_t>& starts,
                              bool split, size_t pad_from, int32_t top) {
  const uint64_t base = blocks_ * seq_len_;
  auto entry = [&](uint64_t e) {
    char bytes[kDocEntryBytes];
    std::memcpy(bytes, &e, kDocEntryBytes);
    docs_buf_.append(bytes, kDocEntryBytes);
  };
  for (uint32_t p : starts) entry(base + p);
  if (pad_from < seq_len_) {
    entry((base + pad_from) | kDocPadBit);
    padding_tokens_ += seq_len_ - pad_from;
  }
  documents_ += starts.size();
  split_documents_ += split ? 1 : 0;
  // The largest id written (the manifest's tokenizer.max_id): EOS, padding and
  // all, since every token of every kept block passes here.
  max_id_ = std::max(max_id_, top);
  XXH3_64bits_update(hash_, buf_.data() + at, BlockBytes(static_cast<int>(seq_len_)));
  if (mask_file_) {
    XXH3_64bits_update(mask_hash_, mask, seq_len_);
    mask_buf_.append(reinterpret_cast<const char*>(mask), seq_len_);
    for (size_t i = 0; i < seq_len_; ++i) loss_tokens_ += mask[i];
  }
  ++blocks_;
  if (buf_.size() >= (1u << 20)) return Flush();
  return Status::Ok();
}

// Writes the whole blocks; a partial one (Add's) stays, moved to the buffer's front.
Status RankWriter::Flush() {
  const size_t whole = buf_.size() - partial_tokens_ * sizeof(int32_t);
  EK_RETURN_IF_ERROR(file_->Write(std::string_view(buf_.data(), whole)));
  buf_.erase(0, whole);
  XXH3_64bits_update(docs_hash_, docs_buf_.data(), docs_buf_.size());
  EK_RETURN_IF_ERROR(docs_file_->Write(docs_buf_));
  docs_buf_.clear();
  if (mask_file_) {
    EK_RETURN_IF_ERROR(mask_file_->Write(mask_buf_));
    mask_buf_.clear();
  }
  return Status::Ok();
}

Status RankWriter::Sync() {
  EK_RETURN_IF_ERROR(file_->Sync());
  EK_RETURN_IF_ERROR(docs_file_->Sync());
  if (mask_file_) EK_RETURN_IF_ERROR(mask_file_->Sync());
  return Status::Ok();
}

Status RankWriter::Commit() {
  EK_RETURN_IF_ERROR(file_->Commit());
  EK_RETURN_IF_ERROR(docs_file_->Commit());
  if (mask_file_) EK_RETURN_IF_ERROR(mask_file_->Commit());
  return Status::Ok();
}

BalancedRouter::BalancedRouter(size_t seq, size_t world, bool masks,
                               std::vector<std::unique_ptr<RankWriter>>* writers,
                               std::vector<RankInfo>* stats)
    : seq_(seq),
      world_(world),
      masks_(masks),
      writers_(*writers),
      stats_(*stats),
      round_(world),
      round_mask_(world),
      round_docs_(world),
      round_split_(world, 0) {}

Status BalancedRouter::Add(const int32_t* t, const uint8_t* mask, size_t n) {
  cur_docs_.push_back(static_cast<uint32_t>(cur_.size()));
  bool first = true;  // the block the document starts in
  while (n > 0) {
    size_t take = std::min(n, seq_ - cur_.size());
    cur_.insert(cur_.end(), t, t + take);
    if (masks_) cur_mask_.insert(cur_mask_.end(), mask, mask + take);
    t += take;
    mask += masks_ ? take : 0;
    n -= take;
    if (cur_.size() == seq_) {
      size_t r = block_index_ % world_;
      round_[r].swap(cur_);
      round_mask_[r].swap(cur_mask_);
      round_docs_[r].swap(cur_docs_);
      round_split_[r] = first && n > 0;
      first = false;
      cur_.clear();
      cur_mask_.clear();
      cur_docs_.clear();
      ++block_index_;
      if (block_index_ % world_ == 0) EK_RETURN_IF_ERROR(WriteRound());
    }
  }
  return Status::Ok();
}

void BalancedRouter::Finish() {
  uint64_t pending = block_index_ % world_;
  for (size_t k = 0; k < pending; ++k) {
    stats_[k].tokens += seq_;
    stats_[k].dropped_tokens += seq_;
  }
  stats_[block_index_ % world_].tokens += cur_.size();
  stats_[block_index_ % world_].dropped_tokens += cur_.size();
}

Status BalancedRouter::WriteRound() {
  for (size_t k = 0; k < world_; ++k) {
    stats_[k].tokens += seq_;
    stats_[k].split_documents += round_split_[k] ? 1 : 0;
    if (writers_[k]) {
      EK_RETURN_IF_ERROR(writers_[k]->WriteBlock(round_[k].data(), round_mask_[k].data(),
                                                 round_docs_[k], round_split_[k]));
    }
    stats_[k].blocks += 1;
  }
  return Status::Ok();
}

}  // namespace ek::pack
