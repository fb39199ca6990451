// Reads the JSON form of a dump (torch's _dump_nccl_trace_json /
// _dump_fr_trace_json, built with nlohmann::json) into the same Document the
// pickle reader produces. Numbers that are integers become kInt, others kFloat.
#pragma once

#include <string_view>

#include "core/status.h"
#include "flightrec/document.h"

namespace ek::flightrec {

// Thread-safe (each call uses its own parser).
Result<Document> ParseJson(std::string_view data);

}  // namespace ek::flightrec
