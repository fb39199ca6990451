#include "watch/sinks.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <simdjson.h>

#include <thread>

#include "core/fake_clock.h"
#include "core/file.h"
#include "watch/test_util.h"

namespace ek::watch {
namespace {

Incident Sample() {
  Incident inc;
  inc.id = "demo/crash/1764424981200";
  inc.opened = 1764424981.2;
  inc.finding.kind = Kind::kCrash;
  inc.finding.key = "crash";
  inc.finding.severity = "critical";
  inc.finding.summary = "crash: rank(s) 3 on node-a gone without completion";
  inc.finding.ranks = {0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  inc.finding.hosts = {"node-a", "node-b"};
  inc.finding.since = 1764424980;
  inc.finding.evidence = "process gone: rank 3 pid 4242 \"quoted\"";
  inc.finding.gpu_hours = 2.5;
  return inc;
}

// A loopback HTTP receiver that records POST bodies; `fail_first` answers 503 first.
struct Receiver {
  httplib::Server server;
  std::vector<std::string> bodies;
  int fail_first = 0;
  int port = 0;
  std::thread thread;
  Receiver() {
    server.Post("/.*", [this](const httplib::Request& req, httplib::Response& res) {
      if (fail_first > 0) {
        --fail_first;
        res.status = 503;
        return;
      }
      bodies.push_back(req.path + " " + req.body);
      res.status = 200;
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
    // stop() before the loop runs would be lost; wait (bounded) until it runs.
    for (int i = 0; i < 2000 && !server.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    server.stop();
    thread.join();
  }
};

TEST(Sinks, AlertmanagerBodyIsApiV2WithEndsAtOnlyWhenResolved) {
  auto http = MakeHttpClient();
  Receiver rx;
  auto sink =
      MakeAlertmanagerSink("http://127.0.0.1:" + std::to_string(rx.port) + "/", http.get(), 2);
  Incident inc = Sample();
  std::string firing = sink->Render(inc, "demo", false);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(firing).get(doc)) << firing;
  EXPECT_EQ(std::string_view(doc.at(0)["labels"]["alertname"]), "EvenkeelCrash");
  EXPECT_EQ(std::string_view(doc.at(0)["labels"]["incident"]), inc.id);
  EXPECT_EQ(std::string_view(doc.at(0)["annotations"]["ranks"]), "0-2,4-15");
  EXPECT_EQ(std::string_view(doc.at(0)["startsAt"]), "2025-11-29T14:03:01.200Z");
  EXPECT_TRUE(doc.at(0)["endsAt"].error());
  inc.resolved = inc.opened + 60;
  std::string resolved = sink->Render(inc, "demo", true);
  ASSERT_FALSE(parser.parse(resolved).get(doc));
  EXPECT_EQ(std::string_view(doc.at(0)["endsAt"]), "2025-11-29T14:04:01.200Z");
  ASSERT_TRUE(sink->Deliver(firing).ok());
  ASSERT_EQ(rx.bodies.size(), 1u);
  EXPECT_EQ(rx.bodies[0].substr(0, 15), "/api/v2/alerts ");
}

TEST(Sinks, WebhookHasASlackTextAndTheIncident) {
  auto http = MakeHttpClient();
  Receiver rx;
  rx.fail_first = 1;
  auto sink =
      MakeWebhookSink("http://127.0.0.1:" + std::to_string(rx.port) + "/hook", http.get(), 2);
  std::string body = sink->Render(Sample(), "demo", false);
  Status first = sink->Deliver(body);
  EXPECT_FALSE(first.ok());
  EXPECT_NE(first.message().find("503"), std::string::npos);
  ASSERT_TRUE(sink->Deliver(body).ok());
  ASSERT_EQ(rx.bodies.size(), 1u);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(body).get(doc));
  std::string_view text = doc["text"];
  EXPECT_NE(text.find("[FIRING] demo: crash"), std::string::npos) << text;
  EXPECT_NE(text.find("ranks 0-2,4-15 on node-a,node-b"), std::string::npos) << text;
  EXPECT_NE(text.find("2.5 GPU-hours at stake"), std::string::npos) << text;
  EXPECT_EQ(std::string_view(doc["evenkeel"]["status"]), "firing");
  EXPECT_EQ(std::string_view(doc["evenkeel"]["evidence"]),
            "process gone: rank 3 pid 4242 \"quoted\"");
}

TEST(Sinks, WebhookDownIsAnError) {
  auto http = MakeHttpClient();
  int port;
  {
    Receiver gone;
    port = gone.port;
  }
  auto sink = MakeWebhookSink("http://127.0.0.1:" + std::to_string(port) + "/hook", http.get(), 1);
  EXPECT_FALSE(sink->Deliver("{}").ok());
}

TEST(Sinks, CommandGetsJsonOnStdinAndEnvironment) {
  testing::ScratchDir dir;
  std::string out = dir / "out";
  auto sink = MakeCommandSink(
      "cat > " + out + "; echo \"$EVENKEEL_ALERT_STATUS $EVENKEEL_ALERT_KIND\" >> " + out, 5);
  Incident inc = Sample();
  inc.resolved = inc.opened + 5;
  ASSERT_TRUE(sink->Deliver(sink->Render(inc, "demo", true)).ok());
  auto text = ReadFile(out);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("\"status\":\"resolved\""), std::string::npos) << *text;
  EXPECT_NE(text->find("resolved crash\n"), std::string::npos) << *text;
}

// The variables are the record's fields, decoded: a quote in the run's name (and so in the
// incident's id) is a quote, not the end of the value (the old scan of the text cut it there).
TEST(Sinks, CommandVariablesAreTheRecordsFieldsDecoded) {
  testing::ScratchDir dir;
  std::string out = dir / "out";
  auto sink = MakeCommandSink(
      "cat >/dev/null; printf '%s|%s|%s' \"$EVENKEEL_ALERT_STATUS\" \"$EVENKEEL_ALERT_KIND\" "
      "\"$EVENKEEL_ALERT_ID\" > " +
          out,
      5);
  Incident inc = Sample();
  inc.id = "de\"mo/crash/1764424981200";
  ASSERT_TRUE(sink->Deliver(sink->Render(inc, "de\"mo", false)).ok());
  auto text = ReadFile(out);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "firing|crash|de\"mo/crash/1764424981200");
}

TEST(Sinks, CommandFailureAndTimeoutAreErrors) {
  EXPECT_FALSE(MakeCommandSink("exit 3", 5)->Deliver("{}").ok());
  // The 30 s timeout passes on a fake clock: the test takes no 30 s.
  FakeClock clock;
  auto slow = MakeCommandSink("sleep 30", 30, &clock);
  auto start = std::chrono::steady_clock::now();
  Status st = slow->Deliver("{}");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("timed out after 30 s"), std::string::npos) << st.message();
  EXPECT_GE(clock.slept(), 29.99);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Sinks, ACommandThatDoesNotReadItsInputIsAnErrorNotASigpipe) {
  // More than a pipe holds, to a command that exits without reading it: the
  // write fails with EPIPE and the watcher lives, its SIGPIPE disposition as
  // it was (the default here: the sink changes no disposition).
  // (httplib::Server, which the tests above use as a receiver, ignores
  // SIGPIPE for the whole process: put the default back for this test.)
  struct sigaction dfl {
  }, before{};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &dfl, &before), 0);
  std::string body(1 << 20, 'x');
  Status st = MakeCommandSink("exec 0<&-; exit 0", 5)->Deliver(body);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("alert command: write: Broken pipe"), std::string::npos)
      << st.message();
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGPIPE, &before, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_DFL);
}

// The bytes of the incident record (the command sink's stdin, the webhook's "evenkeel", the
// watch log) and of the Alertmanager payload, as the writer before JsonWriter wrote them.
TEST(Sinks, PayloadBytesArePinned) {
  Incident inc;
  inc.id = "run/hang/1700000000123";
  inc.opened = 1700000000.1234;
  inc.finding.kind = Kind::kHang;
  inc.finding.key = "hang";
  inc.finding.severity = "critical";
  inc.finding.summary = "hang: \"no\" rank advanced";
  inc.finding.ranks = {0, 1, 2, 5};
  inc.finding.hosts = {"node-a", "node\"b"};
  inc.finding.since = 1699999999.9996;
  inc.finding.evidence = "steps 12..12\n";
  inc.finding.gpu_hours = 12.34567;
  EXPECT_EQ(IncidentJson(inc, "r\"un", false),
            R"({"id":"run/hang/1700000000123","run":"r\"un","kind":"hang","status":"firing",)"
            R"("severity":"critical","summary":"hang: \"no\" rank advanced","ranks":[0,1,2,5],)"
            R"("ranks_compact":"0-2,5","hosts":["node-a","node\"b"],)"
            R"("since":"2023-11-14T22:13:20.000Z","opened":"2023-11-14T22:13:20.123Z",)"
            R"("evidence":"steps 12..12\n","gpu_hours":12.346})");
  auto am = MakeAlertmanagerSink("http://am/", nullptr, 1);
  EXPECT_EQ(
      am->Render(inc, "r\"un", false),
      R"([{"labels":{"alertname":"EvenkeelHang","run":"r\"un","kind":"hang",)"
      R"("severity":"critical","incident":"run/hang/1700000000123"},"annotations":)"
      R"({"summary":"hang: \"no\" rank advanced","ranks":"0-2,5","hosts":"node-a,node\"b",)"
      R"("since":"2023-11-14T22:13:20.000Z","evidence":"steps 12..12\n","gpu_hours":"12.35"},)"
      R"("startsAt":"2023-11-14T22:13:20.123Z","generatorURL":"http://evenkeel.invalid/watch"}])");
}

}  // namespace
}  // namespace ek::watch
