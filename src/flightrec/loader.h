// Finds the per-rank dump files of one job in a directory and reads them in
// parallel. A bad file (unreadable, truncated, corrupt, unknown version, from
// a job of another world size) never stops the others: it is reported with
// one error, and its rank is then treated as missing by the analyzer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "flightrec/dump.h"

namespace ek::flightrec {

struct LoadOptions {
  // File-name prefix before the rank number ("nccl_trace_rank_"); empty =
  // infer it the way fr_trace does (the text before the trailing digits).
  std::string prefix;
  int threads = 0;  // 0 = std::thread::hardware_concurrency()
};

struct BadFile {
  std::string path;
  int64_t rank = -1;  // -1 when the name did not give one
  Status status;
};

struct LoadResult {
  std::string prefix;
  std::vector<Dump> dumps;   // good dumps, ascending rank
  std::vector<BadFile> bad;  // ascending rank
  int64_t world_size = 0;    // of the default PG, agreed by most dumps; 0 if unknown
};

// Lists DIR (not recursively: fr_trace walks subfolders too, see docs/fr.md)
// for files named <prefix><rank>. Errors only when no dump file is found or
// the prefix is ambiguous; per-file problems go to LoadResult::bad.
Result<LoadResult> LoadDumps(const std::string& dir, const LoadOptions& options);

// The reader for one file (exposed for tests): maps it and calls ParseDump.
Result<Dump> ReadDumpFile(const std::string& path, int64_t rank);

// fr_trace's prefix rule (re.search(r"([\w\-\_]*?)(\d+)$", name)): returns
// false when the name has no trailing digits.
bool SplitRankName(const std::string& name, std::string* prefix, int64_t* rank);

}  // namespace ek::flightrec
