// The run report, live: `evenkeel watch --http HOST:PORT` serves the same page
// as `evenkeel report`, its data model rebuilt from what the watcher sees each
// round (the agents' GPU readings and heartbeats, the triage assessment, the
// incidents). GET / is the page, GET /data.json the model; the page refetches
// it every poll_s, and the model is rebuilt at most once per poll_s however
// many clients ask. Read-only. Loopback by default; anywhere else needs a
// bearer token (header, or ?token= for a browser), compared in constant time.
// Served by http_server.h's poll loop, with the agent's limits against idle,
// slow and junk clients; the model is shared with every connection sending it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "report/recorder.h"
#include "watch/detectors.h"
#include "watch/sinks.h"

namespace ek::watch {

struct LivePageOptions {
  std::string listen = "127.0.0.1:0";
  std::string token;  // required unless listen is on loopback
  report::RunInfo run;
  std::vector<std::string> hosts;  // rank order (run file's, else the agents')
  int gpus_per_node = 1;
  double poll_s = 1;
  Clock* clock = Clock::Default();  // times the model's rebuilds (monotonic)
};

class LivePage {
 public:
  // Binds now (an error names the address); serves on a thread of its own.
  static Result<std::unique_ptr<LivePage>> Start(LivePageOptions options);
  ~LivePage();
  int port() const { return port_; }

  // Watcher::set_observer's callback. Thread-safe with the server.
  void OnRound(double now, const std::vector<AgentPoll>& polls,
               const triage::Assessment& assessment, const std::map<std::string, Incident>& open);
  // The model as served (rebuilt when older than poll_s).
  std::string ModelJson();

 private:
  LivePage() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace ek::watch
