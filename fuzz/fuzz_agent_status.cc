// The agent's /status JSON as the watcher reads it (watch/agent_status.h:
// ParseAgentStatus), then one round of the watcher's detectors over it, and
// the agent's own renderings (JSON, Prometheus metrics) of what was read.
#include "agent/agent_status.h"
#include "fuzz/fuzz_util.h"
#include "triage/profile.h"
#include "watch/detectors.h"

using namespace ek;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto st = watch::ParseAgentStatus(fuzz::Bytes(data, size), "http://node-a:9464/status");
  if (!st.ok()) return 0;
  (void)watch::AgentStatusToJson(*st);
  (void)watch::AgentStatusToMetrics(*st);
  watch::WatchSettings settings;
  settings.gpus_per_node = 2;
  watch::Detectors detectors(settings, triage::B300Profile());
  watch::AgentPoll poll;
  poll.target = "node-a:9464";
  poll.ok = true;
  poll.status = std::move(*st);
  for (double now : {1000.0, 1001.0, 5000.0}) {
    poll.received = now;
    (void)detectors.Evaluate(now, {poll});
  }
  (void)detectors.SaveJson();
  return 0;
}
