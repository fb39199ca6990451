// A build without Apache Arrow C++ (EK_ARROW=OFF, or pyarrow not found): the table
// kinds are refused with how to get past it.
#include <fmt/format.h>

#include "ingest/arrow_source.h"

namespace ek::ingest {

namespace {

Status NoArrowError(const std::string& path, FileKind kind) {
  return UnsupportedError(fmt::format(
      "{}: a {} input, and this evenkeel was built without Apache Arrow (EK_ARROW=OFF or "
      "pyarrow not found): rebuild with pyarrow in the build's Python (pip install pyarrow; "
      "cmake -DEK_ARROW=ON), or convert it to JSON lines (Dataset.to_json(\"data.jsonl\"))",
      path, FileKindName(kind)));
}

}  // namespace

bool ArrowAvailable() { return false; }

Result<std::unique_ptr<RecordSource>> OpenArrowSource(const std::string& path, FileKind kind,
                                                      const OpenOptions&) {
  return NoArrowError(path, kind);
}

Result<uint64_t> CountArrowRows(const std::string& path, FileKind kind, const OpenOptions&) {
  return NoArrowError(path, kind);
}

Result<InputIdentity> IdentifyArrowInput(const std::string& path, FileKind kind,
                                         const OpenOptions&) {
  return NoArrowError(path, kind);
}

}  // namespace ek::ingest
