// A build without Apache Arrow: the table kinds are refused with how to read them anyway.
#include <fmt/format.h>

#include "ingest/arrow_source.h"

namespace ek::ingest {

namespace {

Status NoArrow(const std::string& path, FileKind kind) {
  return UnsupportedError(fmt::format(
      "{}: this build of evenkeel reads no Parquet, Arrow or datasets directories (it was "
      "built without Apache Arrow; the {} input needs it); convert it to JSON lines with "
      "Hugging Face datasets (Dataset.from_parquet / load_from_disk, then "
      "Dataset.to_json(\"x.jsonl\")), or rebuild with pyarrow installed in .venv "
      "(scripts/setup.sh) so that Arrow C++ is found",
      path, FileKindName(kind)));
}

}  // namespace

bool ArrowAvailable() { return false; }

Result<std::unique_ptr<RecordSource>> OpenArrowSource(const std::string& path, FileKind kind,
                                                      const OpenOptions&) {
  return NoArrow(path, kind);
}

Result<InputIdentity> IdentifyArrowInput(const std::string& path, FileKind kind,
                                         const OpenOptions&) {
  return NoArrow(path, kind);
}

}  // namespace ek::ingest
