// Records to token ids for the packer: the chat template chosen (the model's own, a
// .jinja file or a fixed layout), then batches of records rendered and tokenized in
// parallel, each record's ids closed with EOS and, with loss masks, its mask bytes.
// Internal to the packer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "ingest/source.h"
#include "pack/packer.h"
#include "pack/record.h"
#include "packfile/manifest.h"
#include "tokenize/tokenizer.h"

namespace ek::pack {

// One record of a batch.
struct RecRef {
  ingest::SourceRecord rec;
  uint64_t index;  // global record index (every record read, skipped ones included)
  int owner;       // rank (contiguous/strided), -1 for balanced
  bool needed;     // false: not encoded (skipped before, or another node's)
};

// One task's records: consecutive records of the batch.
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

  // Empties it for the next batch, every field as a new TaskOut's, but the id, mask and
  // offset vectors keep their memory: a batch's ids then grow from a full vector, not from
  // empty through a dozen reallocations and copies (~7% of a one-core pack's encode time).
  void Reset();
};

// The loss mask of one record's tokens: 1 for a token whose bytes
// [ends[k-1], ends[k]) overlap one of `spans` (sorted, disjoint), else 0; as
// transformers marks assistant tokens (from the token holding a span's first
// character to the token holding its last).
void MaskFromSpans(const std::vector<uint32_t>& ends,
                   const std::vector<std::pair<size_t, size_t>>& spans, std::vector<uint8_t>* mask);

class RecordEncoder {
 public:
  // Loads the chat template `opt.chat` names and records it in the manifest `m`
  // (chat_template, its path and hash); one renderer per worker and source (a source
  // may have its own shape and text field).
  static Result<std::unique_ptr<RecordEncoder>> Create(const PackOptions& opt,
                                                       const std::vector<PackSource>& sources,
                                                       const tokenize::Tokenizer* tok,
                                                       int32_t eos_id, bool masks, Manifest* m);

  // Renders and tokenizes `refs` (records of source `source`) in parallel: tasks of
  // consecutive records, in order, into `outs`; returns the number of tasks (task t
  // holds refs [size * t / tasks, size * (t + 1) / tasks)). `screen` (pass 1's
  // screening for --skip-bad) renders only: the tokenizer refuses nothing a renderer
  // makes (valid UTF-8) but text over 4 GiB with offsets, checked here alike.
  size_t Run(const std::vector<RecRef>& refs, size_t source, bool screen,
             std::vector<TaskOut>* outs);
  // The pool's workers (Run is not re-entrant: one batch at a time).
  size_t workers() const { return pool_.size(); }

 private:
  struct WorkerScratch {
    RenderedRecord record;
    std::vector<uint32_t> ends;
    std::string nfc;
  };
  RecordEncoder(const tokenize::Tokenizer* tok, int32_t eos_id, bool masks, size_t threads)
      : tok_(tok), eos_id_(eos_id), masks_(masks), pool_(threads) {}
  void Process(const RecRef& ref, size_t i, size_t source, size_t worker, TaskOut& out,
               bool screen);

  const tokenize::Tokenizer* tok_;
  const int32_t eos_id_;
  const bool masks_;
  ThreadPool pool_;
  std::vector<RecordOptions> source_rec_;  // the renderers hold references into it
  std::vector<std::vector<std::unique_ptr<RecordRenderer>>> renderers_;  // [source][worker]
  std::vector<WorkerScratch> scratch_;                                   // [worker]
};

}  // namespace ek::pack
