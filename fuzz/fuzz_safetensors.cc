// safetensors headers (ckpt/safetensors.h: ParseSafetensorsHeader): the input
// is the file's first bytes; the file is taken to be exactly that long, and
// then 1 GiB longer (a header read by pread of 8 + N bytes of a large file).
#include "ckpt/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view prefix = ek::fuzz::Bytes(data, size);
  (void)ek::ckpt::ParseSafetensorsHeader(prefix, size, "fuzz.safetensors");
  (void)ek::ckpt::ParseSafetensorsHeader(prefix, size + (uint64_t{1} << 30), "fuzz.safetensors");
  return 0;
}
