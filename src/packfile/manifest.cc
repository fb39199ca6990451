#include "packfile/manifest.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/parse.h"
#include "packfile/layout.h"

namespace ek::pack {

Result<ShardMode> ParseShardMode(std::string_view name) {
  if (name == "contiguous") return ShardMode::kContiguous;
  if (name == "strided") return ShardMode::kStrided;
  if (name == "balanced") return ShardMode::kBalanced;
  return InvalidArgumentError(
      fmt::format("unknown shard mode '{}' (contiguous, strided, balanced)", name));
}

std::string_view ShardModeName(ShardMode m) {
  switch (m) {
    case ShardMode::kContiguous:
      return "contiguous";
    case ShardMode::kStrided:
      return "strided";
    case ShardMode::kBalanced:
      return "balanced";
  }
  return "contiguous";
}

Result<Packing> ParsePacking(std::string_view name) {
  if (name == "sequential") return Packing::kSequential;
  if (name == "bfd") return Packing::kBfd;
  return InvalidArgumentError(fmt::format("unknown packing '{}' (sequential, bfd)", name));
}

std::string_view PackingName(Packing p) { return p == Packing::kBfd ? "bfd" : "sequential"; }

std::string RankFileName(int rank) { return fmt::format("rank-{:05d}.i32", rank); }
std::string MaskFileName(int rank) { return fmt::format("rank-{:05d}.mask", rank); }
std::string DocsFileName(int rank) { return fmt::format("rank-{:05d}.docs", rank); }

void Manifest::SumRankTotals() {
  total_records = total_tokens = total_dropped_tokens = 0;
  total_padding_tokens = total_split_documents = 0;
  for (const auto& r : ranks) {
    total_records += r.records;
    total_tokens += r.tokens;
    total_dropped_tokens += r.dropped_tokens;
    total_padding_tokens += r.padding_tokens;
    total_split_documents += r.split_documents;
  }
}

uint64_t Manifest::total_blocks() const {
  uint64_t n = 0;
  for (const auto& r : ranks) n += r.blocks;
  return n;
}
uint64_t Manifest::min_blocks() const {
  uint64_t m = UINT64_MAX;
  for (const auto& r : ranks) m = std::min(m, r.blocks);
  return ranks.empty() ? 0 : m;
}
uint64_t Manifest::max_blocks() const {
  uint64_t m = 0;
  for (const auto& r : ranks) m = std::max(m, r.blocks);
  return m;
}

namespace {
std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }
}  // namespace

std::string ManifestToJson(const Manifest& m) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject(JsonWriter::kLines);
  w.Key("format_version").Int(m.format_version);
  w.Key("evenkeel_version").Str(m.evenkeel_version);
  w.Key("created").Str(m.created);
  w.Key("tokenizer").BeginObject().Key("path").Str(m.tokenizer_path);
  w.Key("xxh3").Str(Hex(m.tokenizer_xxh3)).Key("vocab_xxh3").Str(Hex(m.tokenizer_vocab_xxh3));
  w.Key("vocab_size").Int(m.vocab_size);
  if (m.max_id >= 0) w.Key("max_id").Int(m.max_id);
  w.EndObject();
  w.Key("seq_len").Int(m.seq_len);
  w.Key("world").Int(m.world);
  w.Key("shard").Str(ShardModeName(m.shard));
  w.Key("eos").BeginObject().Key("id").Int(m.eos_id).Key("token").Str(m.eos_token).EndObject();
  w.Key("chat_template").Str(m.chat_template);
  if (m.chat_template == "jinja") {
    w.Key("chat_template_source").BeginObject().Key("path").Str(m.chat_template_path);
    w.Key("xxh3").Str(Hex(m.chat_template_xxh3)).EndObject();
  }
  w.Key("loss_mask").Str(m.loss_mask);
  w.Key("text_field").Str(m.text_field);
  w.Key("inputs").BeginArray(JsonWriter::kLines);
  for (const auto& in : m.inputs) {
    w.BeginObject().Key("path").Str(in.path).Key("size").Uint(in.size);
    w.Key("xxh3").Str(Hex(in.xxh3)).Key("records").Uint(in.records);
    w.Key("skipped_bad").Uint(in.skipped_bad).EndObject();
  }
  w.EndArray();
  w.Key("sources").BeginArray(JsonWriter::kLines);
  for (const auto& src : m.sources) {
    w.BeginObject().Key("name").Str(src.name).Key("inputs").StrArray(src.inputs);
    w.Key("weight").Double(src.weight).Key("epochs").Int(src.epochs);
    w.Key("passes").Int(src.passes).Key("remainder_records").Uint(src.remainder_records);
    w.Key("records").Uint(src.records).Key("tokens").Uint(src.tokens);
    w.Key("target_share").Double(src.target_share);
    w.Key("realized_share").Double(src.realized_share).EndObject();
  }
  w.EndArray();
  w.Key("mixture").BeginObject().Key("seed").Uint(m.mixture_seed);
  w.Key("tokens").Uint(m.mixture_tokens).EndObject();
  w.Key("packing").BeginObject().Key("strategy").Str(PackingName(m.packing));
  w.Key("seed").Uint(m.packing_seed).EndObject();
  w.Key("ranks").BeginArray(JsonWriter::kLines);
  for (const auto& r : m.ranks) {
    w.BeginObject().Key("rank").Int(r.rank).Key("file").Str(r.file);
    w.Key("records").Uint(r.records).Key("tokens").Uint(r.tokens).Key("blocks").Uint(r.blocks);
    w.Key("bytes").Uint(r.bytes).Key("dropped_tokens").Uint(r.dropped_tokens);
    w.Key("xxh3").Str(Hex(r.xxh3));
    if (!r.mask_file.empty()) {
      w.Key("mask_file").Str(r.mask_file).Key("mask_xxh3").Str(Hex(r.mask_xxh3));
      w.Key("loss_tokens").Uint(r.loss_tokens);
    }
    if (!r.docs_file.empty()) {
      w.Key("docs_file").Str(r.docs_file).Key("docs_xxh3").Str(Hex(r.docs_xxh3));
      w.Key("documents").Uint(r.documents);
    }
    w.Key("padding_tokens").Uint(r.padding_tokens).Key("split_documents").Uint(r.split_documents);
    w.EndObject();
  }
  w.EndArray();
  w.Key("complete").Bool(m.complete());
  w.Key("totals").BeginObject().Key("records").Uint(m.total_records);
  w.Key("chat_records").Uint(m.chat_records).Key("tokens").Uint(m.total_tokens);
  w.Key("blocks").Uint(m.total_blocks()).Key("dropped_tokens").Uint(m.total_dropped_tokens);
  w.Key("skipped_bad").Uint(m.skipped_bad).Key("padding_tokens").Uint(m.total_padding_tokens);
  w.Key("split_documents").Uint(m.total_split_documents).EndObject();
  w.Key("template_drops").BeginObject().Key("records").Uint(m.template_drop_records);
  w.Key("parts").Uint(m.template_drop_parts).EndObject();
  if (!m.skipped_reasons.empty()) {
    w.Key("skipped_reasons").BeginObject();
    for (const auto& [reason, n] : m.skipped_reasons) w.Key(reason).Uint(n);
    w.EndObject();
  }
  w.Key("bad_examples").BeginArray();
  for (const auto& b : m.bad_examples) {
    w.BeginObject().Key("path").Str(b.path).Key("line").Uint(b.line);
    w.Key("error").Str(b.error).EndObject();
  }
  w.EndArray();
  w.Key("global_min_blocks").Uint(m.min_blocks());
  w.Key("global_max_blocks").Uint(m.max_blocks());
  w.Key("spread").Uint(m.max_blocks() - m.min_blocks());
  w.EndObject();
  return w.Line();
}

namespace {

using simdjson::dom::element;

}  // namespace

Result<Manifest> ManifestFromJson(std::string_view json, const std::string& name) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element root;
  if (parser.parse(padded).get(root)) {
    std::string where = LocateJsonError(json);
    return CorruptError(fmt::format("{}: malformed JSON: {}", name, where.empty() ? "?" : where));
  }
  EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, name));
  Manifest m;
  EK_RETURN_IF_ERROR(f.Int("format_version", &m.format_version));
  if (m.format_version != kManifestFormatVersion) {
    return UnsupportedError(fmt::format("{}: format_version {} (this evenkeel reads {})", name,
                                        m.format_version, kManifestFormatVersion));
  }
  EK_RETURN_IF_ERROR(f.Str("evenkeel_version", &m.evenkeel_version));
  EK_RETURN_IF_ERROR(f.OptStr("created", &m.created));
  JsonFields tok = f, eos = f, totals = f;
  EK_RETURN_IF_ERROR(f.Object("tokenizer", &tok));
  EK_RETURN_IF_ERROR(tok.Str("path", &m.tokenizer_path));
  EK_RETURN_IF_ERROR(tok.Hex64("xxh3", &m.tokenizer_xxh3));
  if (tok.Has("vocab_xxh3")) {  // absent in packs made before it existed
    EK_RETURN_IF_ERROR(tok.Hex64("vocab_xxh3", &m.tokenizer_vocab_xxh3));
  }
  EK_RETURN_IF_ERROR(tok.Int("vocab_size", 0, INT64_MAX, &m.vocab_size));
  // Absent in packs made before it existed: largest_id() is then vocab_size - 1.
  if (tok.Has("max_id")) {
    EK_RETURN_IF_ERROR(tok.Int("max_id", 0, INT64_MAX, &m.max_id));
    if (m.max_id >= m.vocab_size) {
      return tok.Err("max_id",
                     fmt::format("{} is not below vocab_size {}", m.max_id, m.vocab_size));
    }
  }
  EK_RETURN_IF_ERROR(f.IntIn("seq_len", 1, INT32_MAX, &m.seq_len));
  EK_RETURN_IF_ERROR(f.IntIn("world", 1, INT32_MAX, &m.world));
  std::string shard;
  EK_RETURN_IF_ERROR(f.Str("shard", &shard));
  auto mode = ParseShardMode(shard);
  if (!mode.ok()) return f.Err("shard", mode.status().message());
  m.shard = *mode;
  EK_RETURN_IF_ERROR(f.Object("eos", &eos));
  EK_RETURN_IF_ERROR(eos.Int("id", 0, INT64_MAX, &m.eos_id));
  EK_RETURN_IF_ERROR(eos.Str("token", &m.eos_token));
  EK_RETURN_IF_ERROR(f.Str("chat_template", &m.chat_template));
  if (m.chat_template != "none" && m.chat_template != "chatml" && m.chat_template != "llama3" &&
      m.chat_template != "jinja") {
    return f.Err("chat_template",
                 fmt::format("'{}' is not none, chatml, llama3 or jinja", m.chat_template));
  }
  if (m.chat_template == "jinja") {
    JsonFields src = f;
    EK_RETURN_IF_ERROR(f.Object("chat_template_source", &src));
    EK_RETURN_IF_ERROR(src.Str("path", &m.chat_template_path));
    EK_RETURN_IF_ERROR(src.Hex64("xxh3", &m.chat_template_xxh3));
  }
  if (f.Has("loss_mask")) {  // absent in packs made before loss masks
    EK_RETURN_IF_ERROR(f.Str("loss_mask", &m.loss_mask));
    if (m.loss_mask != "none" && m.loss_mask != "assistant") {
      return f.Err("loss_mask", fmt::format("'{}' is not none or assistant", m.loss_mask));
    }
  }
  EK_RETURN_IF_ERROR(f.Str("text_field", &m.text_field));
  EK_RETURN_IF_ERROR(f.Objects("inputs", [&](const JsonFields& x) {
    InputInfo in;
    EK_RETURN_IF_ERROR(x.Str("path", &in.path));
    EK_RETURN_IF_ERROR(x.U64("size", &in.size));
    EK_RETURN_IF_ERROR(x.Hex64("xxh3", &in.xxh3));
    EK_RETURN_IF_ERROR(x.U64("records", &in.records));
    EK_RETURN_IF_ERROR(x.U64("skipped_bad", &in.skipped_bad));
    m.inputs.push_back(in);
    return Status::Ok();
  }));
  if (f.Has("sources")) {  // absent in packs made before it existed
    EK_RETURN_IF_ERROR(f.Objects("sources", [&](const JsonFields& x) {
      SourceInfo src;
      EK_RETURN_IF_ERROR(x.Str("name", &src.name));
      EK_RETURN_IF_ERROR(x.StrList("inputs", &src.inputs));
      EK_RETURN_IF_ERROR(x.Num("weight", &src.weight));
      EK_RETURN_IF_ERROR(x.Int("epochs", 0, 1000000, &src.epochs));
      EK_RETURN_IF_ERROR(x.Int("passes", 0, 1000000000, &src.passes));
      EK_RETURN_IF_ERROR(x.U64("remainder_records", &src.remainder_records));
      EK_RETURN_IF_ERROR(x.U64("records", &src.records));
      EK_RETURN_IF_ERROR(x.U64("tokens", &src.tokens));
      EK_RETURN_IF_ERROR(x.Num("target_share", &src.target_share));
      EK_RETURN_IF_ERROR(x.Num("realized_share", &src.realized_share));
      m.sources.push_back(std::move(src));
      return Status::Ok();
    }));
  }
  if (f.Has("mixture")) {
    JsonFields mix = f;
    EK_RETURN_IF_ERROR(f.Object("mixture", &mix));
    EK_RETURN_IF_ERROR(mix.U64("seed", &m.mixture_seed));
    EK_RETURN_IF_ERROR(mix.U64("tokens", &m.mixture_tokens));
  }
  if (f.Has("packing")) {  // absent in packs made before bfd: sequential
    JsonFields pk = f;
    std::string strategy;
    EK_RETURN_IF_ERROR(f.Object("packing", &pk));
    EK_RETURN_IF_ERROR(pk.Str("strategy", &strategy));
    auto p = ParsePacking(strategy);
    if (!p.ok()) return pk.Err("strategy", p.status().message());
    m.packing = *p;
    EK_RETURN_IF_ERROR(pk.U64("seed", &m.packing_seed));
  }
  EK_RETURN_IF_ERROR(f.Objects("ranks", [&](const JsonFields& x) {
    RankInfo ri;
    EK_RETURN_IF_ERROR(x.Int("rank", &ri.rank));
    EK_RETURN_IF_ERROR(x.Str("file", &ri.file));
    EK_RETURN_IF_ERROR(x.U64("records", &ri.records));
    EK_RETURN_IF_ERROR(x.U64("tokens", &ri.tokens));
    EK_RETURN_IF_ERROR(x.U64("blocks", &ri.blocks));
    EK_RETURN_IF_ERROR(x.U64("bytes", &ri.bytes));
    EK_RETURN_IF_ERROR(x.U64("dropped_tokens", &ri.dropped_tokens));
    EK_RETURN_IF_ERROR(x.Hex64("xxh3", &ri.xxh3));
    if (m.loss_mask == "assistant") {
      EK_RETURN_IF_ERROR(x.Str("mask_file", &ri.mask_file));
      EK_RETURN_IF_ERROR(x.Hex64("mask_xxh3", &ri.mask_xxh3));
      EK_RETURN_IF_ERROR(x.U64("loss_tokens", &ri.loss_tokens));
      if (ri.mask_file.empty() || ri.mask_file.find('/') != std::string::npos) {
        return x.Err("mask_file", "must be a file name in the pack directory");
      }
    }
    if (x.Has("docs_file")) {  // absent in packs made before document boundaries
      EK_RETURN_IF_ERROR(x.Str("docs_file", &ri.docs_file));
      EK_RETURN_IF_ERROR(x.Hex64("docs_xxh3", &ri.docs_xxh3));
      EK_RETURN_IF_ERROR(x.U64("documents", &ri.documents));
      if (ri.docs_file.empty() || ri.docs_file.find('/') != std::string::npos) {
        return x.Err("docs_file", "must be a file name in the pack directory");
      }
    }
    if (x.Has("padding_tokens")) EK_RETURN_IF_ERROR(x.U64("padding_tokens", &ri.padding_tokens));
    if (x.Has("split_documents")) {
      EK_RETURN_IF_ERROR(x.U64("split_documents", &ri.split_documents));
    }
    if (!m.ranks.empty() && m.ranks[0].docs_file.empty() != ri.docs_file.empty()) {
      return x.Err("docs_file",
                   fmt::format("rank {} {} a docs file and rank {} {}: a pack has "
                               "document boundaries on every rank or on none",
                               m.ranks[0].rank, m.ranks[0].docs_file.empty() ? "lacks" : "has",
                               ri.rank, ri.docs_file.empty() ? "lacks" : "has"));
    }
    if (ri.rank < 0 || ri.rank >= m.world) {
      return x.Err("rank", fmt::format("rank {} outside world {}", ri.rank, m.world));
    }
    if (ri.blocks > (UINT64_MAX / 4) / static_cast<uint64_t>(m.seq_len) ||
        ri.bytes != ri.blocks * BlockBytes(m.seq_len)) {
      return x.Err("bytes", fmt::format("rank {}: bytes != blocks x seq_len x 4", ri.rank));
    }
    m.ranks.push_back(ri);
    return Status::Ok();
  }));
  EK_RETURN_IF_ERROR(f.Object("totals", &totals));
  EK_RETURN_IF_ERROR(totals.U64("records", &m.total_records));
  if (totals.Has("chat_records")) EK_RETURN_IF_ERROR(totals.U64("chat_records", &m.chat_records));
  EK_RETURN_IF_ERROR(totals.U64("tokens", &m.total_tokens));
  EK_RETURN_IF_ERROR(totals.U64("dropped_tokens", &m.total_dropped_tokens));
  EK_RETURN_IF_ERROR(totals.U64("skipped_bad", &m.skipped_bad));
  if (totals.Has("padding_tokens")) {  // absent in packs made before bfd
    EK_RETURN_IF_ERROR(totals.U64("padding_tokens", &m.total_padding_tokens));
  }
  if (totals.Has("split_documents")) {
    EK_RETURN_IF_ERROR(totals.U64("split_documents", &m.total_split_documents));
  }
  if (f.Has("template_drops")) {  // absent in packs made before it existed
    JsonFields drops = f;
    EK_RETURN_IF_ERROR(f.Object("template_drops", &drops));
    EK_RETURN_IF_ERROR(drops.U64("records", &m.template_drop_records));
    EK_RETURN_IF_ERROR(drops.U64("parts", &m.template_drop_parts));
  }
  if (f.Has("skipped_reasons")) {
    JsonFields reasons = f;
    EK_RETURN_IF_ERROR(f.Object("skipped_reasons", &reasons));
    for (std::string_view k : reasons.Keys()) {
      uint64_t n = 0;
      EK_RETURN_IF_ERROR(reasons.U64(k, &n));
      m.skipped_reasons[std::string(k)] = n;
    }
  }
  if (f.Has("bad_examples")) {
    EK_RETURN_IF_ERROR(f.Objects("bad_examples", [&](const JsonFields& x) {
      BadRecord b;
      EK_RETURN_IF_ERROR(x.Str("path", &b.path));
      EK_RETURN_IF_ERROR(x.U64("line", &b.line));
      EK_RETURN_IF_ERROR(x.Str("error", &b.error));
      m.bad_examples.push_back(b);
      return Status::Ok();
    }));
  }
  std::sort(m.ranks.begin(), m.ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  for (size_t k = 1; k < m.ranks.size(); ++k) {
    if (m.ranks[k].rank == m.ranks[k - 1].rank) {
      return f.Err("ranks", fmt::format("rank {} twice", m.ranks[k].rank));
    }
  }
  return m;
}

Result<Manifest> ReadManifest(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return NotFoundError(dir + ": directory does not exist");
    return ErrnoError(dir, errno);
  }
  if (!S_ISDIR(st.st_mode))
    return InvalidArgumentError(dir + ": not a directory (a pack is a directory)");
  std::string path = dir + "/manifest.json";
  auto data = ReadFile(path);
  if (!data.ok()) {
    if (!FileExists(path))
      return NotFoundError(path + ": no manifest (not a pack, or packing did not finish)");
    return data.status();
  }
  return ManifestFromJson(*data, path);
}

Status WriteManifest(const std::string& dir, const Manifest& m, Env* env) {
  return WriteFileAtomic(dir + "/manifest.json", ManifestToJson(m), env);
}

Result<Manifest> MergeManifests(const std::vector<Manifest>& parts,
                                const std::vector<std::string>& names) {
  if (parts.empty()) return InvalidArgumentError("pack merge: no manifests");
  Manifest out = parts[0];
  out.ranks.clear();
  std::set<int> seen;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Manifest& p = parts[i];
    auto differ = [&](std::string_view what) {
      return InvalidArgumentError(
          fmt::format("pack merge: {} disagrees with {} on {}", names[i], names[0], what));
    };
    if (p.tokenizer_xxh3 != out.tokenizer_xxh3) return differ("the tokenizer (xxh3)");
    // The largest id over the parts; unknown when one part predates max_id.
    out.max_id = (p.max_id < 0 || out.max_id < 0) ? -1 : std::max(out.max_id, p.max_id);
    if (p.seq_len != out.seq_len) return differ("seq_len");
    if (p.world != out.world) return differ("world");
    if (p.shard != out.shard) return differ("shard mode");
    if (p.eos_id != out.eos_id) return differ("the EOS id");
    if (p.chat_template != out.chat_template || p.text_field != out.text_field ||
        p.chat_template_xxh3 != out.chat_template_xxh3) {
      return differ("the record format (chat template, text field)");
    }
    if (p.loss_mask != out.loss_mask) return differ("the loss mask");
    if (p.packing != out.packing || p.packing_seed != out.packing_seed) {
      return differ("the packing (strategy, seed)");
    }
    if (!p.ranks.empty() && !parts[0].ranks.empty() &&
        p.ranks[0].docs_file.empty() != parts[0].ranks[0].docs_file.empty()) {
      return differ("document boundaries (docs files)");
    }
    if (p.inputs.size() != out.inputs.size()) return differ("inputs");
    if (p.sources.size() != out.sources.size() || p.mixture_seed != out.mixture_seed ||
        p.mixture_tokens != out.mixture_tokens) {
      return differ("the sources and the mixture");
    }
    for (size_t k = 0; k < p.sources.size(); ++k) {
      const SourceInfo &a = p.sources[k], &b = out.sources[k];
      if (a.name != b.name || a.inputs != b.inputs || a.weight != b.weight ||
          a.epochs != b.epochs || a.passes != b.passes ||
          a.remainder_records != b.remainder_records ||
          (a.weight > 0 && a.target_share != b.target_share)) {
        return differ(fmt::format("source {} ('{}')", k, a.name));
      }
    }
    for (size_t k = 0; k < p.inputs.size(); ++k) {
      if (p.inputs[k].xxh3 != out.inputs[k].xxh3 || p.inputs[k].size != out.inputs[k].size) {
        return differ(fmt::format("input {} ({})", k, p.inputs[k].path));
      }
    }
    for (const auto& r : p.ranks) {
      if (!seen.insert(r.rank).second) {
        return InvalidArgumentError(fmt::format(
            "pack merge: rank {} appears in more than one manifest ({})", r.rank, names[i]));
      }
      out.ranks.push_back(r);
    }
  }
  std::sort(out.ranks.begin(), out.ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  std::vector<int64_t> missing;
  for (int r = 0; r < out.world; ++r) {
    if (!seen.count(r)) missing.push_back(r);
  }
  if (!missing.empty()) {
    return InvalidArgumentError(
        fmt::format("pack merge: ranks {} are in no manifest", CompactRanges(missing)));
  }
  // Totals over the whole pack: records and tokens by rank add up for
  // contiguous/strided; balanced parts each saw every record, so keep one copy.
  if (out.shard != ShardMode::kBalanced) {
    // Skips are whole-corpus in every part (--skip-bad screens every record before
    // sharding), so like balanced parts they are kept once; chat records are each part's.
    out.chat_records = 0;
    // Template drops are counted where a record is rendered for its rank: each part's.
    out.template_drop_records = out.template_drop_parts = 0;
    for (const auto& p : parts) {
      out.chat_records += p.chat_records;
      out.template_drop_records += p.template_drop_records;
      out.template_drop_parts += p.template_drop_parts;
    }
    // A source's records and tokens are counted where they are routed: each part's.
    uint64_t routed = 0;
    for (size_t k = 0; k < out.sources.size(); ++k) {
      out.sources[k].records = out.sources[k].tokens = 0;
      for (const auto& p : parts) {
        out.sources[k].records += p.sources[k].records;
        out.sources[k].tokens += p.sources[k].tokens;
      }
      routed += out.sources[k].tokens;
    }
    for (auto& src : out.sources) {
      src.realized_share =
          routed ? static_cast<double>(src.tokens) / static_cast<double>(routed) : 0.0;
      if (src.weight == 0) src.target_share = src.realized_share;  // whole passes: exact
    }
    out.SumRankTotals();
  }
  return out;
}

}  // namespace ek::pack
