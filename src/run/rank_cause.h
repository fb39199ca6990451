// Why one rank of a run failed, as the launch records hold it ({"rank": R,
// "cause": "..."} in node records, attempt.json and summary.json: docs/launch.md
// "Records"), and the one reader of such a list: the launcher reads its node
// records and earlier attempts by it (launch/records.h), the report its
// summary's attempt records (report/inputs.cc). Here, below both, so that each
// reads the list the same way; header-only (it is a few lines over JsonFields).
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/json_fields.h"
#include "core/status.h"

namespace ek::run {

// The first error the rank's log names (launch/cause.h), else its exit status or
// signal ("killed by SIGKILL").
struct RankCause {
  int rank = -1;
  std::string cause;
};

// Appends the objects of the array `causes` of `f`, strictly: each needs a rank
// (a non-negative integer) and a cause (a string); an error names the field
// ("summary.json: attempt_records[0].causes[1].cause: missing").
inline Status ReadRankCauses(const JsonFields& f, std::vector<RankCause>* out) {
  return f.Objects("causes", [&](const JsonFields& c) -> Status {
    RankCause rc;
    EK_RETURN_IF_ERROR(c.IntIn("rank", 0, std::numeric_limits<int>::max(), &rc.rank));
    EK_RETURN_IF_ERROR(c.Str("cause", &rc.cause));
    out->push_back(std::move(rc));
    return Status::Ok();
  });
}

}  // namespace ek::run
