// Turns an Analysis into what `evenkeel fr` prints: the one-line verdict,
// the per-rank summary (missing, lagging, last completed collective, stack
// frames at the mismatch) and the fr_trace-style findings, as text for people
// or JSON for scripts. Pure functions of their inputs: no I/O.
#pragma once

#include <string>

#include "flightrec/analyzer.h"
#include "flightrec/loader.h"

namespace ek::flightrec {

// The finding the verdict is about: the first "first mismatch of its PG" in
// matching order, or nullptr when there is none.
const Finding* HeadlineFinding(const Analysis& analysis);

// "desync at pg 0 (default_pg) seq 7701: ranks 0-2,4-15 in reduce_scatter
// [[4,256]]->[[256]]; rank 3 in all_reduce (barrier) [[1]]: different
// collectives at the same slot - conclusive", or "no desync: ...".
std::string VerdictLine(const LoadResult& load, const Analysis& analysis);

// True when the headline finding settles the cause ("- conclusive" in the
// verdict): different collectives, sizes or dtypes at the same slot, ranks
// that never joined. A restart would meet the same desync again.
bool Conclusive(const Analysis& analysis);

std::string RenderText(const std::string& dir, const LoadResult& load, const Analysis& analysis);
std::string RenderJson(const std::string& dir, const LoadResult& load, const Analysis& analysis);

}  // namespace ek::flightrec
