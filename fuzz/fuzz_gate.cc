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
  // Alone (every node not its own is missing), twice (two parts claim a node:
  // an error) and beside a part of the next node.
  auto merged = ek::gate::MergeGateReports({*r});
  if (merged.ok()) (void)ek::gate::GateReportToText(*merged);
  if (ek::gate::MergeGateReports({*r, *r}).ok() && r->node_rank >= 0) {
    ek::fuzz::Fail("two parts of one node merged", std::to_string(r->node_rank));
  }
  ek::gate::GateReport next = *r;
  next.node_rank = r->node_rank + 1;
  auto pair = ek::gate::MergeGateReports({*r, next});
  if (pair.ok()) (void)ek::gate::GateReportToText(*pair);
  auto again = ek::gate::GateReportFromJson(ek::gate::GateReportToJson(*r),
                                            "fuzz/gate-part.json (written back)");
  if (!again.ok())
    ek::fuzz::Fail("the writer made what its own reader refuses", again.status().message());
  return 0;
}
