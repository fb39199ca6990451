// A guard in front of toml++ for the one TOML parser of the project (run/run_file.cc).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace ek::run {

// toml++ 3.3 (Debian 12's libtomlplusplus-dev) reaches TOML_UNREACHABLE, that
// is undefined behaviour, when it tests some non-ASCII code points for
// whitespace (U+00A1..U+0499 among them: "é"): upstream issues #190 and #295,
// fixed after 3.3. It tests them outside strings and comments, where TOML
// allows no non-ASCII character anyway, and as the first character after a
// line-ending backslash in a """ string. Both are refused here, before
// toml++ sees them (found by fuzz/fuzz_run_file), and so is one right after
// a backslash (an escape toml++ tests for whitespace). A quote starts a string
// only where TOML allows one (a line's start, after = [ { , or .); any other
// quote is junk that toml++ scans as part of a bad value, so what follows it
// counts as outside a string. Only the = of a key-value pair opens a value,
// and a dot only inside a key: in `a = 11 = 'x'` and `a = 1.'x'` toml++ scans
// the quote as junk of a bad value.
// Returns an error naming `name` and the line of the first such character.
Status CheckTomlppHazards(std::string_view t, const std::string& name);

}  // namespace ek::run
