// Checkpoint manifests (ckpt/manifest.h: CheckpointManifestFromJson); what
// loads is written back and must read again.
#include "ckpt/manifest.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = ek::ckpt::CheckpointManifestFromJson(ek::fuzz::Bytes(data, size),
                                                "step-1/evenkeel-checkpoint.json");
  if (!m.ok()) return 0;
  auto again = ek::ckpt::CheckpointManifestFromJson(
      ek::ckpt::CheckpointManifestToJson(*m), "step-1/evenkeel-checkpoint.json (written back)");
  if (!again.ok())
    ek::fuzz::Fail("the writer made what its own reader refuses", again.status().message());
  return 0;
}
