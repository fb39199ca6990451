// Flight-recorder JSON dumps (flightrec/json_reader.h) on their own, then
// ParseDump and Analyze over up to four ranks (fr_common.h).
#include "flightrec/json_reader.h"
#include "fuzz/fr_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = ek::fuzz::Bytes(data, size);
  (void)ek::flightrec::ParseJson(in);
  ek::fuzz::FuzzDumps(in);
  return 0;
}
