// The node agent: GPU readings from a telemetry source, the ranks' heartbeats
// with a process check, and the checkpoint dir, gathered into an AgentStatus
// on demand. The HTTP front (agent_server.h) serves it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent_status.h"
#include "telemetry/sample.h"

namespace ek::watch {

// Latest reading per GPU. Thread-safe: Update() runs on the sampler thread,
// Latest() on HTTP threads.
class GpuFeed {
 public:
  virtual ~GpuFeed() = default;
  // Pulls what the source has (at most until `deadline`). A failed source is
  // an error; the feed keeps its last readings, which then age.
  virtual Status Update(double now, double deadline) = 0;
  virtual std::vector<GpuReading> Latest(double now, std::string* state) = 0;
};

// A live source (NVML, nvidia-smi): samples are kept as they arrive. `source`
// and `clock` are owned by / must outlive the feed.
std::unique_ptr<GpuFeed> MakeSourceFeed(std::unique_ptr<telemetry::Source> source, Clock* clock);

// Plays one host's recorded samples in real time from `start` (Clock time),
// starting `from_s` seconds into the recording; after its end the last
// readings are held with their age growing... unless hold is true (then they
// stay fresh: a state that persists, like a deadlock). Samples of other hosts
// in the recording are ignored; an empty `host` takes the first host.
Result<std::unique_ptr<GpuFeed>> MakeReplayFeed(const std::vector<std::string>& files,
                                                const std::string& host, double start,
                                                double from_s, bool hold);

struct AgentOptions {
  std::string run;
  std::string host;
  std::string heartbeat_dir;
  std::string checkpoint_dir;
  int rank_base = -1;  // global rank of GPU 0 (host's index in cluster.hosts x gpus_per_node)
  // The launcher's running goodput account (heartbeat/goodput_account.h), exported as
  // evenkeel_goodput_*; "": none (an agent not started by `evenkeel launch --agent`).
  std::string goodput_path;
};

class Agent {
 public:
  // `feed` may be null (no GPU telemetry: telemetry says why). `clock` must
  // outlive the agent.
  Agent(AgentOptions options, std::unique_ptr<GpuFeed> feed, std::string no_feed_reason,
        Clock* clock);
  // The sampler's work, once per poll interval.
  void Sample();
  // A fresh look at the node. Thread-safe.
  AgentStatus Snapshot();
  const AgentOptions& options() const { return options_; }

 private:
  AgentOptions options_;
  std::unique_ptr<GpuFeed> feed_;
  std::string no_feed_reason_;
  Clock* clock_;
  std::mutex mu_;
  std::string feed_error_;
};

}  // namespace ek::watch
