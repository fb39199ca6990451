// evenkeel-checkpoint.json: what a checkpoint directory holds and where the
// run stood when it was saved (docs/checkpoint_format.md). Written last, by
// FinalizeCheckpoint, so its presence marks a checkpoint that was complete.
// The reader is strict: a missing or mistyped field is an error naming the
// field and the file, never a silent 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ek::ckpt {

// Format 2 adds the training state (train_state, below); the reader takes 1 and 2.
inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr int kOldestCheckpointFormatVersion = 1;
inline constexpr std::string_view kManifestName = "evenkeel-checkpoint.json";
// Files are hashed in 64 MiB chunks so that a mismatch names a byte range
// (which part of which shard went bad) and a 60 GB checkpoint's manifest
// stays under ~1,000 chunk hashes.
inline constexpr uint64_t kChunkBytes = 64ull << 20;

// The one subdirectory a checkpoint may have: the full training state.
inline constexpr std::string_view kTrainStateDir = "train_state";
// The one train_state format: torch.distributed.checkpoint's FileSystemWriter
// (.metadata, pickled by torch and never parsed here, plus __R_I.distcp files).
inline constexpr std::string_view kTrainStateFormat = "torch.distributed.checkpoint";
inline constexpr std::string_view kTrainStateMetadata = ".metadata";
inline constexpr std::string_view kTrainStateShardExt = ".distcp";

struct FileRecord {
  // A plain file name inside the checkpoint directory, or
  // "train_state/NAME" for a file of the training state.
  std::string name;
  uint64_t size = 0;
  uint64_t xxh3 = 0;  // xxh3-64 of the whole file
  uint64_t chunk_bytes = kChunkBytes;
  std::vector<uint64_t> chunks;  // xxh3-64 of bytes [i*chunk_bytes, (i+1)*chunk_bytes)
};

struct RunRef {
  std::string name;
  std::string path;   // the run file
  uint64_t xxh3 = 0;  // of the run file's bytes
};

struct PackRef {
  std::string dir;
  uint64_t manifest_xxh3 = 0;  // of the pack's manifest.json
  int world = 0;
  int seq_len = 0;
};

// What the trainer says of the training state it wrote beside the weights
// (format 2). The trainer owns `precision` and `contents`; evenkeel checks
// the files, never their meaning.
struct TrainStateRef {
  std::string format{kTrainStateFormat};
  std::string dir{kTrainStateDir};
  int world = 1;                      // ranks that wrote it
  std::string precision;              // "fp32", the parameters' training precision
  std::vector<std::string> contents;  // "model", "optimizer", "scheduler", "rng", "data"
};

struct CheckpointManifest {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;  // optimizer steps taken when saved
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  bool epoch_complete = false;
  bool final = false;  // the last checkpoint of the run
  uint64_t tokens_seen = 0;
  RunRef run;
  PackRef pack;
  std::string dtype = "bfloat16";  // the tensors' dtype, torch's name
  std::string created;             // UTC, ISO 8601
  std::string evenkeel_version;
  // A JSON object the trainer owns (data position and the like), kept as its
  // text and written back verbatim. Empty means {}.
  std::string extra;
  // Absent in format 1 and in a checkpoint saved without the training state.
  std::optional<TrainStateRef> train_state;
  std::vector<FileRecord> files;  // sorted by name; every file but this manifest
};

// Pretty-printed JSON, one file record a line. `extra` is inserted as is; the
// caller vouches that it is a JSON object (FinalizeCheckpoint checks).
std::string CheckpointManifestToJson(const CheckpointManifest& m);

// `name` starts every error ("step-00000010/evenkeel-checkpoint.json").
Result<CheckpointManifest> CheckpointManifestFromJson(std::string_view json,
                                                      const std::string& name);

// Reads DIR/evenkeel-checkpoint.json; kNotFound when it does not exist.
Result<CheckpointManifest> ReadCheckpointManifest(const std::string& dir);

// Ok when `text` is empty or one JSON object; else kInvalidArgument.
Status CheckExtraJson(std::string_view text);

// The safetensors dtype a manifest dtype requires ("bfloat16" -> "BF16");
// empty for a name evenkeel does not know.
std::string_view SafetensorsDtypeFor(std::string_view torch_dtype);

}  // namespace ek::ckpt
