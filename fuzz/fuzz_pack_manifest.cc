// A pack's manifest.json (pack/manifest.h: ManifestFromJson); what loads is
// written back and must read again.
#include "fuzz/fuzz_util.h"
#include "packfile/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = ek::pack::ManifestFromJson(ek::fuzz::Bytes(data, size), "fuzz/manifest.json");
  if (!m.ok()) return 0;
  (void)m->total_blocks();
  (void)m->min_blocks();
  (void)m->max_blocks();
  (void)ek::pack::MergeManifests({*m, *m}, {"a/manifest.json", "b/manifest.json"});
  std::string again = ek::pack::ManifestToJson(*m);
  auto m2 = ek::pack::ManifestFromJson(again, "fuzz/manifest.json (written back)");
  if (!m2.ok())
    ek::fuzz::Fail("the writer made what its own reader refuses", m2.status().message());
  return 0;
}
