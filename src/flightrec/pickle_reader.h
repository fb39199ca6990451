// A pickle reader that never executes anything: it accepts only the data
// opcodes that torch's C++ pickler (torch/csrc/jit/serialization/pickler.cpp,
// protocol 2, generic containers) writes for a flight-recorder dump, plus the
// few pure-data opcodes CPython adds when such a dump is re-pickled
// (SETITEM, APPEND, SHORT_BINUNICODE, BINUNICODE8, FRAME, MEMOIZE). Anything
// that could name or call code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
// NEWOBJ, PERSID, EXT*, ...) is an error naming the byte offset.
#pragma once

#include <string_view>

#include "core/status.h"
#include "flightrec/document.h"

namespace ek::flightrec {

// Parses `data` (a whole pickle) into a Document. Errors are kCorrupt and read
// "byte N: ..." (the caller prefixes the file name). Thread-safe.
Result<Document> ParsePickle(std::string_view data);

// The same into `*doc` (cleared first, its buffers reused: the loader keeps
// one per thread).
Status ParsePickleInto(std::string_view data, Document* doc);

}  // namespace ek::flightrec
