// The tables among the inputs (Parquet, Arrow IPC, `datasets` directories), read with
// Apache Arrow C++ (the libraries and headers of PyPI's pyarrow wheel; see
// CMakeLists.txt). A build without Arrow keeps the same functions, which refuse these
// kinds with how to get a build that reads them (arrow_source_none.cc).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "ingest/source.h"

namespace ek::ingest {

// True when this build reads Parquet and Arrow.
bool ArrowAvailable();

// `kind` is kParquet, kArrow or kDatasetsDir (DetectKind's answer for `path`).
// Each row becomes the JSON object of its columns: strings, numbers, booleans and
// nulls as themselves, lists as arrays, structs as objects; a column type with no
// JSON form (binary, ...) is an error naming the file and the column.
Result<std::unique_ptr<RecordSource>> OpenArrowSource(const std::string& path, FileKind kind,
                                                      const OpenOptions& options);
// The number of rows (records) of the input, from the files' metadata where they have
// it (Parquet's footer, an Arrow file's batches), else by reading the batches (an Arrow
// stream) but never converting a row: what a packer's counting pass needs, at a small
// part of OpenArrowSource's cost. Refuses what OpenArrowSource refuses.
Result<uint64_t> CountArrowRows(const std::string& path, FileKind kind, const OpenOptions& options);
Result<InputIdentity> IdentifyArrowInput(const std::string& path, FileKind kind,
                                         const OpenOptions& options);

}  // namespace ek::ingest
