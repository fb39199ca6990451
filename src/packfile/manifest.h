// manifest.json: what a pack holds and how it was made (docs/pack_format.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace ek::pack {

inline constexpr int kManifestFormatVersion = 1;

enum class ShardMode { kContiguous, kStrided, kBalanced };
Result<ShardMode> ParseShardMode(std::string_view name);
std::string_view ShardModeName(ShardMode m);

// How documents are placed in blocks: end to end in record order, a document
// cut at a block's end running on into the next (sequential, no padding); or
// best-fit-decreasing bins padded to seq_len (bfd: pack/bfd.h).
enum class Packing { kSequential, kBfd };
Result<Packing> ParsePacking(std::string_view name);
std::string_view PackingName(Packing p);

struct InputInfo {
  std::string path;
  uint64_t size = 0;     // bytes on disk
  uint64_t xxh3 = 0;     // xxh3-64 of the bytes on disk
  uint64_t records = 0;  // non-blank lines
  uint64_t skipped_bad = 0;
};

struct RankInfo {
  int rank = 0;
  uint64_t records = 0;  // records assigned (balanced: records that start in this rank's blocks)
  uint64_t tokens = 0;   // tokens routed to this rank, EOS included, before dropping
  uint64_t blocks = 0;
  uint64_t bytes = 0;  // file size = blocks * seq_len * 4
  uint64_t dropped_tokens = 0;
  uint64_t xxh3 = 0;  // xxh3-64 of the block file
  std::string file;   // "rank-00003.i32"
  // Loss masks (--loss-mask assistant): rank-NNNNN.mask, one byte per token of
  // the block file (1: the token counts in the loss), and its xxh3-64.
  std::string mask_file;  // empty: no mask
  uint64_t mask_xxh3 = 0;
  uint64_t loss_tokens = 0;  // tokens of this rank's blocks whose mask is 1
  // Document boundaries (packfile/layout.h): rank-NNNNN.docs, its xxh3-64, and
  // how many of its entries are document starts (the rest begin padding).
  std::string docs_file;  // empty: an older pack, without boundaries
  uint64_t docs_xxh3 = 0;
  uint64_t documents = 0;
  uint64_t padding_tokens = 0;   // pad tokens in the rank's blocks (bfd; 0 sequential)
  uint64_t split_documents = 0;  // documents starting in the rank's blocks that span more than one
};

// One source of a pack made from the run file's [[data.source]] (docs/pack_format.md,
// "Sources and mixtures"): what it was asked for and what it gave. Shares are of the
// tokens routed (EOS included, before the blocks' cut).
struct SourceInfo {
  std::string name;
  std::vector<std::string> inputs;  // its files and directories, in order
  double weight = 0;                // > 0: a weighted mixture
  int64_t epochs = 0;               // > 0: whole passes asked for
  int64_t passes = 0;               // whole passes taken
  uint64_t remainder_records = 0;   // records taken once more after the passes (weights)
  uint64_t records = 0, tokens = 0;
  double target_share = 0, realized_share = 0;
};

struct BadRecord {
  std::string path;
  uint64_t line = 0;
  std::string error;
};

struct Manifest {
  int format_version = kManifestFormatVersion;
  std::string evenkeel_version;
  std::string tokenizer_path;
  uint64_t tokenizer_xxh3 = 0;
  uint64_t tokenizer_vocab_xxh3 =
      0;  // tokjson/vocab_fingerprint.h; 0 in packs made before it existed
  // The tokenizer's id limit (added tokens included): every id is below it.
  int64_t vocab_size = 0;
  // The largest id the blocks hold (EOS and padding included): tokenizer.max_id.
  // -1: not recorded (a pack made before it); largest_id() then says vocab_size - 1.
  int64_t max_id = -1;
  int seq_len = 2048;
  int world = 0;
  ShardMode shard = ShardMode::kContiguous;
  int64_t eos_id = 0;
  std::string eos_token;
  std::string chat_template = "none";  // none, chatml, llama3, jinja
  std::string chat_template_path;  // jinja: the template's file (tokenizer_config.json or a .jinja)
  uint64_t chat_template_xxh3 = 0;  // jinja: xxh3-64 of the template's source text
  uint64_t chat_records = 0;        // records rendered from messages
  // --allow-template-drops: conversations whose rendering lost a part (a
  // message's content, a tool, a tool call, or all of it) and those parts.
  uint64_t template_drop_records = 0, template_drop_parts = 0;
  std::string loss_mask = "none";  // none, assistant (then every rank has a mask file)
  std::string text_field = "text";
  std::vector<InputInfo> inputs;
  // The sources and the mixture; a pack from flags alone has one source of every input.
  std::vector<SourceInfo> sources;
  uint64_t mixture_seed = 0;
  uint64_t mixture_tokens = 0;  // weights: the size asked for (0: the largest repeating none)
  Packing packing = Packing::kSequential;  // absent in older packs: sequential
  uint64_t packing_seed = 0;               // bfd: the order of equal lengths
  std::vector<RankInfo> ranks;             // sorted by rank; all of [0, world) when complete
  uint64_t total_records = 0;
  uint64_t total_tokens = 0;
  uint64_t total_dropped_tokens = 0;  // the tail: tokens routed but in no kept block
  uint64_t total_padding_tokens = 0;
  uint64_t total_split_documents = 0;
  uint64_t skipped_bad = 0;
  // Skipped records by reason class (invalid_utf8, invalid_json, shape, template,
  // tokenize: docs/pack_format.md); every one is listed in skipped.jsonl.
  std::map<std::string, uint64_t> skipped_reasons;
  std::vector<BadRecord> bad_examples;  // the first few skipped records
  std::string created;                  // UTC time, ISO 8601

  bool complete() const { return static_cast<int>(ranks.size()) == world; }
  // The largest id the pack may hold: max_id, or vocab_size - 1 where it is not recorded.
  int64_t largest_id() const { return max_id >= 0 ? max_id : vocab_size - 1; }
  uint64_t total_blocks() const;
  uint64_t min_blocks() const;
  uint64_t max_blocks() const;
  // Contiguous/strided: the totals (records, tokens, dropped, padding, split documents)
  // as the sums of `ranks`' counts. (Balanced counts its totals over the whole stream.)
  void SumRankTotals();
};

// skipped.jsonl: one line per record --skip-bad skipped (docs/pack_format.md).
inline constexpr char kSkippedFileName[] = "skipped.jsonl";
std::string RankFileName(int rank);
std::string MaskFileName(int rank);
std::string DocsFileName(int rank);
std::string ManifestToJson(const Manifest& m);
Result<Manifest> ManifestFromJson(std::string_view json, const std::string& name);
Result<Manifest> ReadManifest(const std::string& dir);
Status WriteManifest(const std::string& dir, const Manifest& m, Env* env = Env::Default());

// Combines node manifests (each covering some ranks) into one, checking that
// they describe the same pack and cover every rank exactly once.
Result<Manifest> MergeManifests(const std::vector<Manifest>& parts,
                                const std::vector<std::string>& names);

}  // namespace ek::pack
