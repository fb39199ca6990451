#include "ingest/source.h"

#include <fmt/format.h>

namespace ek::ingest {

std::string_view FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kJsonLines:
      return "jsonl";
    case FileKind::kJson:
      return "json";
    case FileKind::kParquet:
      return "parquet";
    case FileKind::kArrow:
      return "arrow";
    case FileKind::kDatasetsDir:
      return "datasets";
  }
  return "?";
}

std::string Where(const SourceRecord& r) {
  const std::string_view file = r.file ? std::string_view(*r.file) : std::string_view("-");
  switch (r.unit) {
    case Unit::kLine:
      return fmt::format("{}:{}", file, r.number);
    case Unit::kElement:
      return fmt::format("{}: element {}", file, r.number);
    case Unit::kRow:
      break;
  }
  return fmt::format("{}: row {}", file, r.number);
}

}  // namespace ek::ingest
