// Where records come from: the files and directories a corpus is kept in, each read
// as a stream of records, one JSON object per record, whatever the file's own format.
// The packer renders and tokenizes those JSON texts (src/pack) and never sees a file
// format; a table row (Parquet, Arrow, a Hugging Face `datasets` directory) reaches it
// as the JSON object of its columns.
//
//   JSON lines   .jsonl, .jsonl.zst, .jsonl.gz, stdin ("-"); blank lines are not records
//   JSON         .json: JSON lines, or one top-level array of objects
//   Parquet      .parquet (snappy, zstd, gzip, uncompressed)
//   Arrow        .arrow IPC files and streams (what `datasets` writes)
//   datasets     a directory written by `save_to_disk` (Dataset), or a DatasetDict's
//                directory with a split chosen by name
//
// A byte-order mark at the start of a text file is skipped. Anything else is refused
// with the list above and how to convert (Dataset.to_json, Dataset.to_parquet).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ek::ingest {

enum class FileKind {
  kJsonLines,  // .jsonl, .jsonl.zst, .jsonl.gz, "-"
  kJson,       // .json: JSON lines or one array of objects
  kParquet,
  kArrow,        // an Arrow IPC file or stream
  kDatasetsDir,  // save_to_disk output (Dataset or DatasetDict)
};
std::string_view FileKindName(FileKind kind);  // "jsonl", "json", "parquet", "arrow", "datasets"

// The kind of `path`, by its name and its first bytes (a directory by its
// dataset_info.json / state.json / dataset_dict.json). An unknown kind is an
// InvalidArgument error that names the accepted kinds and how to convert.
Result<FileKind> DetectKind(const std::string& path);

// What a record's number counts.
enum class Unit { kLine, kElement, kRow };

// One record: its JSON text (an object) and where it came from. `json` stays
// valid until the source's next Next(). `number` is 1-based within `file`: the
// line (JSON lines), the array element (a .json array) or the row (tables).
struct SourceRecord {
  std::string_view json;
  uint64_t number = 0;
  const std::string* file = nullptr;  // a datasets directory spans several files
  Unit unit = Unit::kLine;
};

// "a.jsonl:12", "a.json: element 12", "train.parquet: row 12": how errors name a record.
std::string Where(const SourceRecord& r);

struct OpenOptions {
  std::string split;  // a DatasetDict directory: the split to read ("" = the only one, else error)
  size_t batch_bytes = 8u << 20;  // about this much JSON text per Next()
  // A plain JSON lines file: hash its bytes as they are read, for RecordSource::Identity
  // (ReadsItsIdentity says which inputs can).
  bool identify = false;
};

struct InputIdentity;

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Replaces *out with the next batch of records, in file order; false at the end.
  virtual Result<bool> Next(std::vector<SourceRecord>* out) = 0;
  virtual FileKind kind() const = 0;
  // Progress: input bytes consumed so far and in total (0 when unknown, e.g. stdin).
  virtual uint64_t consumed_bytes() const = 0;
  virtual uint64_t total_bytes() const = 0;
  // Once Next has returned false, for a source opened with OpenOptions::identify that can:
  // the input's identity from the one read that handed out its records (what
  // IdentifyInput would say of the same bytes). False otherwise.
  virtual bool Identity(InputIdentity* /*id*/) const { return false; }
};

// Opens `path` as its kind.
Result<std::unique_ptr<RecordSource>> Open(const std::string& path,
                                           const OpenOptions& options = {});

// The identity of an input for the manifest: total size in bytes and the xxh3-64 of
// its bytes (a directory: of its data files' bytes in the order they are read).
struct InputIdentity {
  uint64_t size = 0;
  uint64_t xxh3 = 0;
  // The records Open would hand out, where the read that hashed the bytes also told
  // them (plain JSON lines: the non-blank lines); else -1.
  int64_t records = -1;
};
Result<InputIdentity> IdentifyInput(const std::string& path, const OpenOptions& options = {});

// Whether Open(path) with OpenOptions::identify gives the input's identity from its one
// read (RecordSource::Identity): a regular file of plain, uncompressed JSON lines. Errors
// as Open's for a path that is missing or of no known kind.
Result<bool> ReadsItsIdentity(const std::string& path);

}  // namespace ek::ingest
