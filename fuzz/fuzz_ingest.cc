// The record sources (ingest/source.h) as `evenkeel pack` reads its inputs: the input's
// first byte picks the file's name (.jsonl, .json, .jsonl.gz, .jsonl.zst, .parquet, no
// extension), the rest is the file; DetectKind, then every record through Open in small
// batches (7 bytes: elements and lines straddle reads and batches). A record must be
// non-empty text inside the file's decoded bytes, numbered in increasing order; a .json
// array's element must be one object ('{' ... '}').
#include <unistd.h>

#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "ingest/source.h"

using namespace ek;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* kNames[] = {"in.jsonl",     "in.json",    "in.jsonl.gz",
                                 "in.jsonl.zst", "in.parquet", "input"};
  std::string path = fuzz::ScratchDir() + "/" + kNames[data[0] % 6];
  fuzz::WriteWhole(path, fuzz::Bytes(data + 1, size - 1));
  (void)ingest::DetectKind(path);
  ingest::OpenOptions options;
  options.batch_bytes = 7;
  auto source = ingest::Open(path, options);
  if (source.ok()) {
    std::vector<ingest::SourceRecord> batch;
    uint64_t last = 0;
    for (int batches = 0; batches < 1000000; ++batches) {
      auto more = (*source)->Next(&batch);
      if (!more.ok() || !*more) break;
      if (batch.empty()) __builtin_trap();  // true means records
      for (const auto& r : batch) {
        if (r.json.empty() || r.number <= last || r.file == nullptr) __builtin_trap();
        last = r.number;
        if (r.unit == ingest::Unit::kElement && (r.json.front() != '{' || r.json.back() != '}'))
          __builtin_trap();
        (void)ingest::Where(r);
      }
    }
  }
  ::unlink(path.c_str());
  return 0;
}
