// One rank's flight-recorder dump, read from the pickle or JSON form into a
// compact model. Field meanings: docs/fr.md and the research notes
// (docs/fr.md); names follow torch's keys.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "flightrec/document.h"

namespace ek::flightrec {

// Index into Dump::symbols (a per-dump string table: profiling names, states,
// PG names and the Python repr of size and dtype lists repeat on every entry).
using Sym = uint32_t;

// What an entry's first size list looks like; fr_trace reads `sizes[0]`.
enum class FirstShape : uint8_t {
  kAbsent,    // the size list is empty (fr_trace would raise IndexError)
  kEmpty,     // sizes[0] == []
  kNonEmpty,  // sizes[0] has dimensions
};

struct Entry {
  int64_t record_id = 0;
  int64_t pg_id = -1;
  int64_t collective_seq_id = 0;
  int64_t p2p_seq_id = 0;
  int64_t op_id = -1;
  int64_t time_created_ns = 0;
  int64_t time_discovered_started_ns = 0;    // 0 = unknown (None in the pickle)
  int64_t time_discovered_completed_ns = 0;  // 0 = unknown
  int64_t timeout_ms = 0;
  double duration_ms = NAN;  // NaN = absent
  int64_t input_numel0 = 1;  // prod(input_sizes[0]) (1 if absent/empty)
  int64_t output_numel0 = 1;
  int64_t input_numel = 0;  // sum over tensors of prod(sizes)
  int64_t output_numel = 0;
  int32_t input_tensors = 0;  // len(input_sizes)
  int32_t output_tensors = 0;
  Sym pg_name = 0;
  Sym pg_desc = 0;
  Sym profiling_name = 0;
  Sym state = 0;
  Sym input_sizes = 0;  // Python repr, e.g. "[[4, 256]]"
  Sym output_sizes = 0;
  Sym input_dtypes = 0;  // Python repr, e.g. "['Float']"
  Sym output_dtypes = 0;
  Sym input_dtype_set = 0;  // sorted, deduplicated, for fr_trace's set() comparison
  Sym output_dtype_set = 0;
  int32_t stack = -1;      // index into Dump::stacks, -1 = no frames
  uint32_t signature = 0;  // index into Dump::signatures: entries with equal content match alike
  FirstShape input0 = FirstShape::kAbsent;
  FirstShape output0 = FirstShape::kAbsent;
  bool is_p2p = false;
  bool retired = false;
};

struct Frame {
  std::string name;
  std::string filename;
  int64_t line = 0;
};

struct PgConfig {
  std::string name;
  std::string desc;
  std::vector<int64_t> ranks;  // global ranks, as listed
};

struct PgStatus {
  std::string pg_id;  // the key: the PG uid, as entries' pg_id
  int64_t last_enqueued = -1;
  int64_t last_started = -1;
  int64_t last_completed = -1;
};

enum class DumpFormat : uint8_t { kPickle, kJson };

struct Dump {
  int64_t rank = -1;
  std::string path;
  DumpFormat format = DumpFormat::kPickle;
  std::string version;  // "2.10"
  int major = 0;
  int minor = 0;
  std::string comm_lib_version;  // comm_lib_version or nccl_version
  std::vector<PgConfig> pg_configs;
  std::vector<PgStatus> pg_status;
  std::vector<Entry> entries;  // oldest first
  std::vector<std::string> symbols;
  // What the matcher compares, per distinct entry content: profiling_name,
  // input_sizes, output_sizes, input_dtype_set, output_dtype_set, state, pg_desc.
  std::vector<std::array<Sym, 7>> signatures;
  std::vector<Frame> frames;                  // deduplicated frames
  std::vector<std::vector<uint32_t>> stacks;  // per entry with frames: indices into frames

  const std::string& sym(Sym s) const { return symbols[s]; }
  const PgConfig* FindPg(std::string_view name) const;
  // Ranks of the default PG (desc "default_pg", else name "0", else the
  // largest rank list); empty if pg_config is empty.
  std::vector<int64_t> WorldRanks() const;
};

// Newest format this reader knows; newer minors are refused as unknown.
constexpr int kNewestMinor = 10;

// Parses one dump (pickle if it starts with the PROTO opcode, JSON if with
// '{'). Errors read "<path>: ..." with a byte offset for pickle errors.
Result<Dump> ParseDump(std::string_view bytes, std::string path, int64_t rank);

// Builds the model from a parsed Document (exposed for tests).
Result<Dump> DumpFromDocument(const Document& doc, DumpFormat format, std::string path,
                              int64_t rank);

}  // namespace ek::flightrec
