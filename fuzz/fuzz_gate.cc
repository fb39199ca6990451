// Gate parts and logs (gate/gate.h: GateReportFromJson), then what `gate
// merge` and the launcher do with them: merge, print, write back (and what is
// written back must read again).
#include "fuzz/fuzz_util.h"
#include "gate/gate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = ek::gate::GateReportFromJson(ek::fuzz::Bytes(data, size), "fuzz/gate-part.json");
  if (!r.ok()) return 0;
  (void)r->overall();
  (void)ek::gate::GateReportToText(*r);
  auto merged = ek::gate::MergeGateReports({*r, *r});
  if (merged.ok()) (void)ek::gate::GateReportToText(*merged);
  auto again = ek::gate::GateReportFromJson(ek::gate::GateReportToJson(*r), "fuzz/gate-part.json (written back)");
  if (!again.ok()) ek::fuzz::Fail("the writer made what its own reader refuses", again.status().message());
  return 0;
}
