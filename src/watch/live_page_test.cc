#include "watch/live_page.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "core/fake_clock.h"

namespace ek::watch {
namespace {

LivePageOptions Options(std::string listen, std::string token = "") {
  LivePageOptions o;
  o.listen = std::move(listen);
  o.token = std::move(token);
  o.run.name = "live";
  o.hosts = {"node-a"};
  o.gpus_per_node = 2;
  o.poll_s = 0.05;
  return o;
}

AgentPoll Poll(double now, double util1) {
  AgentPoll p;
  p.target = "node-a:9500";
  p.received = now;
  p.ok = true;
  p.status.host = "node-a";
  p.status.telemetry = "ok";
  p.status.gpus = {GpuReading{0, 100.0, 990.0, 1000.0, 0.1},
                   GpuReading{1, util1, 190.0, 1000.0, 0.1}};
  return p;
}

TEST(LivePageTest, ServesThePageAndTheModelOnLoopback) {
  FakeClock clock;  // the model's age: moved on by the test, not slept
  LivePageOptions options = Options("127.0.0.1:0");
  options.clock = &clock;
  auto page = LivePage::Start(options);
  ASSERT_TRUE(page.ok()) << page.status().message();
  triage::Assessment a;
  a.time = 1000;
  a.verdict = triage::Verdict::kHealthy;
  std::map<std::string, Incident> open;
  Incident inc;
  inc.id = "live/deadlock/1";
  inc.finding.kind = Kind::kDeadlock;
  inc.finding.summary = "rank 1 in save_barrier after step 35";
  inc.finding.ranks = {1};
  inc.finding.since = 999;
  open[inc.id] = inc;
  (*page)->OnRound(1000, {Poll(1000, 0)}, a, open);
  httplib::Client cli("127.0.0.1", (*page)->port());
  auto model = cli.Get("/data.json");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->status, 200);
  EXPECT_NE(model->body.find("\"live\":true"), std::string::npos);
  EXPECT_NE(model->body.find("rank 1 in save_barrier after step 35"), std::string::npos);
  EXPECT_NE(model->body.find("\"cols\":1"), std::string::npos);
  auto html = cli.Get("/");
  ASSERT_TRUE(html);
  EXPECT_EQ(html->status, 200);
  EXPECT_NE(html->body.find("<script id=\"ek-data\""), std::string::npos);
  auto post = cli.Post("/data.json", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405) << "read-only";
  // The incident closes: it stays on the page with its end.
  (*page)->OnRound(1001, {Poll(1001, 100)}, a, {});
  clock.Advance(0.06);  // past poll_s: rebuilt
  model = cli.Get("/data.json");
  ASSERT_TRUE(model);
  EXPECT_NE(model->body.find("\"until\":1001.000"), std::string::npos)
      << model->body.substr(0, 400);
}

TEST(LivePageTest, BeyondLoopbackNeedsAToken) {
  auto open = LivePage::Start(Options("0.0.0.0:0"));
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("needs a token"), std::string::npos);
  auto page = LivePage::Start(Options("0.0.0.0:0", "s3cret"));
  ASSERT_TRUE(page.ok()) << page.status().message();
  httplib::Client cli("127.0.0.1", (*page)->port());
  auto denied = cli.Get("/data.json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  auto query = cli.Get("/data.json?token=s3cret");
  ASSERT_TRUE(query);
  EXPECT_EQ(query->status, 200);
  httplib::Headers h = {{"Authorization", "Bearer s3cret"}};
  auto header = cli.Get("/", h);
  ASSERT_TRUE(header);
  EXPECT_EQ(header->status, 200);
}

}  // namespace
}  // namespace ek::watch
