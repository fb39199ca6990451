// The text inputs of source.h: JSON lines (plain, zstd, gzip, stdin) and a .json file's
// one top-level array of objects. Private to src/ingest: source.cc's Open chooses them.
#pragma once

#include <memory>
#include <string>

#include "core/jsonl.h"
#include "core/status.h"
#include "ingest/source.h"

namespace ek::ingest {

enum class Codec { kPlain, kZstd, kGzip };

// Whole-line chunks of a gzip file (one member or several, as `cat a.gz b.gz` makes),
// inflated with zlib as it is read. A file that ends inside a member is an error naming
// the file (never a silent short read).
Result<std::unique_ptr<LineChunkReader>> OpenGzipLines(const std::string& path, size_t chunk_bytes);

// JSON lines: one record per non-blank line, numbered by the file's line numbers; a
// UTF-8 byte-order mark before the first line is skipped. `kind` is what kind() says.
Result<std::unique_ptr<RecordSource>> OpenJsonLines(const std::string& path, Codec codec,
                                                    FileKind kind, const OpenOptions& options);

// A plain (uncompressed) JSON-lines file's identity and record count (the lines
// OpenJsonLines hands out) from one read of its bytes.
Result<InputIdentity> IdentifyPlainJsonLines(const std::string& path);

// One top-level JSON array of objects, streamed: each element is found by a scan that
// tracks strings and nesting (the renderer parses it), so memory holds one batch, not
// the file's parse tree. Elements are numbered 1.. (Unit::kElement); a malformed array
// (no '[', a missing ',' or ']', an element that is not an object, text after the ']',
// a file that ends inside it) is an error naming the file and byte offset.
Result<std::unique_ptr<RecordSource>> OpenJsonArray(const std::string& path,
                                                    const OpenOptions& options);

}  // namespace ek::ingest
