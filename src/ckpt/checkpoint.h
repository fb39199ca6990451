// Consolidated checkpoints: finalize, verify, list, pick and prune
// (docs/checkpoint_format.md).
//
// A checkpoint is a flat directory CKPT_DIR/step-NNNNNNNN (8-digit step)
// holding Hugging Face safetensors shards, their index
// (model.safetensors.index.json; optional for a single model.safetensors),
// copied config and tokenizer files, and evenkeel-checkpoint.json, written
// last. The trainer fills CKPT_DIR/.step-NNNNNNNN.tmp-PID and calls
// FinalizeCheckpoint, which hashes, writes the manifest, fsyncs and renames:
// a directory with a final name and a manifest was complete when it was made,
// and VerifyCheckpoint says whether it still is.
//
// Thread safety: the functions share no state; two processes finalizing or
// pruning the same CKPT_DIR at once are not supported (one trainer rank 0 owns
// it). Temp directories are judged "in progress" by their PID, so that
// judgement is only right on the host that wrote them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "core/env.h"
#include "core/status.h"

namespace ek::ckpt {

// "step-00000010": the final directory name of a step.
std::string StepDirName(int64_t step);

// Hashes every regular file in `temp_dir` (xxh3-64 per file and per 64 MiB
// chunk), fsyncs it, writes evenkeel-checkpoint.json from
// `meta_without_files` plus the file list, checks the directory at
// kStructure level, fsyncs it and renames it to `final_dir`, then fsyncs the
// parent. An existing `final_dir` (a re-run reaching the same step) is moved
// aside to a hidden name first and removed after the rename. On any failure
// no `final_dir` is left that looks complete, and the error names the path.
// `temp_dir` holds regular files and, when `meta_without_files.train_state`
// is set, exactly one subdirectory of that name (train_state.dir) holding
// regular files only, which are hashed, listed as "train_state/NAME" and
// fsynced with the subdirectory. Any other subdirectory, deeper nesting, a
// symlink or other non-regular entry, a subdirectory without a train_state,
// or a train_state without its subdirectory is an error naming it. `meta_without_files.extra` must
// be empty or a JSON object. Every write, fsync and rename goes through `env`. A failure after the
// rename (the parent's fsync) is reported with the new checkpoint in place
// and complete, but not known to be durable.
Status FinalizeCheckpoint(const std::string& temp_dir, const std::string& final_dir,
                          const CheckpointManifest& meta_without_files, Env* env = Env::Default());

enum class VerifyLevel {
  kStructure,  // manifest, index, shard headers, file sizes: reads only headers
  kFull,       // kStructure plus every byte re-hashed against the manifest
};

struct VerifyOptions {
  VerifyLevel level = VerifyLevel::kStructure;
  // false: a directory without evenkeel-checkpoint.json (a Hugging Face
  // checkpoint from another tool) is checked for what it has; kFull then adds
  // nothing, there being no hashes to compare.
  bool require_manifest = true;
  size_t threads = 0;  // hashing threads for kFull; 0: up to 8
};

struct VerifyReport {
  // weights_ok && (!has_train_state || train_state_ok).
  bool ok = false;
  std::vector<std::string> problems;  // problems[0] is the headline; at most ~50
  // The manifest, the weights (shards, index, config and the rest) and every
  // file outside train_state: what `ok` meant before format 2.
  bool weights_ok = false;
  // The manifest has a train_state (format 2, saved with the training state).
  bool has_train_state = false;
  // Its files are all there, listed, of their sizes (and at kFull hashes).
  bool train_state_ok = false;
  // The training state's problems, each also in `problems`.
  std::vector<std::string> train_state_problems;
  int train_state_world = 0;  // ranks that wrote it; 0 without one
  bool has_manifest = false;
  int64_t step = -1;         // from the manifest, else from the name, else -1
  uint64_t total_bytes = 0;  // all regular files in the directory
  uint64_t tensor_count = 0;
  int shard_count = 0;
  double seconds = 0;
  VerifyLevel level = VerifyLevel::kStructure;
};

// Checks `dir` (docs/checkpoint_format.md lists what each level checks). A
// checkpoint that fails is a report with ok == false, not an error; the
// Result is an error only when `dir` cannot be listed (kNotFound, kIoError).
// Problems name the file and a byte offset or range.
Result<VerifyReport> VerifyCheckpoint(const std::string& dir, VerifyLevel level);
Result<VerifyReport> VerifyCheckpoint(const std::string& dir, const VerifyOptions& options);

struct CheckpointEntry {
  std::string name;  // "step-00000010" or ".step-00000020.tmp-4242"
  std::string path;  // CKPT_DIR/name
  int64_t step = -1;
  bool temp = false;             // a hidden .step-*.{tmp,old,del}-PID directory
  bool ok = false;               // verified (never true for a temp directory)
  bool weights_ok = false;       // its weights verify (VerifyReport::weights_ok)
  bool has_train_state = false;  // saved with the training state (format 2)
  bool train_state_ok = false;   // ... and it verifies
  // What a resume from it can restore: "full", "weights", or "-" when it does not verify.
  std::string Resume() const;
  // "ok", "in progress (pid 4242)", "abandoned (pid 4242 is gone)" or the headline.
  std::string verdict;
  uint64_t bytes = 0;  // regular files inside
  double mtime = 0;    // the directory's modification time (Unix seconds)
};

// Every step-NNNNNNNN directory in `ckpt_dir`, verified at `level`, and every
// temp directory, judged by its PID; sorted by step, then name. Other entries
// are ignored. kNotFound when `ckpt_dir` does not exist.
Result<std::vector<CheckpointEntry>> ListCheckpoints(const std::string& ckpt_dir,
                                                     VerifyLevel level);

// The newest step directory that verifies at `level` (manifest required);
// each newer one that does not adds "step-00000020: skipped: <headline>" to
// `warnings` (may be null). nullopt when none verifies or `ckpt_dir` does not
// exist (nothing to resume from).
Result<std::optional<CheckpointEntry>> NewestVerified(const std::string& ckpt_dir,
                                                      VerifyLevel level,
                                                      std::vector<std::string>* warnings);

// How much of a run a checkpoint can restore: the weights and the full
// training state (optimizer, scheduler, RNG, data position), or the weights
// alone.
enum class ResumeLevel { kFull, kWeights };

// "full", "weights".
std::string_view ResumeLevelName(ResumeLevel level);
// "full" or "weights"; nullopt for anything else.
std::optional<ResumeLevel> ParseResumeLevel(std::string_view name);

struct Resumable {
  CheckpointEntry entry;
  ResumeLevel level = ResumeLevel::kWeights;
};

// The checkpoint to resume from at `wanted` level, verified at `verify`.
// kFull: the newest whose weights and training state both verify; each newer
// one skipped adds "step-00000020: skipped: <why>" to `warnings` (may be
// null); when none has a verified training state, the newest with verified
// weights at kWeights, with a warning saying why. kWeights: the newest whose
// weights verify (a bad training state does not matter). nullopt when no
// checkpoint's weights verify or `ckpt_dir` does not exist.
Result<std::optional<Resumable>> NewestResumable(const std::string& ckpt_dir, VerifyLevel verify,
                                                 ResumeLevel wanted,
                                                 std::vector<std::string>* warnings);

// Keeps the newest `keep` (>= 1) step directories that verify at kStructure
// level; removes step directories older than the oldest kept one (verified or
// not) and abandoned temp directories. A failing directory newer than the
// newest verified one is left alone (it may be evidence), as is everything
// when none verifies. Each removal renames the directory to a hidden name
// first, so a crash mid-removal never leaves a half-deleted step-NNNNNNNN.
// `removed` (may be null) gets the names removed.
Status PruneCheckpoints(const std::string& ckpt_dir, int keep,
                        std::vector<std::string>* removed = nullptr, Env* env = Env::Default());

}  // namespace ek::ckpt
