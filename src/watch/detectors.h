// The watcher's detectors: from one round of agent polls to the conditions
// that hold now. Completion, crash, hang, deadlock, throughput floor /
// starvation and blind, each with its evidence (docs/watch.md). Pure logic on
// the watcher's clock; the watcher's incident store (watcher.h) turns conditions into
// alerts. Not thread-safe.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_status.h"
#include "core/json_fields.h"
#include "topology/topology.h"
#include "triage/classifier.h"
#include "triage/profile.h"

namespace ek::watch {

struct WatchSettings {
  std::string run = "run";
  int gpus_per_node = 1;
  std::vector<std::string> hosts;  // rank order; empty: the agents' hosts in --agents order
  double poll_s = 1;
  double hang_floor_s = 120;
  double hang_factor = 10;
  double checkpoint_allowance_s = 600;
  double throughput_floor_tok_s = 0;  // the whole run's tokens/s; 0: off
  int throughput_samples = 5;
  double stale_after_s = 10;
  int64_t final_step = 0;  // 0: the heartbeats' total_steps
  double desync_s =
      10;  // a rank in the save barrier this long while others are elsewhere: deadlock
};

// One agent's answer (or silence) in one round.
struct AgentPoll {
  std::string target;   // "HOST:PORT" as given to --agents
  double received = 0;  // watcher clock
  bool ok = false;
  std::string error;  // why not ok
  AgentStatus status;
};

enum class Kind { kCompletion, kCrash, kHang, kDeadlock, kThroughput, kBlind };
std::string_view KindName(Kind k);  // "completion", "crash", ...

struct Finding {
  Kind kind = Kind::kHang;
  std::string key;       // incident identity: "hang", "blind:node-b"
  std::string severity;  // "critical", "warning", "info"
  std::string summary;   // one line for people
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  double since = 0;      // when the condition began (watcher clock)
  std::string evidence;  // the numbers
  double gpu_hours = 0;  // GPUs x time since last progress
};

class Detectors {
 public:
  Detectors(WatchSettings settings, triage::Profile profile);
  std::vector<Finding> Evaluate(double now, const std::vector<AgentPoll>& polls);

  // What must survive a restart (latches, counters, last contact), as JSON.
  // Loading is strict: every field SaveJson writes must be there with its
  // type, or the error names `where` and the field.
  std::string SaveJson() const;
  Status LoadJson(std::string_view json, std::string_view where = "detector state");
  Status LoadFields(const JsonFields& f);

  const WatchSettings& settings() const { return settings_; }
  // The triage assessment of the GPU readings in the last Evaluate.
  const triage::Assessment& last_assessment() const { return last_assessment_; }

 private:
  struct RankSeen {
    RankReading r;
    std::string host;
    double received = 0;
    double checkpoint_seen_at = 0;  // last round this rank reported the "checkpoint" phase
  };
  struct HostSeen {
    double first_poll = 0;  // first round this watcher asked (for never-reached agents)
    double last_ok = 0;
    double no_telemetry_since = 0;  // 0 while the agent has GPU readings
    std::string last_error;
  };
  int HostIndex(const std::string& host, const std::string& target);
  void FeedTriage(double now, const AgentPoll& p);
  void Blind(double now, const std::vector<AgentPoll>& polls, std::vector<Finding>* out);
  void Missing(double now, std::vector<Finding>* out);
  bool Completion(double now, std::vector<Finding>* out);
  bool Crash(double now, std::vector<Finding>* out);
  void Hang(double now, bool in_checkpoint, std::vector<Finding>* out);
  bool Desync(double now, std::vector<Finding>* out);
  void Throughput(double now, const triage::Assessment& a, std::vector<Finding>* out);
  std::vector<std::string> HostsOf(const std::vector<int>& ranks) const;
  int world() const;

  WatchSettings settings_;
  triage::Profile profile_;
  std::unique_ptr<triage::Classifier> classifier_;
  std::vector<std::string> host_order_;
  run::Topology topology_;  // host_order_ x gpus_per_node, once the order is known
  std::map<int, RankSeen> ranks_;
  std::map<std::string, HostSeen> hosts_;  // by target
  std::optional<CheckpointInfo> newest_complete_;
  double first_rank_seen_ = 0;  // when the first heartbeat of the run was seen
  bool completed_ = false;
  double completed_at_ = 0;
  std::string completion_evidence_;
  int low_rounds_ = 0;
  double low_since_ = 0;
  int starved_rounds_ = 0;
  double starved_since_ = 0;
  triage::Assessment last_assessment_;
};

}  // namespace ek::watch
