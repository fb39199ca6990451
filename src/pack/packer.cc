// One file over 600 lines: Pack() is one class (Packer) whose methods, the run's phases
// in order, share one run's state: resolve the sources, load the model, pass 1 (count,
// screen), plan the mixture, pass 2 (encode, route), close the books, publish. Encoding
// records (record_encoder), the ranks' writers and balanced routing (rank_writer), bfd's
// spill (bfd_writer) and the skip list (skip_list) live in their own files.
#include "pack/packer.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>

#include "core/clock.h"
#include "core/file.h"
#include "core/json_out.h"
#include "core/thread_pool.h"
#include "core/version.h"
#include "ingest/arrow_source.h"
#include "ingest/source.h"
#include "pack/bfd_writer.h"
#include "pack/mixture.h"
#include "pack/rank_writer.h"
#include "pack/record_encoder.h"
#include "pack/skip_list.h"
#include "packfile/layout.h"
#include "tokenize/tokenizer.h"

namespace ek::pack {

static_assert(std::endian::native == std::endian::little, "block files are little-endian int32");

int OwnerOf(ShardMode mode, uint64_t index, uint64_t total, int world) {
  if (world == 1) return 0;  // (the total is not needed: a pack that reads once has none yet)
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

// The tokenizer, and the xxh3 of the tokenizer.json bytes it was loaded from (the
// manifest's tokenizer.xxh3): one mapping of the file serves both.
struct LoadedTokenizer {
  std::unique_ptr<tokenize::Tokenizer> tok;
  uint64_t xxh3 = 0;
};

Result<LoadedTokenizer> LoadTokenizer(const std::string& path) {
  EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  EK_ASSIGN_OR_RETURN(std::unique_ptr<tokenize::Tokenizer> tok,
                      tokenize::Tokenizer::FromJson(f.data(), path, f.readable()));
  return LoadedTokenizer{std::move(tok), XXH3_64bits(f.data().data(), f.size())};
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

// One run of Pack: its phases in order (Run), sharing the options, the tokenizer, the
// manifest being filled and the ranks' writers.
class Packer {
 public:
  Packer(const PackOptions& opt, const std::function<void(const PackProgress&)>& progress)
      : opt_(opt), progress_(progress), skips_(opt.env, opt.out_dir, &m_) {}

  Result<Manifest> Run() {
    t_start_ = std::chrono::steady_clock::now();
    EK_RETURN_IF_ERROR(ResolveSources());
    prescreen_ = weighted_ || (opt_.skip_bad && opt_.shard != ShardMode::kBalanced);
    // Unless pass 1 screens records, it only hashes and counts the inputs, so with more
    // than one thread the tokenizer loads on another thread meanwhile. The errors come
    // in the same order either way: the tokenizer's, the EOS's and template's, then
    // pass 1's.
    const bool beside = !prescreen_ && opt_.threads != 1;
    std::future<Result<LoadedTokenizer>> loading;
    Status counted;
    if (beside) {
      loading =
          std::async(std::launch::async, [this] { return LoadTokenizer(opt_.tokenizer_path); });
      RemoveStaleTemps(opt_.env, opt_.out_dir);
      counted = Pass1();
    }
    EK_ASSIGN_OR_RETURN(LoadedTokenizer loaded,
                        beside ? loading.get() : LoadTokenizer(opt_.tokenizer_path));
    tok_ = std::move(loaded.tok);
    tokenizer_xxh3_ = loaded.xxh3;
    EK_RETURN_IF_ERROR(LoadModel());
    EK_ASSIGN_OR_RETURN(encoder_,
                        RecordEncoder::Create(opt_, sources_, tok_.get(), eos_id_, masks_, &m_));
    if (!beside) {
      RemoveStaleTemps(opt_.env, opt_.out_dir);  // before pass 1 may start skipped.jsonl
      counted = Pass1();
    }
    EK_RETURN_IF_ERROR(counted);
    EK_RETURN_IF_ERROR(PlanTakes());
    EK_RETURN_IF_ERROR(OpenWriters());
    EK_RETURN_IF_ERROR(Pass2());
    EK_RETURN_IF_ERROR(RecordSources());
    EK_RETURN_IF_ERROR(CloseBooks());
    EK_RETURN_IF_ERROR(Publish());
    return std::move(m_);
  }

 private:
  // The sources (the run file's, or one of every input given, each once), every
  // input in source order, and the ranks to write.
  Status ResolveSources() {
    if (opt_.world <= 0) return InvalidArgumentError("--world must be positive");
    if (opt_.seq_len <= 0) return InvalidArgumentError("--seq-len must be positive");
    if (opt_.inputs.empty() && opt_.sources.empty()) return InvalidArgumentError("no inputs");
    if (!opt_.inputs.empty() && !opt_.sources.empty())
      return InvalidArgumentError("inputs given both as files and as sources");
    sources_ = opt_.sources;
    if (sources_.empty()) {
      PackSource all;
      all.inputs = opt_.inputs;
      all.shape = opt_.record.shape;
      sources_.push_back(std::move(all));
    }
    weighted_ = sources_[0].weight > 0;
    source_inputs_.assign(sources_.size(), {});
    for (size_t s = 0; s < sources_.size(); ++s) {
      if (sources_[s].inputs.empty())
        return InvalidArgumentError(fmt::format("source '{}' has no inputs", sources_[s].name));
      if ((sources_[s].weight > 0) != weighted_) {
        return InvalidArgumentError(
            fmt::format("source '{}': every source takes a weight or none does", sources_[s].name));
      }
      for (const std::string& in : sources_[s].inputs) {
        source_inputs_[s].push_back(inputs_.size());
        inputs_.push_back(in);
        input_source_.push_back(s);
      }
    }
    if (weighted_ && opt_.shard == ShardMode::kContiguous) {
      return InvalidArgumentError(
          "a weighted mixture with --shard contiguous would give each rank a run of one source "
          "(the sources are packed one after another); use balanced (the default) or strided");
    }
    lo_ = opt_.rank_lo;
    hi_ = opt_.rank_hi < 0 ? opt_.world - 1 : opt_.rank_hi;
    if (lo_ < 0 || hi_ >= opt_.world || lo_ > hi_) {
      return InvalidArgumentError(
          fmt::format("--ranks {}-{} is not inside 0-{}", lo_, hi_, opt_.world - 1));
    }
    return Status::Ok();
  }

  // The tokenizer's EOS (tok_ loaded) and the manifest's head.
  Status LoadModel() {
    std::string eos_token;
    if (opt_.eos_token) {
      eos_token = *opt_.eos_token;
    } else {
      EK_ASSIGN_OR_RETURN(eos_token, EosFromConfig(opt_.tokenizer_path));
    }
    auto eos = tok_->TokenToId(eos_token);
    if (!eos) {
      return InvalidArgumentError(fmt::format("EOS token '{}' is not in the tokenizer", eos_token));
    }
    eos_id_ = *eos;
    m_.evenkeel_version = kVersion;
    m_.created = UtcNowIso8601();
    m_.tokenizer_path = opt_.tokenizer_path;
    m_.tokenizer_xxh3 = tokenizer_xxh3_;  // of the bytes tok_ was loaded from
    m_.tokenizer_vocab_xxh3 = tok_->VocabFingerprint();
    m_.vocab_size = tok_->vocab_size();
    m_.seq_len = opt_.seq_len;
    m_.world = opt_.world;
    m_.shard = opt_.shard;
    m_.eos_id = eos_id_;
    m_.eos_token = eos_token;
    m_.text_field = opt_.record.text_field;
    masks_ = opt_.loss_mask == LossMask::kAssistant;
    m_.loss_mask = std::string(LossMaskName(opt_.loss_mask));
    return Status::Ok();
  }

  // A record's error: fatal (with how to get past it), or listed in skipped.jsonl.
  Status Fail(const RecRef& ref, size_t input_no, const TaskOut::Failure& f) {
    Status st = f.error.WithContext(ingest::Where(ref.rec));
    if (!opt_.skip_bad) {
      return Status(st.code(), st.message() + SkipHint(f.reason, opt_.record.invalid_utf8));
    }
    return skips_.Add(ref.rec, input_no, st, f.reason);
  }

  // Each input opens with its source's split (a DatasetDict), else the pack-wide one.
  ingest::OpenOptions OpenOptionsFor(size_t input_no) const {
    const std::string& split = sources_[input_source_[input_no]].split;
    return ingest::OpenOptions{split.empty() ? opt_.split : split, ChunkBytes()};
  }

  // PackOptions::chunk_bytes, 0 resolved for the encoder's pool (which pass 1 may run
  // before: the pool's own rule, not the pool).
  size_t ChunkBytes() const {
    if (opt_.chunk_bytes) return opt_.chunk_bytes;
    return std::clamp<size_t>(ThreadPool::Workers(opt_.threads) * (size_t{512} << 10),
                              size_t{1} << 20, size_t{8} << 20);
  }

  bool IsBad(uint64_t index) const { return std::binary_search(bad_.begin(), bad_.end(), index); }

  // Whether pass 2 can tell every input's size, hash and records from the one read that
  // packs it, so that pass 1 reads nothing: nothing needs them first (no screening, no
  // mixture's plan, no contiguous shards of a world over 1: those need the total of
  // records up front), and every input is a plain JSON lines file. Reading once halves
  // what a pack reads, and the manifest's hash is of the very bytes packed.
  Result<bool> ReadsOnce() const {
    if (prescreen_ || weighted_ || (opt_.shard == ShardMode::kContiguous && opt_.world > 1))
      return false;
    for (const std::string& path : inputs_) {
      EK_ASSIGN_OR_RETURN(bool reads, ingest::ReadsItsIdentity(path));
      if (!reads) return false;
    }
    return true;
  }

  // Pass 1: sizes, hashes, record counts (sharding needs the total up front). With
  // --skip-bad and --shard contiguous or strided, the records are rendered here too
  // (not tokenized), so that a record's owner is computed over the records that are
  // packed (skipped ones take no rank's share): `bad_` lists the global indices of the
  // records skipped.
  // A weighted mixture tokenizes every record here (its plan needs each record's
  // tokens), so every failure is known before pass 2 too.
  Status Pass1() {
    source_tokens_.assign(sources_.size(), {});
    input_base_.assign(inputs_.size(), 0);
    EK_ASSIGN_OR_RETURN(read_once_, ReadsOnce());
    if (read_once_) {  // pass 2 fills in each input's identity and where its records start
      for (const std::string& path : inputs_) {
        InputInfo in;
        in.path = path;
        std::error_code ec;
        in.size = std::filesystem::file_size(path, ec);  // for progress until it is read
        if (ec) in.size = 0;
        m_.inputs.push_back(in);
      }
      return Status::Ok();
    }
    uint64_t read_index = 0;
    std::vector<RecRef> refs;
    for (size_t input_no = 0; input_no < inputs_.size(); ++input_no) {
      const std::string& path = inputs_[input_no];
      const size_t src = input_source_[input_no];
      input_base_[input_no] = read_index;
      InputInfo in;
      in.path = path;
      EK_ASSIGN_OR_RETURN(ingest::InputIdentity id,
                          ingest::IdentifyInput(path, OpenOptionsFor(input_no)));
      in.size = id.size;
      in.xxh3 = id.xxh3;
      m_.inputs.push_back(in);
      // Plain JSON lines were counted by the read that hashed them: unless pass 1
      // screens the records, that count is the pass.
      if (!prescreen_ && id.records >= 0) {
        m_.inputs[input_no].records = static_cast<uint64_t>(id.records);
        m_.total_records += m_.inputs[input_no].records;
        read_index += m_.inputs[input_no].records;
        continue;
      }
      // A table knows its row count (Parquet's footer, Arrow's batches): unless pass 1
      // screens the records, count without turning rows into JSON.
      EK_ASSIGN_OR_RETURN(ingest::FileKind kind, ingest::DetectKind(path));
      if (!prescreen_ && (kind == ingest::FileKind::kParquet || kind == ingest::FileKind::kArrow ||
                          kind == ingest::FileKind::kDatasetsDir)) {
        EK_ASSIGN_OR_RETURN(m_.inputs[input_no].records,
                            ingest::CountArrowRows(path, kind, OpenOptionsFor(input_no)));
        m_.total_records += m_.inputs[input_no].records;
        read_index += m_.inputs[input_no].records;
        continue;
      }
      EK_ASSIGN_OR_RETURN(auto source, ingest::Open(path, OpenOptionsFor(input_no)));
      std::vector<ingest::SourceRecord> batch;
      while (true) {
        EK_ASSIGN_OR_RETURN(bool more, source->Next(&batch));
        if (!more) break;
        m_.inputs[input_no].records += batch.size();
        if (!prescreen_) {
          read_index += batch.size();
          continue;
        }
        refs.clear();
        for (const auto& r : batch) refs.push_back(RecRef{r, read_index++, -1, true});
        std::vector<TaskOut> outs;
        const size_t tasks = encoder_->Run(refs, src, !weighted_, &outs);
        for (size_t task = 0; task < tasks; ++task) {
          TaskOut& out = outs[task];
          for (TaskOut::Failure& f : out.errors) {
            EK_RETURN_IF_ERROR(Fail(refs[f.index], input_no, f));
            bad_.push_back(refs[f.index].index);
          }
          if (weighted_) {  // each record's tokens, EOS included; 0 for a failed one
            for (size_t k = 0; k + 1 < out.offsets.size(); ++k) {
              source_tokens_[src].push_back(
                  static_cast<uint32_t>(out.offsets[k + 1] - out.offsets[k]));
            }
          }
        }
      }
      m_.total_records += m_.inputs[input_no].records;
    }
    std::sort(bad_.begin(), bad_.end());
    return Status::Ok();
  }

  // The mixture: each source's whole passes and (weights) the records taken once more;
  // then the records sharding divides (every record taken, a repeated one each time)
  // and the records pass 2 reads (progress), every round of every source.
  Status PlanTakes() {
    takes_.assign(sources_.size(), SourceTake());
    if (weighted_) {
      std::vector<MixtureSource> ms(sources_.size());
      for (size_t s = 0; s < sources_.size(); ++s) {
        ms[s].name = sources_[s].name;
        ms[s].tokens = std::move(source_tokens_[s]);
        ms[s].weight = sources_[s].weight;
      }
      MixtureOptions mo;
      mo.total_tokens = opt_.mixture_tokens;
      mo.seed = opt_.mixture_seed;
      EK_ASSIGN_OR_RETURN(takes_, PlanMixture(ms, mo));
    } else {
      for (size_t s = 0; s < sources_.size(); ++s) {
        takes_[s].passes = static_cast<uint32_t>(std::max(1, sources_[s].epochs));
      }
    }
    packable_ = 0;
    reads_ = 0;
    for (size_t s = 0; s < sources_.size(); ++s) {
      uint64_t good = 0;
      for (size_t in : source_inputs_[s]) {
        const uint64_t a = input_base_[in], b = a + m_.inputs[in].records;
        good += (b - a) - static_cast<uint64_t>(std::lower_bound(bad_.begin(), bad_.end(), b) -
                                                std::lower_bound(bad_.begin(), bad_.end(), a));
      }
      packable_ += takes_[s].passes * good + takes_[s].remainder.size();
      uint64_t records = 0;
      for (size_t in : source_inputs_[s]) records += m_.inputs[in].records;
      reads_ += takes_[s].rounds() * records;
    }
    return Status::Ok();
  }

  // The output directory, bfd's spill, and a writer for each rank written.
  Status OpenWriters() {
    EK_RETURN_IF_ERROR(MakeDirs(opt_.out_dir, opt_.env));
    bfd_ = opt_.packing == Packing::kBfd;
    if (bfd_) EK_RETURN_IF_ERROR(spill_.Open(opt_.env, opt_.out_dir, masks_));
    writers_.resize(static_cast<size_t>(opt_.world));
    for (int r = lo_; r <= hi_; ++r) {
      EK_ASSIGN_OR_RETURN(writers_[static_cast<size_t>(r)],
                          RankWriter::Open(opt_.env, opt_.out_dir, r, opt_.seq_len, masks_));
    }
    stats_.resize(static_cast<size_t>(opt_.world));
    for (int r = 0; r < opt_.world; ++r) {
      stats_[static_cast<size_t>(r)].rank = r;
      stats_[static_cast<size_t>(r)].file = RankFileName(r);
    }
    balanced_ = std::make_unique<BalancedRouter>(static_cast<size_t>(opt_.seq_len),
                                                 static_cast<size_t>(opt_.world), masks_, &writers_,
                                                 &stats_);
    return Status::Ok();
  }

  // One record of pass 2, its ids (EOS included) and mask: to bfd's spill, the balanced
  // stream, or its owner's writer.
  Status Route(const RecRef& ref, const int32_t* ids, const uint8_t* mask, size_t n) {
    if (bfd_) return spill_.Add(ref.owner, ids, mask, n);
    if (opt_.shard == ShardMode::kBalanced) {
      stats_[balanced_->next_rank()].records += 1;  // the rank whose block this record starts in
      return balanced_->Add(ids, mask, n);
    }
    RankInfo& s = stats_[static_cast<size_t>(ref.owner)];
    s.records += 1;
    s.tokens += n;
    return writers_[static_cast<size_t>(ref.owner)]->Add(ids, mask, n);
  }

  // One batch of pass 2: its records, their encoding (on the pool) and where they came from.
  struct Batch {
    std::vector<RecRef> refs;
    std::vector<TaskOut> outs;
    size_t tasks = 0;
    size_t src = 0, input_no = 0;
    uint32_t round_no = 0;
    uint64_t records_read = 0;     // records read up to this batch's end (progress)
    std::future<size_t> encoding;  // last member: destroyed first, waiting for the pool
  };

  // Pass 2: render + tokenize in parallel, route in record order.
  // Sources one after another: each its whole passes, then (weights) its remainder.
  // Records a repeated pass meets again are rendered again (the same ids); a record
  // skipped is listed once, in its first pass.
  // With more than one worker, a batch is encoded on the pool while this thread routes
  // and writes the one before it. The next batch is read only once the one before is
  // encoded (a streaming source may reuse its buffer); routing reads no record's bytes.
  Status Pass2() {
    uint64_t global_index = 0, good_index = 0;
    source_records_.assign(sources_.size(), 0);
    source_tokens_done_.assign(sources_.size(), 0);
    const bool overlap = encoder_->workers() > 1;
    uint64_t next_base = 0;  // read once: the global index of the next input's first record
    input_bytes_total_ = 0;
    for (size_t src = 0; src < sources_.size(); ++src) {
      for (size_t in : source_inputs_[src])
        input_bytes_total_ += uint64_t{takes_[src].rounds()} * m_.inputs[in].size;
    }
    for (size_t src = 0; src < sources_.size(); ++src) {
      const SourceTake& take = takes_[src];
      const uint32_t rounds = take.rounds();
      for (uint32_t round_no = 0; round_no < rounds; ++round_no) {
        const bool partial = round_no == take.passes;  // the remainder's round
        uint64_t local = 0;                            // the record's index within its source
        for (size_t input_no : source_inputs_[src]) {
          const std::string& path = inputs_[input_no];
          uint64_t in_input = 0;
          const bool identify = read_once_ && round_no == 0;
          if (identify) input_base_[input_no] = next_base;
          ingest::OpenOptions open = OpenOptionsFor(input_no);
          open.identify = identify;
          EK_ASSIGN_OR_RETURN(auto source, ingest::Open(path, open));
          reading_ = source.get();
          std::vector<ingest::SourceRecord> batch;
          Batch slots[2];            // after `source`: destroyed first, an encoding finished first
          Batch* pending = nullptr;  // encoded or being encoded, not yet routed
          for (size_t turn = 0;; ++turn) {
            if (pending && pending->encoding.valid()) pending->tasks = pending->encoding.get();
            EK_ASSIGN_OR_RETURN(bool more, source->Next(&batch));
            if (more) {
              Batch& b = slots[turn % 2];
              b.refs.clear();
              b.src = src;
              b.input_no = input_no;
              b.round_no = round_no;
              for (const auto& r : batch) {
                RecRef ref{r, input_base_[input_no] + in_input++, -1, true};
                ++global_index;
                const bool taken = !partial || std::binary_search(take.remainder.begin(),
                                                                  take.remainder.end(), local);
                ++local;
                if (IsBad(ref.index) || !taken) {
                  ref.needed =
                      false;  // skipped in pass 1 (listed already), or not in the remainder
                } else if (opt_.shard != ShardMode::kBalanced) {
                  ref.owner = OwnerOf(opt_.shard, good_index++, packable_, opt_.world);
                  ref.needed = ref.owner >= lo_ && ref.owner <= hi_;
                }
                b.refs.push_back(ref);
              }
              b.records_read = global_index;
              if (overlap) {
                b.encoding = std::async(std::launch::async, [this, &b] {
                  return encoder_->Run(b.refs, b.src, false, &b.outs);
                });
              } else {
                b.tasks = encoder_->Run(b.refs, b.src, false, &b.outs);
              }
            }
            if (pending) EK_RETURN_IF_ERROR(RouteBatch(*pending));
            if (!more) break;
            pending = &slots[turn % 2];
          }
          reading_ = nullptr;
          input_bytes_done_ += source->consumed_bytes();
          if (identify) EK_RETURN_IF_ERROR(IdentifiedByPass2(*source, input_no, &next_base));
        }  // inputs of the source
      }    // rounds
    }      // sources
    return Status::Ok();
  }

  // Read once: input `input_no`'s size, hash and records, from the read that packed it.
  Status IdentifiedByPass2(const ingest::RecordSource& source, size_t input_no,
                           uint64_t* next_base) {
    ingest::InputIdentity id;
    if (!source.Identity(&id) || id.records < 0) {
      return InternalError(
          fmt::format("{}: read once, but its reader did not hash it", inputs_[input_no]));
    }
    InputInfo& in = m_.inputs[input_no];
    in.size = id.size;
    in.xxh3 = id.xxh3;
    in.records = static_cast<uint64_t>(id.records);
    m_.total_records += in.records;
    *next_base += in.records;
    return Status::Ok();
  }

  // Routes an encoded batch of pass 2, its records in order, then reports progress.
  Status RouteBatch(const Batch& batch) {
    const std::vector<RecRef>& refs = batch.refs;
    const size_t tasks = batch.tasks;
    const size_t src = batch.src;
    for (size_t task = 0; task < tasks; ++task) {
      const TaskOut& out = batch.outs[task];
      m_.chat_records += out.chat;
      m_.template_drop_records += out.drop_records;
      m_.template_drop_parts += out.drop_parts;
      size_t a = refs.size() * task / tasks, b = refs.size() * (task + 1) / tasks;
      size_t next_err = 0;
      for (size_t i = a; i < b; ++i) {
        const RecRef& ref = refs[i];
        if (!ref.needed) continue;
        if (next_err < out.errors.size() && out.errors[next_err].index == i) {
          if (prescreen_) {
            return InternalError(fmt::format("{}: failed in pass 2 but not in pass 1: {}",
                                             ingest::Where(ref.rec),
                                             out.errors[next_err].error.message()));
          }
          // A later pass meets a record its first pass listed: skip it again, quietly.
          if (batch.round_no == 0)
            EK_RETURN_IF_ERROR(Fail(ref, batch.input_no, out.errors[next_err]));
          ++next_err;
          continue;
        }
        const int32_t* ids = out.ids.data() + out.offsets[i - a];
        const uint8_t* mask = masks_ ? out.mask.data() + out.offsets[i - a] : nullptr;
        size_t n = out.offsets[i - a + 1] - out.offsets[i - a];  // EOS included
        tokens_done_ += n;
        bytes_done_ += ref.rec.json.size();
        ++packed_;
        ++source_records_[src];
        source_tokens_done_[src] += n;
        EK_RETURN_IF_ERROR(Route(ref, ids, mask, n));
      }
    }
    if (progress_) {
      PackProgress p;
      p.records_done = batch.records_read;
      p.records_total = reads_;
      p.tokens = tokens_done_;
      p.bytes = bytes_done_;
      p.input_bytes_done = input_bytes_done_ + (reading_ ? reading_->consumed_bytes() : 0);
      p.input_bytes_total = input_bytes_total_;
      p.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count();
      progress_(p);
    }
    return Status::Ok();
  }

  // The manifest's sources: what each contributed against its plan.
  Status RecordSources() {
    if (weighted_) {
      for (size_t s = 0; s < sources_.size(); ++s) {
        if (opt_.shard == ShardMode::kBalanced && source_tokens_done_[s] != takes_[s].tokens) {
          return InternalError(fmt::format(
              "source '{}': pass 2 routed {} tokens, the mixture's plan (pass 1) counted {}",
              sources_[s].name, source_tokens_done_[s], takes_[s].tokens));
        }
      }
    }
    uint64_t routed = 0;
    for (uint64_t t : source_tokens_done_) routed += t;
    for (size_t s = 0; s < sources_.size(); ++s) {
      SourceInfo info;
      info.name = sources_[s].name;
      info.inputs = sources_[s].inputs;
      info.weight = sources_[s].weight;
      info.epochs = sources_[s].epochs;
      info.passes = takes_[s].passes;
      info.remainder_records = takes_[s].remainder.size();
      info.records = source_records_[s];
      info.tokens = source_tokens_done_[s];
      info.realized_share =
          routed ? static_cast<double>(info.tokens) / static_cast<double>(routed) : 0.0;
      info.target_share = weighted_ ? takes_[s].target_share : info.realized_share;
      m_.sources.push_back(std::move(info));
    }
    m_.mixture_seed = opt_.mixture_seed;
    m_.mixture_tokens = opt_.mixture_tokens;
    return Status::Ok();
  }

  // Closes the books per rank; a rank written without a single block is an error.
  Status CloseBooks() {
    const size_t seq = static_cast<size_t>(opt_.seq_len);
    if (bfd_) {
      EK_RETURN_IF_ERROR(
          WriteBfdBins(opt_, m_.eos_id, masks_, lo_, hi_, &spill_, &writers_, &stats_));
      if (opt_.shard == ShardMode::kBalanced) m_.total_tokens = tokens_done_;
    } else if (opt_.shard == ShardMode::kBalanced) {
      balanced_->Finish();  // the unfinished round's blocks and the partial block are dropped
      m_.total_tokens = tokens_done_;
    } else {
      for (auto& s : stats_) {
        s.blocks = s.tokens / seq;
        s.dropped_tokens = s.tokens % seq;
      }
    }
    for (auto& s : stats_) s.bytes = s.blocks * BlockBytes(static_cast<int>(seq));
    std::vector<int64_t> empty;
    for (int r = lo_; r <= hi_; ++r) {
      if (stats_[static_cast<size_t>(r)].blocks == 0) empty.push_back(r);
    }
    if (empty.empty()) return Status::Ok();
    uint64_t blocks = 0;
    for (const auto& s : stats_) blocks += s.blocks;
    return InvalidArgumentError(fmt::format(
        "rank{} {} of a world of {} would get no block: too little data for the world ({} "
        "record(s) packed, {} "
        "token(s) with EOS, make {} block(s) of {} tokens; {} ranks need at least {} tokens, more "
        "with "
        "--shard contiguous or strided); give more data, a smaller --world or a shorter --seq-len",
        empty.size() == 1 ? "" : "s", CompactRanges(empty), opt_.world, packed_, tokens_done_,
        blocks, seq, opt_.world, static_cast<uint64_t>(opt_.world) * seq));
  }

  // Publish: flush and fsync every rank (a failure so far leaves the old pack
  // whole), drop the old manifest, rename the ranks into place, then write the
  // new manifest.
  Status Publish() {
    for (int r = lo_; r <= hi_; ++r) {
      RankWriter& w = *writers_[static_cast<size_t>(r)];
      EK_RETURN_IF_ERROR(w.Flush());
      EK_RETURN_IF_ERROR(w.Sync());
      RankInfo& s = stats_[static_cast<size_t>(r)];
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
      m_.max_id = std::max<int64_t>(m_.max_id, w.max_id());  // every rank has a block by now
      s.docs_file = DocsFileName(r);
      s.docs_xxh3 = w.docs_digest();
      s.documents = w.documents();
      if (opt_.shard != ShardMode::kBalanced) {  // balanced: counted as blocks were dealt
        s.padding_tokens = w.padding_tokens();
        s.split_documents = w.split_documents();
      } else if (s.padding_tokens != w.padding_tokens() ||
                 s.split_documents != w.split_documents()) {
        return InternalError(fmt::format("rank {}: padding or split counts disagree", r));
      }
    }
    EK_RETURN_IF_ERROR(skips_.Sync());
    std::string manifest_path = opt_.out_dir + "/manifest.json";
    if (Status st = opt_.env->RemoveFile(manifest_path);
        !st.ok() && st.code() != StatusCode::kNotFound)
      return st;
    for (int r = lo_; r <= hi_; ++r) EK_RETURN_IF_ERROR(writers_[static_cast<size_t>(r)]->Commit());
    EK_RETURN_IF_ERROR(skips_.Commit());
    if (!masks_) {  // a previous pack's masks would not match these blocks
      for (int r = lo_; r <= hi_; ++r) {
        Status st = opt_.env->RemoveFile(opt_.out_dir + "/" + MaskFileName(r));
        if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
      }
    }
    for (int r = lo_; r <= hi_; ++r) m_.ranks.push_back(stats_[static_cast<size_t>(r)]);
    if (opt_.shard != ShardMode::kBalanced) {
      m_.SumRankTotals();
    } else {
      m_.total_records = packed_;  // every record taken (a repeated one each time)
      for (const auto& s : stats_) {
        m_.total_dropped_tokens += s.dropped_tokens;
        m_.total_padding_tokens += s.padding_tokens;
        m_.total_split_documents += s.split_documents;
      }
    }
    m_.packing = opt_.packing;
    m_.packing_seed = opt_.packing_seed;
    return WriteManifest(opt_.out_dir, m_, opt_.env);
  }

  const PackOptions& opt_;
  const std::function<void(const PackProgress&)>& progress_;
  std::chrono::steady_clock::time_point t_start_;
  // The sources and inputs (ResolveSources).
  std::vector<PackSource> sources_;
  bool weighted_ = false;
  std::vector<std::string> inputs_;   // every input, in source order
  std::vector<size_t> input_source_;  // its source
  std::vector<std::vector<size_t>> source_inputs_;
  int lo_ = 0, hi_ = 0;  // the ranks written
  // The model (LoadModel), the manifest being filled and the encoder.
  std::unique_ptr<tokenize::Tokenizer> tok_;
  uint64_t tokenizer_xxh3_ = 0;
  int32_t eos_id_ = 0;
  bool masks_ = false;
  Manifest m_;
  std::unique_ptr<RecordEncoder> encoder_;
  SkipList skips_;
  // Pass 1 and the plan.
  bool prescreen_ = false;
  bool read_once_ = false;                            // ReadsOnce: pass 1 read nothing
  std::vector<uint64_t> bad_;                         // global indices of skipped records
  std::vector<std::vector<uint32_t>> source_tokens_;  // weighted: per record
  std::vector<uint64_t> input_base_;                  // the global index of its first record
  std::vector<SourceTake> takes_;
  uint64_t packable_ = 0, reads_ = 0;
  // Pass 2 and the writers.
  bool bfd_ = false;
  Spill spill_;
  std::vector<std::unique_ptr<RankWriter>> writers_;
  std::vector<RankInfo> stats_;
  std::unique_ptr<BalancedRouter> balanced_;
  uint64_t packed_ = 0, tokens_done_ = 0, bytes_done_ = 0;
  uint64_t input_bytes_done_ = 0, input_bytes_total_ = 0;  // inputs finished; every round's
  const ingest::RecordSource* reading_ = nullptr;          // the input being read
  std::vector<uint64_t> source_records_, source_tokens_done_;
};

}  // namespace

Result<Manifest> Pack(const PackOptions& opt,
                      const std::function<void(const PackProgress&)>& progress) {
  Packer packer(opt, progress);
  return packer.Run();
}

}  // namespace ek::pack
