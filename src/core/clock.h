// Wall-clock helpers shared by components that stamp their outputs.
#pragma once

#include <string>

namespace ek {

// The current UTC time as ISO 8601 with seconds, e.g. "2026-11-29T15:40:00Z".
std::string UtcNowIso8601();

}  // namespace ek
