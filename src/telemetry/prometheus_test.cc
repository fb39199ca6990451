#include "telemetry/prometheus.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/fake_clock.h"

namespace ek::telemetry {
namespace {

// Shaped like dcgm-exporter 3.x output.
std::string Exposition(double power0, double power1) {
  return "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
         "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
         "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",modelName=\"NVIDIA "
         "H200\","
         "Hostname=\"n1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 100\n"
         "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\",device=\"nvidia1\",modelName=\"NVIDIA "
         "H200\","
         "Hostname=\"n1\"} 98\n"
         "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
         "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",modelName=\"a \\\"quoted\\\", name\"} " +
         std::to_string(power0) + "\n" + "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",} " +
         std::to_string(power1) + " 1700000000000\n" +
         "DCGM_FI_DEV_FB_USED{gpu=\"0\"} 81920\nDCGM_FI_DEV_FB_USED{gpu=\"1\"} NaN\n"
         "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} 0.93\n"
         "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\"} 1980\n";
}

TEST(Prometheus, ParsesDcgmExporter) {
  std::vector<Problem> problems;
  auto samples = ParseDcgmExposition(Exposition(630.5, 640), "n1", 42, "u", &problems);
  EXPECT_TRUE(problems.empty()) << problems[0].ToString();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].host, "n1");
  EXPECT_DOUBLE_EQ(samples[0].time, 42);
  EXPECT_DOUBLE_EQ(*samples[0].power_w, 630.5);
  EXPECT_DOUBLE_EQ(*samples[0].util_pct, 100);
  EXPECT_DOUBLE_EQ(*samples[0].mem_used_mib, 81920);
  EXPECT_DOUBLE_EQ(*samples[0].sm_active, 0.93);
  EXPECT_EQ(samples[1].gpu, 1);
  EXPECT_DOUBLE_EQ(*samples[1].util_pct, 98);
  EXPECT_FALSE(samples[1].mem_used_mib.has_value());  // NaN is missing
  EXPECT_FALSE(samples[1].sm_active.has_value());
}

TEST(Prometheus, BadLinesAreReportedAndSkipped) {
  std::vector<Problem> problems;
  auto samples = ParseDcgmExposition(
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 100\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} lots\n"
      "DCGM_FI_DEV_POWER_USAGE 500\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0} 500\n"
      "{}} ??\n"
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} -3\n",
      "n1", 0, "http://n1:9400/metrics", &problems);
  ASSERT_EQ(problems.size(), 5u);
  EXPECT_EQ(problems[0].where, "http://n1:9400/metrics:2");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_FALSE(samples[0].power_w.has_value());
  EXPECT_FALSE(samples[1].util_pct.has_value());
}

TEST(Prometheus, HostNamesAreUniqueAndDuplicatesRejected) {
  FakeClock clock;
  auto s = PrometheusSource::Create({"http://node-a:9400/metrics", "node-b:9400",
                                     "http://proxy:80/a/metrics", "http://proxy:80/b/metrics"},
                                    nullptr, &clock);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->hosts(), (std::vector<std::string>{"node-a", "node-b", "proxy:80/a/metrics",
                                                     "proxy:80/b/metrics"}));
  auto dup =
      PrometheusSource::Create({"node-a:9400", "http://node-a:9400/metrics"}, nullptr, &clock);
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
}

TEST(Prometheus, NormalizesUrls) {
  EXPECT_EQ(NormalizeMetricsUrl("n1:9400"), "http://n1:9400/metrics");
  EXPECT_EQ(NormalizeMetricsUrl("http://n1:9400/x"), "http://n1:9400/x");
}

// A loopback port that nothing listens on: bind, learn the port, close.
int UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Real HTTP on loopback: two exporters answer, a third node is down.
TEST(Prometheus, ScrapesManyNodesAtOnceOverLoopback) {
  httplib::Server a, b;
  a.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(Exposition(990, 991), "text/plain; version=0.0.4");
  });
  b.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(Exposition(190, 191), "text/plain; version=0.0.4");
  });
  int port_a = a.bind_to_any_port("127.0.0.1");
  int port_b = b.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port_a, 0);
  ASSERT_GT(port_b, 0);
  std::thread ta([&] { a.listen_after_bind(); });
  std::thread tb([&] { b.listen_after_bind(); });
  // (bind_to_any_port already listens: connections queue until the loop runs.)
  int port_c = UnusedPort();

  auto http = net::MakeHttpClient();
  FakeClock clock(1000);
  auto created =
      PrometheusSource::Create({"127.0.0.1:" + std::to_string(port_a),
                                "http://127.0.0.1:" + std::to_string(port_b) + "/metrics",
                                "127.0.0.1:" + std::to_string(port_c)},
                               http.get(), &clock);
  ASSERT_TRUE(created.ok());
  PrometheusSource& source = **created;
  EXPECT_EQ(source.hosts()[0], "127.0.0.1:" + std::to_string(port_a));
  Batch batch;
  ASSERT_TRUE(source.Poll(1002, &batch).ok());
  a.stop();
  b.stop();
  ta.join();
  tb.join();
  ASSERT_EQ(batch.samples.size(), 4u);
  double power_a = 0, power_b = 0;
  for (const auto& s : batch.samples) {
    if (s.host == source.hosts()[0]) power_a += *s.power_w;
    if (s.host == source.hosts()[1]) power_b += *s.power_w;
  }
  EXPECT_DOUBLE_EQ(power_a, 990 + 991);
  EXPECT_DOUBLE_EQ(power_b, 190 + 191);
  ASSERT_EQ(batch.problems.size(), 1u);
  EXPECT_NE(batch.problems[0].where.find(std::to_string(port_c)), std::string::npos);
  // The whole connection error, not httplib's one word ("Connection").
  EXPECT_EQ(batch.problems[0].what,
            fmt::format("GET http://127.0.0.1:{}/metrics: cannot connect to 127.0.0.1:{}: "
                        "Connection refused",
                        port_c, port_c));
}

}  // namespace
}  // namespace ek::telemetry

namespace ek::telemetry {
namespace {

TEST(Prometheus, RandomInputNeverCrashes) {
  const std::string alphabet = "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",} 12.5e3NaN+Inf\\\n #";
  uint32_t seed = 99;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  std::vector<Problem> problems;
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    size_t n = next() % 400;
    for (size_t k = 0; k < n; ++k) text.push_back(alphabet[next() % alphabet.size()]);
    for (const Sample& s : ParseDcgmExposition(text, "h", 0, "fuzz", &problems)) {
      EXPECT_TRUE(!s.power_w || (*s.power_w >= 0 && *s.power_w <= kMaxPowerW));
      EXPECT_TRUE(!s.util_pct || (*s.util_pct >= 0 && *s.util_pct <= 100));
    }
  }
}

}  // namespace
}  // namespace ek::telemetry
