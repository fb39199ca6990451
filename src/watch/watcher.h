// The watcher: polls every agent each round (in parallel, each bounded by its
// timeout, so a dead agent never stalls the rest), runs the detectors, keeps
// one incident per condition, and delivers each incident's notices to every
// sink through an outbox that retries with backoff.
//
// State (detector latches and counters, open incidents, the outbox) lives in
// one file, STATE_DIR/state.json, rewritten atomically after every round.
// Incidents and the notices they owe are committed together: a watcher
// killed between the two can neither lose a notice (an incident without its
// notice) nor repeat one (a notice for an incident it then opens again).
// A notice delivered just before a kill, whose removal was not yet saved, is
// sent once more on restart: Alertmanager deduplicates it by its labels, and
// webhook and command receivers get the same incident id (at-least-once).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/json_out.h"
#include "core/thread_pool.h"
#include "telemetry/sample.h"
#include "triage/profile.h"
#include "watch/detectors.h"
#include "watch/sinks.h"

namespace ek::watch {

// Agent polls in flight at once: a round over 128 agents, 4 of them dead, takes
// at most ~4 timeouts instead of 128 threads.
inline constexpr size_t kPollThreads = 32;

struct WatcherOptions {
  WatchSettings settings;
  triage::Profile profile;
  std::vector<std::string> agents;  // "HOST:PORT" or URLs
  std::string token;                // bearer token for the agents
  double agent_timeout_s = 2;
  std::string state_dir;
  double backoff_s = 1;
  double backoff_max_s = 60;
  double resend_s = 60;
  int clear_rounds = 2;       // rounds a condition must be absent before its incident resolves
  Env* env = Env::Default();  // STATE_DIR and state.json are written through it
};

// One notice owed to one sink: queued when an incident opens or resolves.
struct Delivery {
  uint64_t seq = 0;
  std::string sink;
  std::string incident;
  std::string status;  // "firing" or "resolved"
  std::string body;    // rendered by the sink when queued
  int attempts = 0;
  double queued = 0;
  double next_attempt = 0;
  std::string last_error;
};

// Receives one JSON object per event, without a newline.
using LogFn = std::function<void(const std::string&)>;

// Sees every round after the detectors ran: the polls, the triage assessment
// of the GPU readings, and the incidents open now (the live page).
using RoundObserver = std::function<void(double now, const std::vector<AgentPoll>& polls,
                                         const triage::Assessment& assessment,
                                         const std::map<std::string, Incident>& open)>;

class Watcher {
 public:
  // Loads STATE_DIR/state.json when present. `http` and `clock` must outlive
  // the watcher.
  static Result<std::unique_ptr<Watcher>> Create(WatcherOptions options,
                                                 std::vector<std::unique_ptr<Sink>> sinks,
                                                 HttpClient* http, Clock* clock, LogFn log);
  // One round: poll, detect, update incidents, deliver what is due, save. A
  // failed save is an error naming STATE_DIR/state.json; the file then holds
  // the previous round's state, whole.
  Status Round();
  // Rounds every poll_s until *stop; a failed save ends it.
  Status Run(const std::atomic<bool>* stop);

  const std::map<std::string, Incident>& open_incidents() const { return open_; }
  void set_observer(RoundObserver observer) { observer_ = std::move(observer); }
  const std::vector<Delivery>& outbox() const { return outbox_; }

 private:
  Watcher() = default;
  std::vector<AgentPoll> PollAgents();
  void Update(double now, std::vector<Finding> findings);
  void Enqueue(const Incident& incident, bool resolved, double now, Sink* only);
  void DeliverDue(double now, double budget_end);
  Status Save();
  Status Load();
  // One log line: time, event, run, then the members `fields` writes.
  void Log(double now, std::string_view event,
           const std::function<void(JsonWriter&)>& fields = nullptr);

  WatcherOptions options_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  HttpClient* http_ = nullptr;
  Clock* clock_ = nullptr;
  LogFn log_;
  std::unique_ptr<Detectors> detectors_;
  std::map<std::string, Incident> open_;  // by finding key
  std::vector<Delivery> outbox_;
  uint64_t next_seq_ = 1;
  std::map<std::string, bool> agent_ok_;  // for logging transitions only
  std::unique_ptr<ThreadPool> pool_;      // the polls' workers (kPollThreads)
  RoundObserver observer_;
};

}  // namespace ek::watch
