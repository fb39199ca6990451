// Rank heartbeat files (heartbeat/heartbeat.h: ParseHeartbeat), what the agent
// derives from one, and the written-back form, which must read again.
#include "fuzz/fuzz_util.h"
#include "heartbeat/heartbeat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto hb = ek::heartbeat::ParseHeartbeat(ek::fuzz::Bytes(data, size), "fuzz/rank-0.json");
  if (!hb.ok()) return 0;
  (void)ek::heartbeat::KindOfPhase(hb->phase);
  (void)ek::heartbeat::PositionOf(*hb);
  auto again = ek::heartbeat::ParseHeartbeat(ek::heartbeat::HeartbeatToJson(*hb),
                                             "fuzz/rank-0.json (written back)");
  if (!again.ok())
    ek::fuzz::Fail("the writer made what its own reader refuses", again.status().message());
  return 0;
}
