#include "watch/watcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/fake_clock.h"
#include "core/fault_env.h"
#include "core/file.h"
#include "net/http_server.h"
#include "watch/test_util.h"

namespace ek::watch {
namespace {

// Agents by URL; anything else (a sink URL) is refused.
class FakeHttp : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url, const std::string&,
                            const std::vector<std::pair<std::string, std::string>>&,
                            double) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = agents.find(url);
    if (method != "GET" || it == agents.end())
      return UnavailableError(url + ": connection refused");
    return HttpResponse{200, AgentStatusToJson(it->second)};
  }
  std::mutex mu;
  std::map<std::string, AgentStatus> agents;
};

class FakeSink : public Sink {
 public:
  FakeSink(std::vector<std::string>* got, bool* up, bool resend = false,
           std::string name = "webhook")
      : got_(got), up_(up), resend_(resend), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  bool wants_resend() const override { return resend_; }
  std::string Render(const Incident& inc, const std::string& run, bool resolved) const override {
    return IncidentJson(inc, run, resolved);
  }
  Status Deliver(const std::string& body) override {
    if (!*up_) return UnavailableError("sink down");
    got_->push_back(body);
    return Status::Ok();
  }

 private:
  std::vector<std::string>* got_;
  bool* up_;
  bool resend_;
  std::string name_;
};

struct Rig {
  testing::ScratchDir dir;
  FakeClock clock{2'000'000'000};
  FakeHttp http;
  std::vector<std::string> got;
  bool sink_up = true;
  bool am_up = true;
  std::vector<std::string> log;
  std::vector<std::string> am_got;  // an Alertmanager-like sink that wants re-posts
  double resend_s = 60;
  Env* env = Env::Default();

  void SetRank(double step_age, bool alive = true) {
    AgentStatus s;
    s.run = "t";
    s.host = "node-a";
    s.telemetry = "ok";
    s.gpus.push_back(GpuReading{0, 100.0, 1000.0, 1.0, 0.1});
    RankReading r;
    r.hb.rank = 0;
    r.hb.step = 7;
    r.hb.step_s = 1;
    r.alive = alive;
    r.step_age_s = step_age;
    s.ranks.push_back(r);
    std::lock_guard<std::mutex> lock(http.mu);
    http.agents["http://node-a:1/status"] = s;
  }
  std::unique_ptr<Watcher> Make() {
    WatcherOptions o;
    o.settings.run = "t";
    o.settings.gpus_per_node = 1;
    o.settings.hang_floor_s = 10;
    o.settings.hang_factor = 2;
    o.profile = triage::B300Profile();
    o.agents = {"node-a:1"};
    o.state_dir = dir / "state";
    o.backoff_s = 2;
    o.backoff_max_s = 8;
    o.resend_s = resend_s;
    o.env = env;
    std::vector<std::unique_ptr<Sink>> sinks;
    sinks.push_back(std::make_unique<FakeSink>(&got, &sink_up));
    sinks.push_back(std::make_unique<FakeSink>(&am_got, &am_up, true, "alertmanager"));
    auto w = Watcher::Create(std::move(o), std::move(sinks), &http, &clock,
                             [this](const std::string& line) { log.push_back(line); });
    EXPECT_TRUE(w.ok()) << w.status().message();
    return std::move(*w);
  }
  void Rounds(Watcher* w, int n, double step_age_start, double dt = 1) {
    for (int i = 0; i < n; ++i) {
      SetRank(step_age_start + i * dt);
      ASSERT_TRUE(w->Round().ok());
      clock.Advance(dt);
    }
  }
  int Count(std::string_view status) const {
    int n = 0;
    for (const auto& g : got)
      n += g.find(std::string("\"status\":\"") + std::string(status) + "\"") != std::string::npos;
    return n;
  }
};

TEST(Watcher, OneNoticePerIncidentThenResolved) {
  Rig rig;
  auto w = rig.Make();
  rig.Rounds(w.get(), 5, 1);
  EXPECT_TRUE(rig.got.empty());
  rig.Rounds(w.get(), 10, 11);  // hung: step age 11..20 s > 10 s
  EXPECT_EQ(rig.Count("firing"), 1);
  EXPECT_EQ(w->open_incidents().size(), 1u);
  rig.Rounds(w.get(), 3, 0.5, 0.0);  // advancing again
  EXPECT_EQ(rig.Count("resolved"), 1);
  EXPECT_EQ(rig.Count("firing"), 1);
  EXPECT_TRUE(w->open_incidents().empty());
  ASSERT_FALSE(rig.log.empty());
  EXPECT_NE(rig.log.front().find("\"event\":"), std::string::npos);
}

TEST(Watcher, SinkDownRetriesWithBackoffAndDeliversOnce) {
  Rig rig;
  rig.sink_up = false;
  auto w = rig.Make();
  rig.Rounds(w.get(), 6, 11);
  EXPECT_TRUE(rig.got.empty());
  ASSERT_EQ(w->outbox().size(), 1u);
  // 6 rounds 1 s apart (t = 0..5) with backoff 2, then 4: attempts at t = 0 and 2 only.
  EXPECT_EQ(w->outbox()[0].attempts, 2);
  EXPECT_NE(w->outbox()[0].last_error.find("sink down"), std::string::npos);
  rig.sink_up = true;
  rig.Rounds(w.get(), 12, 17);
  EXPECT_EQ(rig.Count("firing"), 1);
  EXPECT_TRUE(w->outbox().empty());
}

TEST(Watcher, RestartMidIncidentNeitherLosesNorRepeats) {
  Rig rig;
  auto w = rig.Make();
  rig.Rounds(w.get(), 3, 11);
  EXPECT_EQ(rig.Count("firing"), 1);
  w.reset();  // killed
  auto w2 = rig.Make();
  rig.Rounds(w2.get(), 5, 14);
  EXPECT_EQ(rig.Count("firing"), 1);  // not repeated
  EXPECT_EQ(w2->open_incidents().size(), 1u);
  rig.Rounds(w2.get(), 3, 0.5, 0.0);
  EXPECT_EQ(rig.Count("resolved"), 1);
}

TEST(Watcher, RestartWithAnUndeliveredNoticeDeliversIt) {
  Rig rig;
  rig.sink_up = false;
  auto w = rig.Make();
  rig.Rounds(w.get(), 3, 11);
  EXPECT_TRUE(rig.got.empty());
  w.reset();
  rig.sink_up = true;
  rig.clock.Advance(60);  // past any backoff
  auto w2 = rig.Make();
  rig.Rounds(w2.get(), 3, 75);
  EXPECT_EQ(rig.Count("firing"), 1);
}

TEST(Watcher, OnlyAlertmanagerGetsFiringAlertsReposted) {
  Rig rig;
  rig.resend_s = 5;
  auto w = rig.Make();
  rig.Rounds(w.get(), 12, 11);  // open for 12 s: re-posted at 5 s and 10 s
  EXPECT_EQ(rig.Count("firing"), 1);
  ASSERT_EQ(rig.am_got.size(), 3u);
  // The same incident each time: same id, same opening.
  for (const auto& b : rig.am_got) EXPECT_NE(b.find("\"id\":\"t/hang/"), std::string::npos);
  EXPECT_EQ(rig.am_got[1].substr(0, 60), rig.am_got[0].substr(0, 60));
}

// The state file is read strictly: a damaged or foreign field is an error
// naming the file and the field, not an incident or delivery quietly dropped.
TEST(Watcher, StateWithAMissingOrMistypedFieldIsAnErrorNamingIt) {
  Rig rig;
  auto w = rig.Make();
  rig.Rounds(w.get(), 1, 1);
  w.reset();
  const std::string path = rig.dir / "state/state.json";
  auto good = ReadFile(path);
  ASSERT_TRUE(good.ok());
  auto with = [&](std::string_view from, std::string_view to) {
    std::string j = *good;
    size_t at = j.find(from);
    EXPECT_NE(at, std::string::npos) << from << " in " << *good;
    if (at != std::string::npos) j.replace(at, from.size(), to);
    EXPECT_TRUE(WriteFileAtomic(path, j).ok());
    WatcherOptions o;
    o.settings.run = "t";
    o.agents = {"x:1"};
    o.state_dir = rig.dir / "state";
    auto again = Watcher::Create(std::move(o), {}, &rig.http, &rig.clock, nullptr);
    return again.ok() ? std::string("ok") : again.status().message();
  };
  EXPECT_EQ(with("", ""), "ok");
  EXPECT_EQ(with("\"next_seq\":", "\"next_sequence\":"), path + ": next_seq: missing");
  EXPECT_EQ(with("\"detectors\":{", "\"detectors\":[],\"old\":{"),
            path + ": detectors: not an object");
  EXPECT_EQ(with("\"completed\":false", "\"completed\":\"no\""),
            path + ": detectors.completed: not true or false");
  EXPECT_EQ(with("\"outbox\":[", "\"outbox\":3,\"old\":["), path + ": outbox: not an array");
  EXPECT_EQ(with("\"open\":[", "\"open\":[7],\"old\":["), path + ": open[0]: not an object");
}

TEST(Watcher, RefusesAnotherRunsState) {
  Rig rig;
  auto w = rig.Make();
  rig.Rounds(w.get(), 1, 1);
  w.reset();
  ASSERT_TRUE(WriteFileAtomic(rig.dir / "state/state.json", "{\"v\":1,\"run\":\"other\"}").ok());
  WatcherOptions o;
  o.settings.run = "t";
  o.agents = {"x:1"};
  o.state_dir = rig.dir / "state";
  auto bad = Watcher::Create(std::move(o), {}, &rig.http, &rig.clock, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("other"), std::string::npos);
}

// state.json (incidents and the outbox) under each way a write fails: the
// round's error names the file and the operation, the file keeps the previous
// round's state whole, and the next round without the fault saves.
TEST(Watcher, StateSaveSurvivesEveryWriteFault) {
  for (const WriteFault& fault : WriteFaults("state.json")) {
    SCOPED_TRACE(fault.name);
    Rig rig;
    FaultInjectionEnv env(Env::Default());
    rig.env = &env;
    rig.sink_up = false;
    auto w = rig.Make();
    rig.Rounds(w.get(), 3, 11);  // hung: an incident and its undelivered notice
    ASSERT_EQ(w->outbox().size(), 1u);
    const std::string path = rig.dir / "state/state.json";
    const std::string before = *ReadFile(path);
    ASSERT_NE(before.find("\"outbox\":[{"), std::string::npos);
    env.Add(fault.rule);
    rig.SetRank(14);
    rig.clock.Advance(1);
    Status st = w->Round();
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message().rfind("watch: saving state: " + path + ": ", 0), 0u) << st.message();
    for (const auto& e : fault.expect)
      EXPECT_NE(st.message().find(e), std::string::npos) << st.message();
    EXPECT_EQ(*ReadFile(path), before);
    for (const auto& e : std::filesystem::directory_iterator(rig.dir / "state")) {
      EXPECT_EQ(e.path().filename(), "state.json");  // no temp file left behind
    }
    env.Clear();
    rig.clock.Advance(1);
    ASSERT_TRUE(w->Round().ok());
    w.reset();
    rig.sink_up = true;
    rig.clock.Advance(60);  // past any backoff
    auto w2 = rig.Make();   // restarts from what the healthy round saved
    EXPECT_EQ(w2->open_incidents().size(), 1u);
    ASSERT_EQ(w2->outbox().size(), 1u);
    rig.Rounds(w2.get(), 1, 80);
    EXPECT_EQ(rig.Count("firing"), 1);
  }
}

TEST(Watcher, StateDirThatCannotBeMadeIsNamed) {
  Rig rig;
  FaultInjectionEnv env(Env::Default());
  env.Add(FaultRule::Fail(FileOp::kCreateDirs, "state", EACCES));
  WatcherOptions o;
  o.settings.run = "t";
  o.agents = {"x:1"};
  o.state_dir = rig.dir / "state";
  o.env = &env;
  auto w = Watcher::Create(std::move(o), {}, &rig.http, &rig.clock, nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(rig.dir / "state: create directory: Permission denied"),
            std::string::npos)
      << w.status().message();
}

}  // namespace
}  // namespace ek::watch

namespace ek::watch {
namespace {

// Counts how many polls are in flight at once.
class SlowHttp : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string&, const std::string& url, const std::string&,
                            const std::vector<std::pair<std::string, std::string>>&,
                            double) override {
    int now = ++in_flight;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --in_flight;
    calls++;
    return UnavailableError(url + ": connection refused");
  }
  std::atomic<int> in_flight{0}, max_in_flight{0}, calls{0};
};

// 128 agents are polled by a bounded pool, not 128 threads.
TEST(Watcher, PollsManyAgentsThroughABoundedPool) {
  testing::ScratchDir dir;
  FakeClock clock{2'000'000'000};
  SlowHttp http;
  WatcherOptions o;
  o.settings.run = "t";
  o.profile = triage::B300Profile();
  for (int i = 0; i < 128; ++i) o.agents.push_back("node-" + std::to_string(i) + ":9500");
  o.state_dir = dir / "state";
  auto w = Watcher::Create(std::move(o), {}, &http, &clock, [](const std::string&) {});
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE((*w)->Round().ok());
  EXPECT_EQ(http.calls.load(), 128);
  EXPECT_LE(http.max_in_flight.load(), static_cast<int>(kPollThreads));
  EXPECT_GT(http.max_in_flight.load(), 1) << "polls run in parallel";
}

// Threads in this process now, as the kernel counts them.
int ThreadsNow() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

// The same over real sockets: 128 agents on loopback (128 servers on 128 ports,
// each its own poll loop), polled by the real HTTP client through the core
// thread pool. The polls overlap, but no more than kPollThreads at a time, and
// the watcher adds at most kPollThreads threads however many agents there are.
TEST(Watcher, Polls128RealAgentsOverLoopbackWithABoundedNumberOfThreads) {
  constexpr int kAgents = 128;
  std::atomic<int> in_flight{0}, max_in_flight{0}, served{0};
  std::vector<std::unique_ptr<net::HttpServer>> servers;
  std::vector<std::thread> loops;
  WatcherOptions o;
  o.settings.run = "t";
  o.profile = triage::B300Profile();
  o.agent_timeout_s = 5;
  for (int i = 0; i < kAgents; ++i) {
    auto srv = std::make_unique<net::HttpServer>();
    AgentStatus st;
    st.run = "t";
    st.host = "node-" + std::to_string(i);
    st.telemetry = "ok";
    std::string body = AgentStatusToJson(st);
    srv->Get("/status", [&, body](const net::HttpServer::Request&) {
      int now = ++in_flight;
      int seen = max_in_flight.load();
      while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      --in_flight;
      ++served;
      return net::HttpServer::Response::Text(200, body);
    });
    auto port = srv->Bind("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status().message();
    o.agents.push_back("127.0.0.1:" + std::to_string(*port));
    servers.push_back(std::move(srv));
  }
  for (auto& srv : servers) loops.emplace_back([s = srv.get()] { (void)s->Serve(); });
  testing::ScratchDir dir;
  FakeClock clock{2'000'000'000};
  auto http = MakeHttpClient();
  o.state_dir = dir / "state";
  auto w = Watcher::Create(std::move(o), {}, http.get(), &clock, [](const std::string&) {});
  ASSERT_TRUE(w.ok()) << w.status().message();

  std::atomic<bool> done{false};
  std::atomic<int> peak{0};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), ThreadsNow());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const int before = ThreadsNow();  // main, the 128 server loops and the sampler
  std::vector<AgentPoll> seen;
  (*w)->set_observer([&](double, const std::vector<AgentPoll>& polls, const triage::Assessment&,
                         const std::map<std::string, Incident>&) { seen = polls; });
  Status round = (*w)->Round();
  done = true;
  sampler.join();
  for (auto& srv : servers) srv->Stop();
  for (auto& t : loops) t.join();
  ASSERT_TRUE(round.ok()) << round.message();

  ASSERT_EQ(seen.size(), static_cast<size_t>(kAgents));
  for (const AgentPoll& p : seen) EXPECT_TRUE(p.ok) << p.target << ": " << p.error;
  EXPECT_EQ(served.load(), kAgents);
  EXPECT_LE(max_in_flight.load(), static_cast<int>(kPollThreads));
  EXPECT_GT(max_in_flight.load(), 1) << "polls run in parallel";
  // The round adds the pool's threads and nothing per agent.
  EXPECT_LE(peak.load() - before, static_cast<int>(kPollThreads))
      << "before " << before << ", peak " << peak.load();
}

}  // namespace
}  // namespace ek::watch
