#include "agent/agent.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <thread>
#include <utility>

#include "agent/agent_server.h"
#include "ckpt/checkpoint.h"
#include "core/fake_clock.h"
#include "core/file.h"
#include "core/scratch_dir_testing.h"

namespace ek::watch {
namespace {

class FixedFeed : public GpuFeed {
 public:
  Status Update(double, double) override { return Status::Ok(); }
  std::vector<GpuReading> Latest(double, std::string* state) override {
    *state = "ok";
    GpuReading a{0, 100.0, 191.0, 80000.0, 0.5};
    GpuReading b{1, 0.0, 187.0, std::nullopt, 0.5};
    return {a, b};
  }
};

struct AgentFixture {
  testing::ScratchDir dir;
  FakeClock clock{1000};
  std::unique_ptr<Agent> agent;
  AgentFixture() {
    MakeDirs(dir / "hb").ok();
    MakeDirs(dir / "ck").ok();
    WriteFileAtomic(dir / "hb/rank-0.json",
                    "{\"v\":1,\"rank\":0,\"pid\":" + std::to_string(getpid()) +
                        ",\"step\":12,\"tokens\":4096,\"time\":998,\"step_time\":990,\"step_s\":2,"
                        "\"tok_s\":100,"
                        "\"phase\":\"train\"}")
        .ok();
    WriteFileAtomic(dir / "hb/rank-1.json",
                    R"({"v":1,"rank":1,"pid":999999999,"step":11,"time":900,"phase":"checkpoint"})")
        .ok();
    // A finalized evenkeel checkpoint of step 10 (the agent judges by ek_ckpt's rule).
    const std::string temp = dir / ("ck/.step-00000010.tmp-" + std::to_string(getpid()));
    MakeDirs(temp).ok();
    const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    std::string st(8, '\0');
    for (int i = 0; i < 8; ++i) st[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    WriteFileAtomic(temp + "/model.safetensors", st + header + std::string(8, 'x')).ok();
    ckpt::CheckpointManifest meta;
    meta.step = 10;
    meta.dtype = "float32";
    ckpt::FinalizeCheckpoint(temp, dir / "ck/step-00000010", meta).ok();
    agent = std::make_unique<Agent>(
        AgentOptions{"demo", "node-a", dir / "hb", dir / "ck", 4, dir / "goodput.json"},
        std::make_unique<FixedFeed>(), "", &clock);
  }
};

TEST(Agent, StatusSurvivesTheWire) {
  AgentFixture f;
  AgentStatus s = f.agent->Snapshot();
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_TRUE(s.ranks[0].alive);
  EXPECT_FALSE(s.ranks[1].alive);
  EXPECT_DOUBLE_EQ(s.ranks[0].beat_age_s, 2);
  EXPECT_DOUBLE_EQ(s.ranks[0].step_age_s, 10);
  auto back = ParseAgentStatus(AgentStatusToJson(s), "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->host, "node-a");
  ASSERT_EQ(back->gpus.size(), 2u);
  EXPECT_FALSE(back->gpus[1].mem_used_mib.has_value());  // missing stays missing
  EXPECT_DOUBLE_EQ(*back->gpus[1].util_pct, 0);
  EXPECT_EQ(back->ranks[1].hb.phase, "checkpoint");
  EXPECT_FALSE(back->ranks[1].alive);
  ASSERT_TRUE(back->checkpoint.newest_complete);
  EXPECT_EQ(back->checkpoint.newest_complete->step, 10);
}

// /status as the watcher reads it: every field is required and typed, so a
// mistyped, missing or misnested one is an error naming the URL and the field
// (the old reader made a string step into step -1 and a missing pid into 0).
TEST(Agent, StatusReaderNamesAMissingMistypedOrMisnestedField) {
  AgentFixture f;
  const std::string good = AgentStatusToJson(f.agent->Snapshot());
  auto with = [&](std::string_view from, std::string_view to) {
    std::string j = good;
    size_t at = j.find(from);
    EXPECT_NE(at, std::string::npos) << from << " in " << good;
    if (at != std::string::npos) j.replace(at, from.size(), to);
    auto back = ParseAgentStatus(j, "http://n1:9464/status");
    return back.ok() ? std::string("ok") : back.status().message();
  };
  EXPECT_EQ(with("", ""), "ok");
  EXPECT_EQ(with("\"step\":12", "\"step\":\"12\""),
            "http://n1:9464/status: ranks[0].step: not an integer");
  EXPECT_EQ(with("\"step\":12,", ""), "http://n1:9464/status: ranks[0].step: missing");
  EXPECT_EQ(with("\"alive\":true", "\"alive\":1"),
            "http://n1:9464/status: ranks[0].alive: not true or false");
  EXPECT_EQ(with("\"run\":\"demo\"", "\"run\":[\"demo\"]"),
            "http://n1:9464/status: run: not a string");
  EXPECT_EQ(with("\"gpus\":[", "\"gpus\":{\"x\":3},\"old\":["),
            "http://n1:9464/status: gpus: not an array");
  EXPECT_EQ(with("\"gpus\":[{\"gpu\":0", "\"gpus\":[3,{\"gpu\":0"),
            "http://n1:9464/status: gpus[0]: not an object");
  EXPECT_EQ(with("\"power_w\":191", "\"power_w\":\"191\""),
            "http://n1:9464/status: gpus[0].power_w: not a number");
  EXPECT_EQ(with("\"checkpoint\":{", "\"checkpoint\":[],\"old\":{"),
            "http://n1:9464/status: checkpoint: not an object");
  EXPECT_EQ(with("\"complete\":{\"name\"", "\"complete\":{\"nam\""),
            "http://n1:9464/status: checkpoint.complete.name: missing");
  EXPECT_EQ(with("\"problems\":[", "\"problems\":[7],\"old\":["),
            "http://n1:9464/status: problems[0]: not a string");
  EXPECT_EQ(with("\"v\":1", "\"v\":2"), "http://n1:9464/status: v: unknown /status version 2");
  EXPECT_EQ(with("\"tok_s\":100", "\"tok_s\":null"), "ok");  // null is how the writer spells NaN
}

// The launcher's goodput.json (heartbeat/goodput_account.h) becomes the goodput gauges;
// none before it is written, and an unreadable one is a problem, not a gauge.
TEST(Agent, ExportsTheLaunchersGoodput) {
  AgentFixture f;
  std::string m = AgentStatusToMetrics(f.agent->Snapshot());
  EXPECT_EQ(m.find("evenkeel_goodput"), std::string::npos) << m;
  heartbeat::GoodputFile g;
  g.run_id = "r1";
  g.attempt = 2;
  g.goodput = {100, 80, 6, 1, 2, 3, 4, 1.5, 2.5};
  ASSERT_TRUE(WriteFileAtomic(f.dir / "goodput.json", heartbeat::GoodputFileToJson(g)).ok());
  AgentStatus st = f.agent->Snapshot();
  EXPECT_TRUE(st.problems.empty());
  m = AgentStatusToMetrics(st);
  EXPECT_NE(m.find("evenkeel_goodput_ratio{run=\"demo\",host=\"node-a\"} 0.8\n"), std::string::npos)
      << m;
  for (auto [part, v] : {std::pair{"training", "80"},
                         {"redone", "6"},
                         {"detection", "1"},
                         {"stopping", "2"},
                         {"rendezvous", "3"},
                         {"startup", "4"},
                         {"save_blocked", "1.5"},
                         {"other", "2.5"}}) {
    EXPECT_NE(
        m.find(fmt::format(
            "evenkeel_goodput_seconds{{run=\"demo\",host=\"node-a\",part=\"{}\"}} {}\n", part, v)),
        std::string::npos)
        << part << "\n"
        << m;
  }
  ASSERT_TRUE(WriteFileAtomic(f.dir / "goodput.json", R"({"v":1,"run_id":"r1"})").ok());
  st = f.agent->Snapshot();
  EXPECT_FALSE(st.goodput);
  ASSERT_EQ(st.problems.size(), 1u);
  EXPECT_NE(st.problems[0].find("goodput.json: time: missing"), std::string::npos)
      << st.problems[0];
}

TEST(Agent, MetricsUseEvenkeelNamesAndLabels) {
  AgentFixture f;
  std::string m = AgentStatusToMetrics(f.agent->Snapshot());
  EXPECT_NE(
      m.find("evenkeel_gpu_power_watts{run=\"demo\",host=\"node-a\",gpu=\"0\",rank=\"4\"} 191\n"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("evenkeel_gpu_utilization_percent{run=\"demo\",host=\"node-a\",gpu=\"1\",rank="
                   "\"5\"} 0\n"),
            std::string::npos);
  EXPECT_NE(m.find("evenkeel_rank_process_alive{run=\"demo\",host=\"node-a\",rank=\"1\",local_rank="
                   "\"1\"} 0\n"),
            std::string::npos);
  EXPECT_NE(m.find("evenkeel_rank_seconds_since_step{run=\"demo\",host=\"node-a\",rank=\"0\",local_"
                   "rank=\"0\"} 10\n"),
            std::string::npos);
  EXPECT_NE(m.find("evenkeel_checkpoint_last_step{run=\"demo\",host=\"node-a\"} 10\n"),
            std::string::npos);
  EXPECT_EQ(m.find("gpu=\"1\"} NaN"), std::string::npos);  // no memory line for GPU 1 at all
  EXPECT_EQ(m.find("evenkeel_gpu_memory_used_bytes{run=\"demo\",host=\"node-a\",gpu=\"1\""),
            std::string::npos);
}

TEST(AgentServer, TokenReadOnlyAndBoundedBodies) {
  AgentFixture f;
  auto server = AgentServer::Create(f.agent.get(), "s3cret");
  ASSERT_TRUE(server.ok());
  auto port = (*server)->Bind("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status().message();
  std::thread t([&] { (void)(*server)->Serve(); });
  httplib::Client c("127.0.0.1", *port);
  c.set_connection_timeout(2);
  c.set_read_timeout(2);
  auto r = c.Get("/status");
  for (int i = 0; i < 50 && !r; ++i) {
    usleep(20000);
    r = c.Get("/status");
  }
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Get("/metrics", {{"Authorization", "Bearer wrong!"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Get("/metrics", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("evenkeel_rank_step"), std::string::npos);
  r = c.Post("/status", {{"Authorization", "Bearer s3cret"}}, "x", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  r = c.Get("/status", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(ParseAgentStatus(r->body, "http").ok());
  // A body larger than the bound is refused whatever the method.
  r = c.Post("/status", {{"Authorization", "Bearer s3cret"}}, std::string(4096, 'x'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->status == 413 || r->status == 405) << r->status;
  (*server)->Stop();
  t.join();
}

// The bytes of /status (docs/watch.md), as the writer before JsonWriter wrote them: six
// significant digits, NaN as null, optional readings and checkpoints absent when unknown.
TEST(AgentStatus, JsonBytesArePinned) {
  EXPECT_EQ(AgentStatusToJson(AgentStatus{}),
            R"({"v":1,"run":"","host":"","time":0,"rank_base":-1,"telemetry":"","gpus":[],)"
            R"("ranks":[],"checkpoint":{"complete_count":0},"problems":[]})"
            "\n");
  AgentStatus s;
  s.run = "de\"mo";
  s.host = "node-a";
  s.time = 1700000000.123456789;
  s.rank_base = 8;
  s.telemetry = "ok";
  GpuReading g;
  g.gpu = 1;
  g.util_pct = std::numeric_limits<double>::quiet_NaN();
  g.power_w = 1012.345678;
  g.age_s = 1e-7;
  s.gpus = {g};
  RankReading r;
  r.hb.rank = 9;
  r.hb.local_rank = 1;
  r.hb.pid = 1234;
  r.hb.step = 12;
  r.hb.tokens = 123456789012;
  r.hb.tok_s = 52345.678;
  r.hb.step_s = std::numeric_limits<double>::quiet_NaN();
  r.step_age_s = 3.25;
  r.hb.phase = "checkpoint";
  r.hb.phase_step = 2;
  r.hb.total_steps = 100;
  s.ranks = {r};
  CheckpointInfo c;
  c.name = "step-20";
  c.step = 20;
  c.files = 3;
  c.bytes = 1ull << 40;
  c.why = "no \"marker\"";
  s.checkpoint.complete_count = 2;
  s.checkpoint.in_progress = c;
  s.checkpoint_progress_age_s = 123.456789;
  s.problems = {"x\\y"};
  EXPECT_EQ(
      AgentStatusToJson(s),
      R"({"v":1,"run":"de\"mo","host":"node-a","time":1.7e+09,"rank_base":8,"telemetry":"ok",)"
      R"("gpus":[{"gpu":1,"util_pct":null,"power_w":1012.35,"age_s":1e-07}],"ranks":[{"rank":9,)"
      R"("local_rank":1,"pid":1234,"alive":false,"step":12,"tokens":123456789012,"tok_s":52345.7,)"
      R"("step_s":null,"beat_age_s":0,"step_age_s":3.25,"phase_age_s":-1,"phase":"checkpoint",)"
      R"("phase_step":2,"total_steps":100}],"checkpoint":{"complete_count":2,"in_progress":)"
      R"({"name":"step-20","step":20,"complete":false,"files":3,"bytes":1099511627776,)"
      R"("age_s":123.457,"why":"no \"marker\""}},"problems":["x\\y"]})"
      "\n");
}

}  // namespace
}  // namespace ek::watch
