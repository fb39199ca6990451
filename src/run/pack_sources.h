// Whether a pack was made from this run file's data: its sources (names, weights, whole
// passes), the mixture's seed, its shard mode and loss mask, and each weighted source's
// realized share within 0.1 point of its target. The gate's data check reports what this
// finds; a pack made from flags alone (a run file without [[data.source]]) is not compared.
#pragma once

#include <string>
#include <vector>

#include "packfile/manifest.h"
#include "run/run_file.h"

namespace ek::run {

// A source's name: its `name`, else its path's file name (what the pack's manifest and
// `inspect` call it).
std::string SourceName(const DataSource& source);

// Every disagreement, in words; empty when the pack is this run file's.
std::vector<std::string> PackSourceProblems(const RunFile& run, const pack::Manifest& pack);

}  // namespace ek::run
