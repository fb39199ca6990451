#include "watch/watcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/fault_env.h"
#include "core/file.h"
#include "telemetry/fake_clock.h"
#include "watch/test_util.h"

namespace ek::watch {
namespace {

// Agents by URL; anything else (a sink URL) is refused.
class FakeHttp : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url, const std::string&,
                            const std::vector<std::pair<std::string, std::string>>&, double) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = agents.find(url);
    if (method != "GET" || it == agents.end()) return UnavailableError(url + ": connection refused");
    return HttpResponse{200, AgentStatusToJson(it->second)};
  }
  std::mutex mu;
  std::map<std::string, AgentStatus> agents;
};

class FakeSink : public Sink {
 public:
  FakeSink(std::vector<std::string>* got, bool* up, bool resend = false, std::string name = "webhook")
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
  telemetry::FakeClock clock{2'000'000'000};
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
    for (const auto& g : got) n += g.find(std::string("\"status\":\"") + std::string(status) + "\"") != std::string::npos;
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
    for (const auto& e : fault.expect) EXPECT_NE(st.message().find(e), std::string::npos) << st.message();
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
    auto w2 = rig.Make();  // restarts from what the healthy round saved
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
  EXPECT_NE(w.status().message().find(rig.dir / "state: create directory: Permission denied"), std::string::npos)
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
                            const std::vector<std::pair<std::string, std::string>>&, double) override {
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
  telemetry::FakeClock clock{2'000'000'000};
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

}  // namespace
}  // namespace ek::watch
