// The packer: tokenize every record once, route tokens to ranks, cut fixed
// blocks, write rank-NNNNN.i32 files and manifest.json (docs/pack_format.md).
//
// Deterministic: the output depends only on the inputs and options, never on
// the thread count. Streaming: memory is bounded by the chunk size and world,
// not the corpus. Safe: files are written under hidden temporary names,
// fsynced, and renamed only when every rank is complete; the manifest comes
// last, so a killed run leaves nothing that looks complete.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "pack/record.h"
#include "packfile/manifest.h"

namespace ek::pack {

// One source of a pack (the run file's [[data.source]]): its inputs, how its records
// are shaped, and its part of the mixture (pack/mixture.h).
struct PackSource {
  std::string name;
  std::vector<std::string> inputs;  // files and directories, in order (a glob expanded)
  Shape shape;                      // the pack-wide record options, with this shape
  std::string text_field;           // "": the pack-wide one
  std::string split;                // a DatasetDict among its inputs: "" = the pack-wide one
  double weight = 0;                // > 0: a share of the tokens (every source, or none)
  int epochs = 0;                   // else whole passes (0: one)
};

struct PackOptions {
  std::string tokenizer_path;
  std::vector<std::string> inputs;  // with `sources` empty: one source of these, each once
  std::vector<PackSource> sources;
  uint64_t mixture_tokens = 0;  // weights: the mixture's size (0: the largest repeating none)
  uint64_t mixture_seed = 0;
  std::string out_dir;
  std::string split;  // a DatasetDict input: the split to read ("" = its only one)
  int world = 0;
  int seq_len = 2048;
  ShardMode shard = ShardMode::kBalanced;  // spread 0: evenfix drops nothing (contiguous/strided:
                                           // as datasets.shard)
  RecordOptions record;                    // its chat template is loaded by Pack from `chat`
  ChatChoice chat;
  LossMask loss_mask = LossMask::kNone;
  // sequential: records end to end, cut at block ends; bfd: best-fit-decreasing
  // bins padded with EOS (pack/bfd.h), equal lengths in packing_seed's order.
  Packing packing = Packing::kSequential;
  uint64_t packing_seed = 0;
  std::optional<std::string> eos_token;  // default: eos_token of tokenizer_config.json
  int rank_lo = 0;                       // ranks to write: [rank_lo, rank_hi]
  int rank_hi = -1;                      // -1: world - 1
  size_t threads = 0;                    // 0: all cores
  bool skip_bad = false;
  // Bytes of input read (and encoded) a batch at a time. 0: 512 KiB a thread, from
  // 1 MiB to 8 MiB: a batch's text, its ids and the reader's buffer stay small enough
  // to be touched once and reused (8 MiB batches on one core took twice the page
  // faults), each of many threads still gets records to encode, and 16 threads or
  // more keep the 8 MiB (two batches in flight) that bounded pack's memory before.
  size_t chunk_bytes = 0;
  Env* env = Env::Default();  // every file written goes through it (tests inject faults)
};

struct PackProgress {
  // records_total is 0 where the pack reads its inputs once (nothing counted them before
  // pass 2): input_bytes_* then tell how far it is.
  uint64_t records_done = 0, records_total = 0, tokens = 0, bytes = 0;
  uint64_t input_bytes_done = 0, input_bytes_total = 0;  // every round of every input
  double seconds = 0;
};

// Runs a pack. `progress` (optional) is called from the calling thread.
// A rank left without a single block is an error (InvalidArgument, naming the
// ranks and the token count against what the world needs), and nothing is
// published: such a rank would wait in the first collective while the others
// train, which is a hang, not a run.
Result<Manifest> Pack(const PackOptions& options,
                      const std::function<void(const PackProgress&)>& progress = nullptr);

// Which rank owns record `index` of `total` (contiguous / strided), matching
// Hugging Face datasets' Dataset.shard(num_shards=world, index=rank, contiguous=...).
int OwnerOf(ShardMode mode, uint64_t index, uint64_t total, int world);

// The EOS token named in tokenizer_config.json beside `tokenizer_path`.
Result<std::string> EosFromConfig(const std::string& tokenizer_path);

// tokenizer_config.json beside `tokenizer_path`.
std::string ConfigBeside(const std::string& tokenizer_path);

}  // namespace ek::pack
