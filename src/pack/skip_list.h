// Records a pack skips (--skip-bad): why each was refused, how a user gets past such
// an error, and skipped.jsonl, the list written beside the blocks. Internal to the
// packer.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/file.h"
#include "core/status.h"
#include "ingest/source.h"
#include "pack/record.h"
#include "packfile/manifest.h"

namespace ek::pack {

// The reason classes of skipped records (manifest `skipped_reasons`, skipped.jsonl's
// `reason`; docs/pack_format.md), from the renderer's and tokenizer's errors.
std::string_view SkipReason(const Status& st, bool from_tokenizer);

// How to get past a record's error, appended when --skip-bad is off.
std::string SkipHint(std::string_view reason, InvalidUtf8Policy policy);

// skipped.jsonl: one line per skipped record, written beside the blocks under a
// temporary name and renamed with them; created at the first skip. Counts each skip
// in the manifest `m` (its totals, the input's, the reasons, the first examples).
class SkipList {
 public:
  SkipList(Env* env, std::string dir, Manifest* m) : env_(env), dir_(std::move(dir)), m_(m) {}
  Status Add(const ingest::SourceRecord& r, size_t input_no, const Status& st,
             std::string_view reason);
  // Flushes and fsyncs (before any rank is renamed into place).
  Status Sync();
  // Renames the list into place, or removes a previous pack's when nothing was skipped.
  Status Commit();

 private:
  Status Flush();
  Env* env_;
  std::string dir_;
  Manifest* m_;
  std::unique_ptr<AtomicFile> file_;
  std::string buf_;
};

}  // namespace ek::pack
