// The safe pickle reader (flightrec/pickle_reader.h) on its own, then, as the
// loader does, the dump model and the cross-rank analysis (fr_common.h).
#include "flightrec/pickle_reader.h"
#include "fuzz/fr_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = ek::fuzz::Bytes(data, size);
  (void)ek::flightrec::ParsePickle(in);
  ek::fuzz::FuzzDumps(in);
  return 0;
}
