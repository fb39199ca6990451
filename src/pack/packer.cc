#include "pack/packer.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>

#include "core/clock.h"
#include "core/file.h"
#include "core/json_out.h"
#include "core/jsonl.h"
#include "core/thread_pool.h"
#include "core/version.h"
#include "ingest/arrow_source.h"
#include "ingest/source.h"
#include "pack/bfd.h"
#include "pack/mixture.h"
#include "packfile/layout.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

namespace ek::pack {

static_assert(std::endian::native == std::endian::little, "block files are little-endian int32");

int OwnerOf(ShardMode mode, uint64_t index, uint64_t total, int world) {
  uint64_t w = static_cast<uint64_t>(world);
  if (mode == ShardMode::kStrided) return static_cast<int>(index % w);
  // datasets: div = n // w, mod = n % w; shard r = [div*r + min(r, mod), +div + (r < mod)).
  uint64_t div = total / w, mod = total % w;
  uint64_t boundary = mod * (div + 1);
  if (index < boundary) return static_cast<int>(index / (div + 1));
  return static_cast<int>(mod + (index - boundary) / div);
}

std::string ConfigBeside(const std::string& tokenizer_path) {
  std::filesystem::path dir = std::filesystem::path(tokenizer_path).parent_path();
  return ((dir.empty() ? std::filesystem::path(".") : dir) / "tokenizer_config.json").string();
}

void MaskFromSpans(const std::vector<uint32_t>& ends,
                   const std::vector<std::pair<size_t, size_t>>& spans,
                   std::vector<uint8_t>* mask) {
  size_t sp = 0, start = 0;
  for (uint32_t end : ends) {
    while (sp < spans.size() && spans[sp].second <= start) ++sp;
    bool on = sp < spans.size() && spans[sp].first < end && spans[sp].second > start && end > start;
    mask->push_back(on ? 1 : 0);
    start = end;
  }
}

Result<std::string> EosFromConfig(const std::string& tokenizer_path) {
  std::string path = ConfigBeside(tokenizer_path);
  auto data = ReadFile(path);
  if (!data.ok()) {
    return NotFoundError(fmt::format("no EOS token: {} is not readable; pass --eos TOKEN", path));
  }
  // On-demand parsing: configs carry values the DOM parser rejects (e.g. a
  // model_max_length of 1e30 written as an integer), and we need one field.
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(*data);
  simdjson::ondemand::document doc;
  simdjson::ondemand::value eos;
  if (parser.iterate(padded).get(doc)) return InvalidArgumentError(path + ": malformed JSON");
  auto err = doc.find_field_unordered("eos_token").get(eos);
  if (err == simdjson::NO_SUCH_FIELD)
    return NotFoundError(fmt::format("{} has no eos_token; pass --eos TOKEN", path));
  if (err)
    return InvalidArgumentError(
        fmt::format("{}: malformed JSON ({})", path, simdjson::error_message(err)));
  std::string_view s;
  if (eos.is_null())
    return NotFoundError(fmt::format("{}: eos_token is null; pass --eos TOKEN", path));
  if (eos.type().value_unsafe() == simdjson::ondemand::json_type::string) {
    if (!eos.get_string().get(s)) return std::string(s);
  } else if (eos.type().value_unsafe() == simdjson::ondemand::json_type::object) {
    if (!eos["content"].get_string().get(s)) return std::string(s);
  }
  return InvalidArgumentError(path + ": eos_token is neither a string nor {\"content\": ...}");
}

namespace {

// One rank's block file, its loss mask and its document boundaries: full
// blocks are appended (buffered) and hashed. A document start is held with its
// block until the block is written, so the docs file lists only the documents
// of blocks the rank keeps.
class RankWriter {
 public:
  static Result<std::unique_ptr<RankWriter>> Open(Env* env, const std::string& dir, int rank,
                                                  int seq_len, bool masks) {
    auto w = std::unique_ptr<RankWriter>(new RankWriter());
    w->rank_ = rank;
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
  ~RankWriter() {
    XXH3_freeState(hash_);
    XXH3_freeState(docs_hash_);
    if (mask_hash_) XXH3_freeState(mask_hash_);
  }

  // Stream mode (contiguous/strided): a document's tokens (and their mask bytes,
  // when the pack has masks) accumulate, full blocks go out.
  Status Add(const int32_t* t, const uint8_t* mask, size_t n) {
    partial_docs_.push_back(static_cast<uint32_t>(partial_.size()));
    bool first = true;  // the block the document starts in
    while (n > 0) {
      size_t take = std::min(n, seq_len_ - partial_.size());
      partial_.insert(partial_.end(), t, t + take);
      if (mask_file_) partial_mask_.insert(partial_mask_.end(), mask, mask + take);
      t += take;
      mask += mask_file_ ? take : 0;
      n -= take;
      if (partial_.size() == seq_len_) {
        EK_RETURN_IF_ERROR(
            WriteBlock(partial_.data(), partial_mask_.data(), partial_docs_, first && n > 0));
        first = false;
        partial_.clear();
        partial_mask_.clear();
        partial_docs_.clear();
      }
    }
    return Status::Ok();
  }
  // `starts`: the positions in the block where documents (or, bfd, the last
  // piece of a long one) begin, ascending; `split`: the block ends inside a
  // document that starts in it; the block is padding from `pad_from` on
  // (seq_len: none).
  Status WriteBlock(const int32_t* block, const uint8_t* mask, const std::vector<uint32_t>& starts,
                    bool split, size_t pad_from = SIZE_MAX) {
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
    int32_t top = max_id_;
    for (size_t i = 0; i < seq_len_; ++i) top = std::max(top, block[i]);
    max_id_ = top;
    const char* p = reinterpret_cast<const char*>(block);
    size_t bytes = BlockBytes(static_cast<int>(seq_len_));
    XXH3_64bits_update(hash_, p, bytes);
    buf_.append(p, bytes);
    if (mask_file_) {
      XXH3_64bits_update(mask_hash_, mask, seq_len_);
      mask_buf_.append(reinterpret_cast<const char*>(mask), seq_len_);
      for (size_t i = 0; i < seq_len_; ++i) loss_tokens_ += mask[i];
    }
    ++blocks_;
    if (buf_.size() >= (1u << 20)) return Flush();
    return Status::Ok();
  }
  Status Flush() {
    EK_RETURN_IF_ERROR(file_->Write(buf_));
    buf_.clear();
    XXH3_64bits_update(docs_hash_, docs_buf_.data(), docs_buf_.size());
    EK_RETURN_IF_ERROR(docs_file_->Write(docs_buf_));
    docs_buf_.clear();
    if (mask_file_) {
      EK_RETURN_IF_ERROR(mask_file_->Write(mask_buf_));
      mask_buf_.clear();
    }
    return Status::Ok();
  }
  Status Sync() {
    EK_RETURN_IF_ERROR(file_->Sync());
    EK_RETURN_IF_ERROR(docs_file_->Sync());
    if (mask_file_) EK_RETURN_IF_ERROR(mask_file_->Sync());
    return Status::Ok();
  }
  Status Commit() {
    EK_RETURN_IF_ERROR(file_->Commit());
    EK_RETURN_IF_ERROR(docs_file_->Commit());
    if (mask_file_) EK_RETURN_IF_ERROR(mask_file_->Commit());
    return Status::Ok();
  }
  size_t partial_tokens() const { return partial_.size(); }
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
  int rank_ = 0;
  size_t seq_len_ = 0;
  std::unique_ptr<AtomicFile> file_, mask_file_, docs_file_;
  XXH3_state_t* hash_ = nullptr;
  XXH3_state_t* docs_hash_ = nullptr;
  XXH3_state_t* mask_hash_ = nullptr;
  std::vector<int32_t> partial_;
  std::vector<uint8_t> partial_mask_;
  std::vector<uint32_t> partial_docs_;  // document starts in the partial block
  std::string buf_, mask_buf_, docs_buf_;
  uint64_t blocks_ = 0, loss_tokens_ = 0, documents_ = 0, padding_tokens_ = 0, split_documents_ = 0;
  int32_t max_id_ = -1;
};

// bfd's pass-2 output: every record's tokens (and mask bytes) in record order in
// hidden temporary files beside the pack (removed when done; a killed run's are
// stale temps), each record's place, length and owner in memory, so that the bins
// are written from a mapping without holding the tokens. It costs a write and a
// read of the token stream (4 bytes a token, 5 with masks) on the pack's disk.
class Spill {
 public:
  struct Doc {
    uint64_t at;  // the record's first token in the spill
    uint32_t length;
    int32_t owner;  // contiguous/strided: its rank; balanced: -1
  };
  Status Open(Env* env, const std::string& dir, bool masks) {
    EK_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(dir + "/.rank-spill.i32", env));
    file_ = std::make_unique<AtomicFile>(std::move(f));
    if (masks) {
      EK_ASSIGN_OR_RETURN(AtomicFile mf, AtomicFile::Create(dir + "/.rank-spill.mask", env));
      mask_file_ = std::make_unique<AtomicFile>(std::move(mf));
    }
    return Status::Ok();
  }
  Status Add(int owner, const int32_t* ids, const uint8_t* mask, size_t n) {
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
  // Flushes and closes the files and maps them.
  Status Map() {
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
  const std::vector<Doc>& docs() const { return docs_; }
  const char* tokens() const { return map_.data().data(); }
  const char* mask() const { return mask_map_.data().data(); }

 private:
  Status Flush() {
    EK_RETURN_IF_ERROR(file_->Write(buf_));
    buf_.clear();
    if (mask_file_) {
      EK_RETURN_IF_ERROR(mask_file_->Write(mask_buf_));
      mask_buf_.clear();
    }
    return Status::Ok();
  }
  std::unique_ptr<AtomicFile> file_, mask_file_;  // never committed: removed with them
  MappedFile map_, mask_map_;
  std::vector<Doc> docs_;
  std::string buf_, mask_buf_;
  uint64_t tokens_ = 0;
};

// Plans the spilled records' bins (pack/bfd.h) and writes them: balanced, one plan
// over every record, bin b to rank b mod world, whole rounds only (a partial
// round's tokens are the tail, dropped); contiguous/strided, one plan per rank
// over its records, every bin kept. A bin is its pieces back to back, then EOS
// padding (mask 0) to seq_len, recorded in the docs file with the pad bit.
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

// Removes hidden temp files that a killed run left behind.
void RemoveStaleTemps(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  if (!names.ok()) return;
  for (const std::string& n : *names) {
    bool ours = (n.rfind(".rank-", 0) == 0 || n.rfind(".manifest.json.", 0) == 0 ||
                 n.rfind(".skipped.jsonl.", 0) == 0) &&
                n.find(".tmp.") != std::string::npos;
    if (ours) (void)env->RemoveFile(dir + "/" + n);
  }
}

struct RecRef {
  ingest::SourceRecord rec;
  uint64_t index;  // global record index (every record read, skipped ones included)
  int owner;       // rank (contiguous/strided), -1 for balanced
  bool needed;
};
struct TaskOut {
  std::vector<int32_t> ids;       // each record's ids, EOS included
  std::vector<uint8_t> mask;      // loss masks: one byte per id
  uint64_t chat = 0;              // records rendered from messages
  std::vector<uint64_t> offsets;  // per line of the task: start in ids (end = next start)
  struct Failure {
    size_t index;  // the record's index in the batch
    Status error;
    std::string_view reason;  // SkipReason's class
  };
  std::vector<Failure> errors;
  uint64_t replaced = 0;
  uint64_t drop_records = 0, drop_parts = 0;  // --allow-template-drops: what templates lost
};

// NFC-normalizes a chat record's text piece by piece between span boundaries,
// moving the spans with it, so that token offsets (in normalized text) and
// spans agree for a tokenizer that normalizes to NFC.
void NormalizeWithSpans(RenderedRecord* r, std::string* scratch) {
  std::vector<size_t> cuts{0};
  for (auto [b, e] : r->spans) {
    cuts.push_back(b);
    cuts.push_back(e);
  }
  cuts.push_back(r->text.size());
  scratch->clear();
  std::vector<size_t> moved(cuts.size());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    moved[i] = scratch->size();
    tokenize::AppendNfc(std::string_view(r->text).substr(cuts[i], cuts[i + 1] - cuts[i]), scratch);
  }
  moved.back() = scratch->size();
  for (size_t k = 0; k < r->spans.size(); ++k) r->spans[k] = {moved[1 + 2 * k], moved[2 + 2 * k]};
  r->text.swap(*scratch);
}

// The reason classes of skipped records (manifest `skipped_reasons`, skipped.jsonl's
// `reason`; docs/pack_format.md), from the renderer's and tokenizer's errors.
std::string_view SkipReason(const Status& st, bool from_tokenizer) {
  if (from_tokenizer) return "tokenize";
  const std::string& m = st.message();
  if (m.find("invalid UTF-8") != std::string::npos || m.find("lone surrogate") != std::string::npos)
    return "invalid_utf8";
  if (m.rfind("malformed JSON", 0) == 0) return "invalid_json";
  if (m.find("template") != std::string::npos) return "template";
  return "shape";  // a missing or mistyped field, an unknown shape or role
}

// How to get past a record's error, appended when --skip-bad is off.
std::string SkipHint(std::string_view reason, InvalidUtf8Policy policy) {
  if (reason == "invalid_utf8" && policy == InvalidUtf8Policy::kError) {
    return " (pass --invalid-utf8 replace to replace bad bytes with U+FFFD, or --skip-bad to "
           "skip the record)";
  }
  return " (--skip-bad skips such records and lists them in skipped.jsonl)";
}

// skipped.jsonl: one line per skipped record, written beside the blocks under a
// temporary name and renamed with them; created at the first skip.
class SkipList {
 public:
  SkipList(Env* env, std::string dir, Manifest* m) : env_(env), dir_(std::move(dir)), m_(m) {}
  Status Add(const ingest::SourceRecord& r, size_t input_no, const Status& st,
             std::string_view reason) {
    if (!file_) {
      EK_RETURN_IF_ERROR(MakeDirs(dir_, env_));
      EK_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(dir_ + "/" + kSkippedFileName, env_));
      file_ = std::make_unique<AtomicFile>(std::move(f));
    }
    const char* unit = r.unit == ingest::Unit::kLine      ? "line"
                       : r.unit == ingest::Unit::kElement ? "element"
                                                          : "row";
    JsonWriter w;
    w.BeginObject().Key("file").Str(r.file ? *r.file : std::string("-")).Key(unit).Uint(r.number);
    w.Key("reason").Str(reason).Key("error").Str(st.message()).EndObject();
    buf_ += w.Line();
    if (buf_.size() >= (1u << 20)) EK_RETURN_IF_ERROR(Flush());
    ++m_->skipped_bad;
    ++m_->inputs[input_no].skipped_bad;
    ++m_->skipped_reasons[std::string(reason)];
    if (m_->bad_examples.size() < 10)
      m_->bad_examples.push_back({r.file ? *r.file : "-", r.number, st.message()});
    return Status::Ok();
  }
  // Flushes and fsyncs (before any rank is renamed into place).
  Status Sync() {
    if (!file_) return Status::Ok();
    EK_RETURN_IF_ERROR(Flush());
    return file_->Sync();
  }
  // Renames the list into place, or removes a previous pack's when nothing was skipped.
  Status Commit() {
    if (file_) return file_->Commit();
    Status st = env_->RemoveFile(dir_ + "/" + kSkippedFileName);
    return st.ok() || st.code() == StatusCode::kNotFound ? Status::Ok() : st;
  }

 private:
  Status Flush() {
    EK_RETURN_IF_ERROR(file_->Write(buf_));
    buf_.clear();
    return Status::Ok();
  }
  Env* env_;
  std::string dir_;
  Manifest* m_;
  std::unique_ptr<AtomicFile> file_;
  std::string buf_;
};

}  // namespace

Result<Manifest> Pack(const PackOptions& opt,
                      const std::function<void(const PackProgress&)>& progress) {
  auto t_start = std::chrono::steady_clock::now();
  if (opt.world <= 0) return InvalidArgumentError("--world must be positive");
  if (opt.seq_len <= 0) return InvalidArgumentError("--seq-len must be positive");
  if (opt.inputs.empty() && opt.sources.empty()) return InvalidArgumentError("no inputs");
  if (!opt.inputs.empty() && !opt.sources.empty())
    return InvalidArgumentError("inputs given both as files and as sources");
  // The sources: the run file's, or one of every input given (each once).
  std::vector<PackSource> sources = opt.sources;
  if (sources.empty()) {
    PackSource all;
    all.inputs = opt.inputs;
    all.shape = opt.record.shape;
    sources.push_back(std::move(all));
  }
  const bool weighted = sources[0].weight > 0;
  std::vector<std::string> inputs;   // every input, in source order
  std::vector<size_t> input_source;  // its source
  std::vector<std::vector<size_t>> source_inputs(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    if (sources[s].inputs.empty())
      return InvalidArgumentError(fmt::format("source '{}' has no inputs", sources[s].name));
    if ((sources[s].weight > 0) != weighted) {
      return InvalidArgumentError(
          fmt::format("source '{}': every source takes a weight or none does", sources[s].name));
    }
    for (const std::string& in : sources[s].inputs) {
      source_inputs[s].push_back(inputs.size());
      inputs.push_back(in);
      input_source.push_back(s);
    }
  }
  if (weighted && opt.shard == ShardMode::kContiguous) {
    return InvalidArgumentError(
        "a weighted mixture with --shard contiguous would give each rank a run of one source "
        "(the sources are packed one after another); use balanced (the default) or strided");
  }
  int lo = opt.rank_lo, hi = opt.rank_hi < 0 ? opt.world - 1 : opt.rank_hi;
  if (lo < 0 || hi >= opt.world || lo > hi) {
    return InvalidArgumentError(
        fmt::format("--ranks {}-{} is not inside 0-{}", lo, hi, opt.world - 1));
  }
  EK_ASSIGN_OR_RETURN(auto tok, tokenize::Tokenizer::FromFile(opt.tokenizer_path));
  std::string eos_token;
  if (opt.eos_token) {
    eos_token = *opt.eos_token;
  } else {
    EK_ASSIGN_OR_RETURN(eos_token, EosFromConfig(opt.tokenizer_path));
  }
  auto eos = tok->TokenToId(eos_token);
  if (!eos)
    return InvalidArgumentError(fmt::format("EOS token '{}' is not in the tokenizer", eos_token));
  const int32_t eos_id = *eos;

  Manifest m;
  m.evenkeel_version = kVersion;
  m.created = UtcNowIso8601();
  m.tokenizer_path = opt.tokenizer_path;
  {
    EK_ASSIGN_OR_RETURN(MappedFile tf, MappedFile::Open(opt.tokenizer_path));
    m.tokenizer_xxh3 = XXH3_64bits(tf.data().data(), tf.size());
  }
  m.tokenizer_vocab_xxh3 = tok->VocabFingerprint();
  m.vocab_size = tok->vocab_size();
  m.seq_len = opt.seq_len;
  m.world = opt.world;
  m.shard = opt.shard;
  m.eos_id = eos_id;
  m.eos_token = eos_token;
  m.text_field = opt.record.text_field;
  const bool masks = opt.loss_mask == LossMask::kAssistant;
  m.loss_mask = std::string(LossMaskName(opt.loss_mask));

  // The chat template: the model's own (auto), a .jinja file, or a fixed layout.
  RecordOptions rec = opt.record;
  rec.chat = opt.chat.mode;
  rec.spans = masks;
  m.chat_template = std::string(ChatModeName(opt.chat.mode));
  const std::string config = ConfigBeside(opt.tokenizer_path);
  if (opt.chat.mode == ChatMode::kJinja) {
    EK_ASSIGN_OR_RETURN(
        tmpl::ChatTemplate t,
        tmpl::ChatTemplate::FromFile(opt.chat.file, FileExists(config) ? config : std::string()));
    m.chat_template_path = opt.chat.file;
    rec.jinja = std::make_shared<const tmpl::ChatTemplate>(std::move(t));
  } else if (opt.chat.mode == ChatMode::kAuto) {
    m.chat_template = "none";
    if (!FileExists(config)) {
      rec.no_template = fmt::format(
          "record has \"messages\" but there is no chat template: {} does not exist; pass "
          "--chat-template "
          "FILE.jinja, chatml or llama3",
          config);
    } else if (auto t = tmpl::ChatTemplate::FromTokenizerConfig(config); !t.ok()) {
      rec.no_template = fmt::format(
          "record has \"messages\" but the chat template of {} cannot be used ({}); pass "
          "--chat-template "
          "FILE.jinja, chatml or llama3",
          config, t.status().message());
    } else {
      m.chat_template = "jinja";
      m.chat_template_path = config;
      rec.jinja = std::make_shared<const tmpl::ChatTemplate>(std::move(*t));
    }
  }
  if (rec.jinja)
    m.chat_template_xxh3 = XXH3_64bits(rec.jinja->source().data(), rec.jinja->source().size());

  // Rendering and tokenizing, shared by both passes: the pool's workers each hold a
  // renderer and scratch buffers.
  ThreadPool pool(opt.threads);
  // One renderer per worker and source: a source may have its own shape and text field.
  std::vector<RecordOptions> source_rec(sources.size(), rec);
  for (size_t s = 0; s < sources.size(); ++s) {
    source_rec[s].shape = sources[s].shape;
    if (!sources[s].text_field.empty()) source_rec[s].text_field = sources[s].text_field;
  }
  std::vector<std::vector<std::unique_ptr<RecordRenderer>>> renderers(sources.size());
  size_t cur_source = 0;  // the source of the records in `refs`
  struct WorkerScratch {
    RenderedRecord record;
    std::vector<uint32_t> ends;
    std::string nfc;
  };
  std::vector<WorkerScratch> scratch(pool.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    for (size_t i = 0; i < pool.size(); ++i)
      renderers[s].push_back(std::make_unique<RecordRenderer>(source_rec[s]));
  }
  std::vector<RecRef> refs;
  // Renders and tokenizes refs[i] into `out` (ids, mask, offsets, errors). `screen`
  // (pass 1's screening for --skip-bad) renders only: the tokenizer refuses nothing a
  // renderer makes (valid UTF-8) but text over 4 GiB with offsets, checked here alike.
  auto process = [&](size_t i, size_t worker, TaskOut& out, bool screen) {
    const size_t from = out.ids.size();
    out.offsets.push_back(from);
    if (!refs[i].needed) return;
    WorkerScratch& ws = scratch[worker];
    RenderedRecord& rr = ws.record;
    size_t replaced = 0;
    Status st = renderers[cur_source][worker]->Render(refs[i].rec.json, &rr, &replaced);
    out.replaced += replaced;
    const bool rendered = st.ok();
    if (st.ok() && screen) {
      if (masks && rr.text.size() > UINT32_MAX) {
        out.errors.push_back({i, InvalidArgumentError("text over 4 GiB"), "tokenize"});
      }
      return;
    }
    if (st.ok() && masks) {
      if ((rr.chat || rr.completion_only) && tok->normalizes_nfc() &&
          !tokenize::IsNfcQuick(rr.text))
        NormalizeWithSpans(&rr, &ws.nfc);
      ws.ends.clear();
      st = tok->EncodeWithOffsets(rr.text, &out.ids, &ws.ends);
      if (st.ok() && (rr.chat || rr.completion_only)) {
        MaskFromSpans(ws.ends, rr.spans, &out.mask);
      } else if (st.ok()) {
        out.mask.resize(out.ids.size(), 1);
      }
    } else if (st.ok()) {
      st = tok->Encode(rr.text, &out.ids);
    }
    if (st.ok()) {
      // EOS closes every record; after a chat record only when its ids do not
      // already end with it (TRL's rule: a template that ends turns with EOS does not
      // get it twice).
      if (!rr.chat || out.ids.size() == from || out.ids.back() != eos_id) {
        out.ids.push_back(eos_id);
        if (masks) out.mask.push_back(rr.chat ? 0 : 1);
      }
      out.chat += rr.chat ? 1 : 0;
      out.drop_records += rr.dropped_parts ? 1 : 0;
      out.drop_parts += rr.dropped_parts;
    } else {
      out.ids.resize(from);
      if (masks) out.mask.resize(from);
      std::string_view reason = SkipReason(st, rendered);
      out.errors.push_back({i, std::move(st), reason});
    }
  };
  // Runs `process` over refs in parallel: tasks of consecutive records, in order.
  auto run_batch = [&](std::vector<TaskOut>* outs, bool screen) {
    const size_t tasks = std::min<size_t>(refs.size(), pool.size() * 8);
    outs->assign(tasks, TaskOut());
    pool.ParallelFor(tasks, [&](size_t task, size_t worker) {
      size_t a = refs.size() * task / tasks, b = refs.size() * (task + 1) / tasks;
      TaskOut& out = (*outs)[task];
      for (size_t i = a; i < b; ++i) process(i, worker, out, screen);
      out.offsets.push_back(out.ids.size());
    });
    return tasks;
  };
  RemoveStaleTemps(opt.env, opt.out_dir);  // before pass 1 may start skipped.jsonl
  SkipList skips(opt.env, opt.out_dir, &m);
  // A record's error: fatal (with how to get past it), or listed in skipped.jsonl.
  auto fail = [&](const RecRef& ref, size_t input_no, TaskOut::Failure& f) -> Status {
    Status st = f.error.WithContext(ingest::Where(ref.rec));
    if (!opt.skip_bad) {
      return Status(st.code(), st.message() + SkipHint(f.reason, opt.record.invalid_utf8));
    }
    return skips.Add(ref.rec, input_no, st, f.reason);
  };
  // Each input opens with its source's split (a DatasetDict), else the pack-wide one.
  auto open_options = [&](size_t input_no) {
    const std::string& split = sources[input_source[input_no]].split;
    return ingest::OpenOptions{split.empty() ? opt.split : split, opt.chunk_bytes};
  };

  // Pass 1: sizes, hashes, record counts (sharding needs the total up front). With
  // --skip-bad and --shard contiguous or strided, the records are rendered here too
  // (not tokenized), so that a record's owner is computed over the records that are
  // packed (skipped ones take no rank's share): `bad` lists the global indices of the
  // records skipped.
  // A weighted mixture tokenizes every record here (its plan needs each record's
  // tokens), so every failure is known before pass 2 too.
  const bool prescreen = weighted || (opt.skip_bad && opt.shard != ShardMode::kBalanced);
  std::vector<uint64_t> bad;
  std::vector<std::vector<uint32_t>> source_tokens(sources.size());  // weighted: per record
  std::vector<uint64_t> input_base(inputs.size(), 0);  // the global index of its first record
  uint64_t read_index = 0;
  for (size_t input_no = 0; input_no < inputs.size(); ++input_no) {
    const std::string& path = inputs[input_no];
    cur_source = input_source[input_no];
    input_base[input_no] = read_index;
    InputInfo in;
    in.path = path;
    EK_ASSIGN_OR_RETURN(ingest::InputIdentity id,
                        ingest::IdentifyInput(path, open_options(input_no)));
    in.size = id.size;
    in.xxh3 = id.xxh3;
    m.inputs.push_back(in);
    // A table knows its row count (Parquet's footer, Arrow's batches): unless pass 1
    // screens the records, count without turning rows into JSON.
    EK_ASSIGN_OR_RETURN(ingest::FileKind kind, ingest::DetectKind(path));
    if (!prescreen && (kind == ingest::FileKind::kParquet || kind == ingest::FileKind::kArrow ||
                       kind == ingest::FileKind::kDatasetsDir)) {
      EK_ASSIGN_OR_RETURN(m.inputs[input_no].records,
                          ingest::CountArrowRows(path, kind, open_options(input_no)));
      m.total_records += m.inputs[input_no].records;
      read_index += m.inputs[input_no].records;
      continue;
    }
    EK_ASSIGN_OR_RETURN(auto source, ingest::Open(path, open_options(input_no)));
    std::vector<ingest::SourceRecord> batch;
    while (true) {
      EK_ASSIGN_OR_RETURN(bool more, source->Next(&batch));
      if (!more) break;
      m.inputs[input_no].records += batch.size();
      if (!prescreen) {
        read_index += batch.size();
        continue;
      }
      refs.clear();
      for (const auto& r : batch) refs.push_back(RecRef{r, read_index++, -1, true});
      std::vector<TaskOut> outs;
      const size_t tasks = run_batch(&outs, !weighted);
      for (size_t task = 0; task < tasks; ++task) {
        TaskOut& out = outs[task];
        for (TaskOut::Failure& f : out.errors) {
          EK_RETURN_IF_ERROR(fail(refs[f.index], input_no, f));
          bad.push_back(refs[f.index].index);
        }
        if (weighted) {  // each record's tokens, EOS included; 0 for a failed one
          for (size_t k = 0; k + 1 < out.offsets.size(); ++k) {
            source_tokens[cur_source].push_back(
                static_cast<uint32_t>(out.offsets[k + 1] - out.offsets[k]));
          }
        }
      }
    }
    m.total_records += m.inputs[input_no].records;
  }
  std::sort(bad.begin(), bad.end());
  auto is_bad = [&](uint64_t index) { return std::binary_search(bad.begin(), bad.end(), index); };

  // The mixture: each source's whole passes and (weights) the records taken once more.
  std::vector<SourceTake> takes(sources.size());
  if (weighted) {
    std::vector<MixtureSource> ms(sources.size());
    for (size_t s = 0; s < sources.size(); ++s) {
      ms[s].name = sources[s].name;
      ms[s].tokens = std::move(source_tokens[s]);
      ms[s].weight = sources[s].weight;
    }
    MixtureOptions mo;
    mo.total_tokens = opt.mixture_tokens;
    mo.seed = opt.mixture_seed;
    EK_ASSIGN_OR_RETURN(takes, PlanMixture(ms, mo));
  } else {
    for (size_t s = 0; s < sources.size(); ++s) {
      takes[s].passes = static_cast<uint32_t>(std::max(1, sources[s].epochs));
    }
  }
  // The records sharding divides: every record taken, a repeated one each time; and the
  // records pass 2 reads (progress), every round of every source.
  uint64_t packable = 0, reads = 0;
  for (size_t s = 0; s < sources.size(); ++s) {
    uint64_t good = 0;
    for (size_t in : source_inputs[s]) {
      const uint64_t a = input_base[in], b = a + m.inputs[in].records;
      good += (b - a) - static_cast<uint64_t>(std::lower_bound(bad.begin(), bad.end(), b) -
                                              std::lower_bound(bad.begin(), bad.end(), a));
    }
    packable += takes[s].passes * good + takes[s].remainder.size();
    uint64_t records = 0;
    for (size_t in : source_inputs[s]) records += m.inputs[in].records;
    reads += (takes[s].passes + (takes[s].remainder.empty() ? 0 : 1)) * records;
  }

  EK_RETURN_IF_ERROR(MakeDirs(opt.out_dir, opt.env));
  const bool bfd = opt.packing == Packing::kBfd;
  Spill spill;
  if (bfd) EK_RETURN_IF_ERROR(spill.Open(opt.env, opt.out_dir, masks));
  std::vector<std::unique_ptr<RankWriter>> writers(static_cast<size_t>(opt.world));
  for (int r = lo; r <= hi; ++r) {
    EK_ASSIGN_OR_RETURN(writers[static_cast<size_t>(r)],
                        RankWriter::Open(opt.env, opt.out_dir, r, opt.seq_len, masks));
  }
  std::vector<RankInfo> stats(static_cast<size_t>(opt.world));
  for (int r = 0; r < opt.world; ++r) {
    stats[static_cast<size_t>(r)].rank = r;
    stats[static_cast<size_t>(r)].file = RankFileName(r);
  }
  const size_t seq = static_cast<size_t>(opt.seq_len);
  const size_t W = static_cast<size_t>(opt.world);

  // Balanced routing: one stream, block i to rank i mod W, whole rounds only.
  std::vector<int32_t> cur;
  std::vector<uint8_t> cur_mask;
  std::vector<uint32_t> cur_docs;  // document starts in `cur`
  std::vector<std::vector<int32_t>> round(W);
  std::vector<std::vector<uint8_t>> round_mask(W);
  std::vector<std::vector<uint32_t>> round_docs(W);
  std::vector<char> round_split(W, 0);
  uint64_t block_index = 0;
  auto balanced_add = [&](const int32_t* t, const uint8_t* mask, size_t n) -> Status {
    cur_docs.push_back(static_cast<uint32_t>(cur.size()));
    bool first = true;  // the block the document starts in
    while (n > 0) {
      size_t take = std::min(n, seq - cur.size());
      cur.insert(cur.end(), t, t + take);
      if (masks) cur_mask.insert(cur_mask.end(), mask, mask + take);
      t += take;
      mask += masks ? take : 0;
      n -= take;
      if (cur.size() == seq) {
        size_t r = block_index % W;
        round[r].swap(cur);
        round_mask[r].swap(cur_mask);
        round_docs[r].swap(cur_docs);
        round_split[r] = first && n > 0;
        first = false;
        cur.clear();
        cur_mask.clear();
        cur_docs.clear();
        ++block_index;
        if (block_index % W == 0) {
          for (size_t k = 0; k < W; ++k) {
            stats[k].tokens += seq;
            stats[k].split_documents += round_split[k] ? 1 : 0;
            if (writers[k])
              EK_RETURN_IF_ERROR(writers[k]->WriteBlock(round[k].data(), round_mask[k].data(),
                                                        round_docs[k], round_split[k]));
            stats[k].blocks += 1;
          }
        }
      }
    }
    return Status::Ok();
  };

  // Pass 2: render + tokenize in parallel, route in record order.
  // Sources one after another: each its whole passes, then (weights) its remainder.
  // Records a repeated pass meets again are rendered again (the same ids); a record
  // skipped is listed once, in its first pass.
  uint64_t global_index = 0, good_index = 0, packed = 0, tokens_done = 0, bytes_done = 0;
  std::vector<uint64_t> source_records(sources.size(), 0), source_tokens_done(sources.size(), 0);
  for (size_t src = 0; src < sources.size(); ++src) {
    const SourceTake& take = takes[src];
    const uint32_t rounds = take.passes + (take.remainder.empty() ? 0 : 1);
    for (uint32_t round_no = 0; round_no < rounds; ++round_no) {
      const bool partial = round_no == take.passes;  // the remainder's round
      uint64_t local = 0;                            // the record's index within its source
      for (size_t input_no : source_inputs[src]) {
        const std::string& path = inputs[input_no];
        cur_source = src;
        uint64_t in_input = 0;
        EK_ASSIGN_OR_RETURN(auto source, ingest::Open(path, open_options(input_no)));
        std::vector<ingest::SourceRecord> batch;
        while (true) {
          EK_ASSIGN_OR_RETURN(bool more, source->Next(&batch));
          if (!more) break;
          refs.clear();
          for (const auto& r : batch) {
            RecRef ref{r, input_base[input_no] + in_input++, -1, true};
            ++global_index;
            const bool taken =
                !partial || std::binary_search(take.remainder.begin(), take.remainder.end(), local);
            ++local;
            if (is_bad(ref.index) || !taken) {
              ref.needed = false;  // skipped in pass 1 (listed already), or not in the remainder
            } else if (opt.shard != ShardMode::kBalanced) {
              ref.owner = OwnerOf(opt.shard, good_index++, packable, opt.world);
              ref.needed = ref.owner >= lo && ref.owner <= hi;
            }
            refs.push_back(ref);
          }
          std::vector<TaskOut> outs;
          const size_t tasks = run_batch(&outs, false);
          for (size_t task = 0; task < tasks; ++task) {
            TaskOut& out = outs[task];
            m.chat_records += out.chat;
            m.template_drop_records += out.drop_records;
            m.template_drop_parts += out.drop_parts;
            size_t a = refs.size() * task / tasks, b = refs.size() * (task + 1) / tasks;
            size_t next_err = 0;
            for (size_t i = a; i < b; ++i) {
              const RecRef& ref = refs[i];
              if (!ref.needed) continue;
              if (next_err < out.errors.size() && out.errors[next_err].index == i) {
                if (prescreen) {
                  return InternalError(fmt::format("{}: failed in pass 2 but not in pass 1: {}",
                                                   ingest::Where(ref.rec),
                                                   out.errors[next_err].error.message()));
                }
                // A later pass meets a record its first pass listed: skip it again, quietly.
                if (round_no == 0) EK_RETURN_IF_ERROR(fail(ref, input_no, out.errors[next_err]));
                ++next_err;
                continue;
              }
              const int32_t* ids = out.ids.data() + out.offsets[i - a];
              const uint8_t* mask = masks ? out.mask.data() + out.offsets[i - a] : nullptr;
              size_t n = out.offsets[i - a + 1] - out.offsets[i - a];  // EOS included
              tokens_done += n;
              bytes_done += ref.rec.json.size();
              ++packed;
              ++source_records[src];
              source_tokens_done[src] += n;
              if (bfd) {
                EK_RETURN_IF_ERROR(spill.Add(ref.owner, ids, mask, n));
              } else if (opt.shard == ShardMode::kBalanced) {
                stats[block_index % W].records += 1;  // the rank whose block this record starts in
                EK_RETURN_IF_ERROR(balanced_add(ids, mask, n));
              } else {
                RankInfo& s = stats[static_cast<size_t>(ref.owner)];
                s.records += 1;
                s.tokens += n;
                RankWriter& w = *writers[static_cast<size_t>(ref.owner)];
                EK_RETURN_IF_ERROR(w.Add(ids, mask, n));
              }
            }
          }
          if (progress) {
            PackProgress p;
            p.records_done = global_index;
            p.records_total = reads;
            p.tokens = tokens_done;
            p.bytes = bytes_done;
            p.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
            progress(p);
          }
        }
      }  // inputs of the source
    }    // rounds
  }      // sources
  if (weighted) {
    for (size_t s = 0; s < sources.size(); ++s) {
      if (opt.shard == ShardMode::kBalanced && source_tokens_done[s] != takes[s].tokens) {
        return InternalError(fmt::format(
            "source '{}': pass 2 routed {} tokens, the mixture's plan (pass 1) counted {}",
            sources[s].name, source_tokens_done[s], takes[s].tokens));
      }
    }
  }
  {
    uint64_t routed = 0;
    for (uint64_t t : source_tokens_done) routed += t;
    for (size_t s = 0; s < sources.size(); ++s) {
      SourceInfo info;
      info.name = sources[s].name;
      info.inputs = sources[s].inputs;
      info.weight = sources[s].weight;
      info.epochs = sources[s].epochs;
      info.passes = takes[s].passes;
      info.remainder_records = takes[s].remainder.size();
      info.records = source_records[s];
      info.tokens = source_tokens_done[s];
      info.realized_share =
          routed ? static_cast<double>(info.tokens) / static_cast<double>(routed) : 0.0;
      info.target_share = weighted ? takes[s].target_share : info.realized_share;
      m.sources.push_back(std::move(info));
    }
    m.mixture_seed = opt.mixture_seed;
    m.mixture_tokens = opt.mixture_tokens;
  }

  // Close the books per rank.
  if (bfd) {
    EK_RETURN_IF_ERROR(WriteBfdBins(opt, m.eos_id, masks, lo, hi, &spill, &writers, &stats));
    if (opt.shard == ShardMode::kBalanced) m.total_tokens = tokens_done;
  } else if (opt.shard == ShardMode::kBalanced) {
    // Blocks of the unfinished round and the partial block are dropped.
    uint64_t pending = block_index % W;
    for (size_t k = 0; k < pending; ++k) {
      stats[k].tokens += seq;
      stats[k].dropped_tokens += seq;
    }
    stats[block_index % W].tokens += cur.size();
    stats[block_index % W].dropped_tokens += cur.size();
    m.total_tokens = tokens_done;
  } else {
    for (auto& s : stats) {
      s.blocks = s.tokens / seq;
      s.dropped_tokens = s.tokens % seq;
    }
  }
  for (auto& s : stats) s.bytes = s.blocks * BlockBytes(static_cast<int>(seq));
  std::vector<int64_t> empty;
  for (int r = lo; r <= hi; ++r) {
    if (stats[static_cast<size_t>(r)].blocks == 0) empty.push_back(r);
  }
  if (!empty.empty()) {
    uint64_t blocks = 0;
    for (const auto& s : stats) blocks += s.blocks;
    return InvalidArgumentError(fmt::format(
        "rank{} {} of a world of {} would get no block: too little data for the world ({} "
        "record(s) packed, {} "
        "token(s) with EOS, make {} block(s) of {} tokens; {} ranks need at least {} tokens, more "
        "with "
        "--shard contiguous or strided); give more data, a smaller --world or a shorter --seq-len",
        empty.size() == 1 ? "" : "s", CompactRanges(empty), opt.world, packed, tokens_done, blocks,
        seq, opt.world, static_cast<uint64_t>(opt.world) * seq));
  }

  // Publish: flush and fsync every rank (a failure so far leaves the old pack
  // whole), drop the old manifest, rename the ranks into place, then write the
  // new manifest.
  for (int r = lo; r <= hi; ++r) {
    RankWriter& w = *writers[static_cast<size_t>(r)];
    EK_RETURN_IF_ERROR(w.Flush());
    EK_RETURN_IF_ERROR(w.Sync());
    RankInfo& s = stats[static_cast<size_t>(r)];
    if (w.blocks() != s.blocks) {
      return InternalError(
          fmt::format("rank {}: wrote {} blocks, expected {}", r, w.blocks(), s.blocks));
    }
    s.xxh3 = w.digest();
    if (w.has_mask()) {
      s.mask_file = MaskFileName(r);
      s.mask_xxh3 = w.mask_digest();
      s.loss_tokens = w.loss_tokens();
    }
    m.max_id = std::max<int64_t>(m.max_id, w.max_id());  // every rank has a block by now
    s.docs_file = DocsFileName(r);
    s.docs_xxh3 = w.docs_digest();
    s.documents = w.documents();
    if (opt.shard !=
        ShardMode::kBalanced) {  // balanced: counted for every rank as blocks were dealt
      s.padding_tokens = w.padding_tokens();
      s.split_documents = w.split_documents();
    } else if (s.padding_tokens != w.padding_tokens() || s.split_documents != w.split_documents()) {
      return InternalError(fmt::format("rank {}: padding or split counts disagree", r));
    }
  }
  EK_RETURN_IF_ERROR(skips.Sync());
  std::string manifest_path = opt.out_dir + "/manifest.json";
  if (Status st = opt.env->RemoveFile(manifest_path);
      !st.ok() && st.code() != StatusCode::kNotFound)
    return st;
  for (int r = lo; r <= hi; ++r) EK_RETURN_IF_ERROR(writers[static_cast<size_t>(r)]->Commit());
  EK_RETURN_IF_ERROR(skips.Commit());
  if (!masks) {  // a previous pack's masks would not match these blocks
    for (int r = lo; r <= hi; ++r) {
      Status st = opt.env->RemoveFile(opt.out_dir + "/" + MaskFileName(r));
      if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
    }
  }
  for (int r = lo; r <= hi; ++r) m.ranks.push_back(stats[static_cast<size_t>(r)]);
  if (opt.shard != ShardMode::kBalanced) {
    m.total_records = 0;
    for (const auto& s : m.ranks) {
      m.total_records += s.records;
      m.total_tokens += s.tokens;
      m.total_dropped_tokens += s.dropped_tokens;
      m.total_padding_tokens += s.padding_tokens;
      m.total_split_documents += s.split_documents;
    }
  } else {
    m.total_records = packed;  // every record taken (a repeated one each time)
    for (const auto& s : stats) {
      m.total_dropped_tokens += s.dropped_tokens;
      m.total_padding_tokens += s.padding_tokens;
      m.total_split_documents += s.split_documents;
    }
  }
  m.packing = opt.packing;
  m.packing_seed = opt.packing_seed;
  EK_RETURN_IF_ERROR(WriteManifest(opt.out_dir, m, opt.env));
  return m;
}

}  // namespace ek::pack
