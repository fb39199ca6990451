// bfd packing's writing side: the records of pass 2 spilled to disk in record order,
// then planned into bins (pack/bfd.h) and written through the ranks' writers.
// Internal to the packer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/file.h"
#include "core/status.h"
#include "pack/packer.h"
#include "pack/rank_writer.h"
#include "packfile/manifest.h"

namespace ek::pack {

// Every record's tokens (and mask bytes) in record order in hidden temporary files
// beside the pack (removed when done; a killed run's are stale temps), each record's
// place, length and owner in memory, so that the bins are written from a mapping
// without holding the tokens. It costs a write and a read of the token stream (4 bytes
// a token, 5 with masks) on the pack's disk.
class Spill {
 public:
  struct Doc {
    uint64_t at;  // the record's first token in the spill
    uint32_t length;
    int32_t owner;  // contiguous/strided: its rank; balanced: -1
  };
  Status Open(Env* env, const std::string& dir, bool masks);
  Status Add(int owner, const int32_t* ids, const uint8_t* mask, size_t n);
  // Flushes and closes the files and maps them.
  Status Map();
  const std::vector<Doc>& docs() const { return docs_; }
  const char* tokens() const { return map_.data().data(); }
  const char* mask() const { return mask_map_.data().data(); }

 private:
  Status Flush();
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
// `writers` holds ranks [lo, hi] (null elsewhere); `stats` every rank's counts.
Status WriteBfdBins(const PackOptions& opt, int64_t eos, bool masks, int lo, int hi, Spill* spill,
                    std::vector<std::unique_ptr<RankWriter>>* writers,
                    std::vector<RankInfo>* stats);

}  // namespace ek::pack
