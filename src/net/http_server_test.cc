// The HTTP server under hostile clients, over real sockets on loopback: idle
// and slow-loris connections must not delay a normal request, junk gets its
// status at once, idle connections are cut, a client address is capped, and
// normal traffic still flows. Timings are printed (and recorded as test
// properties) so a regression shows its numbers.
#include "net/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/fake_clock.h"

namespace ek::net {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A blocking TCP connection to 127.0.0.1:port from `source` (any 127.x.y.z:
// Linux routes all of 127/8 to loopback, so tests can be many client addresses).
int Connect(int port, const std::string& source = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &src.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

struct Reply {
  int status = 0;  // 0: no complete answer
  std::string head, body;
  bool closed = false;  // the server closed (or reset) the connection
};

// Reads one response (Content-Length framed) or until the connection closes.
// Bytes past the response (pipelined answers) are kept in `*rest`, when given,
// and read from there first.
Reply ReadReply(int fd, double timeout_s, bool head_only = false, std::string* rest = nullptr) {
  Reply r;
  std::string buf;
  if (rest) buf.swap(*rest);
  double deadline = Now() + timeout_s;
  size_t need = std::string::npos;
  while (true) {
    size_t end = buf.find("\r\n\r\n");
    if (end != std::string::npos && need == std::string::npos) {
      r.head = buf.substr(0, end + 4);
      r.status = std::atoi(r.head.c_str() + 9);
      size_t cl = r.head.find("Content-Length: ");
      size_t len =
          cl == std::string::npos ? 0 : std::strtoull(r.head.c_str() + cl + 16, nullptr, 10);
      need = end + 4 + (head_only ? 0 : len);
    }
    if (need != std::string::npos && buf.size() >= need) {
      r.body = buf.substr(r.head.size(), need - r.head.size());
      if (rest) *rest = buf.substr(need);
      return r;
    }
    int wait_ms = static_cast<int>((deadline - Now()) * 1000);
    if (wait_ms <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) break;
    char chunk[65536];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
  if (need == std::string::npos || buf.size() < need) r.status = 0;  // no complete answer
  return r;
}

// Whether the server closes the connection within `timeout_s` (EOF or reset),
// discarding whatever it sends first.
bool ClosedWithin(int fd, double timeout_s) {
  double deadline = Now() + timeout_s;
  while (true) {
    int wait_ms = static_cast<int>((deadline - Now()) * 1000);
    if (wait_ms <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return false;
    char chunk[4096];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return true;
  }
}

constexpr char kGet[] = "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";

class ServerFixture {
 public:
  explicit ServerFixture(HttpServerLimits limits = {}, Clock* clock = Clock::Default())
      : server_(limits, clock) {
    server_.Get("/metrics", [this](const HttpServer::Request&) {
      ++served_;
      return HttpServer::Response::Text(200, "evenkeel_up 1\n");
    });
    server_.Get("/big", [](const HttpServer::Request&) {
      HttpServer::Response r;
      r.shared_body = std::make_shared<const std::string>(8 << 20, 'x');
      return r;
    });
    auto port = server_.Bind("127.0.0.1:0");
    EXPECT_TRUE(port.ok()) << port.status().message();
    port_ = port.ok() ? *port : 0;
    thread_ = std::thread([this] { (void)server_.Serve(); });
  }
  ~ServerFixture() {
    server_.Stop();
    thread_.join();
  }
  int port() const { return port_; }
  HttpServer& server() { return server_; }
  int served() const { return served_.load(); }

  // Waits until the server holds `n` connections (accepted), up to 2 s.
  bool WaitForConnections(int n) {
    for (int i = 0; i < 200 && server_.connections() < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return server_.connections() >= n;
  }

 private:
  HttpServer server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> served_{0};
};

// 200 connections from 10 client addresses (20 each, under the cap of 32).
std::vector<int> OpenMany(int port, int n, std::string_view first_bytes = "") {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = Connect(port, "127.0.0." + std::to_string(2 + i % 10));
    EXPECT_GE(fd, 0);
    if (fd < 0) continue;
    if (!first_bytes.empty()) SendAll(fd, first_bytes);
    fds.push_back(fd);
  }
  return fds;
}

void CloseAll(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

// One GET /metrics on a fresh connection: seconds until the full answer.
double TimedGet(int port, int* status) {
  double t0 = Now();
  int fd = Connect(port);
  EXPECT_GE(fd, 0);
  SendAll(fd, kGet);
  Reply r = ReadReply(fd, 5);
  double dt = Now() - t0;
  ::close(fd);
  *status = r.status;
  return dt;
}

TEST(HttpServerTest, TwoHundredIdleConnectionsDoNotDelayARequest) {
  ServerFixture f;
  std::vector<int> idle = OpenMany(f.port(), 200);
  ASSERT_TRUE(f.WaitForConnections(200)) << f.server().connections();
  int status = 0;
  double dt = TimedGet(f.port(), &status);
  std::printf("GET /metrics with 200 idle connections open: %.1f ms\n", dt * 1e3);
  ::testing::Test::RecordProperty("idle200_get_ms", static_cast<int>(dt * 1e3));
  EXPECT_EQ(status, 200);
  EXPECT_LT(dt, 1.0);
  CloseAll(idle);
}

TEST(HttpServerTest, TwoHundredSlowLorisConnectionsDoNotDelayARequest) {
  ServerFixture f;
  std::vector<int> slow = OpenMany(f.port(), 200, "GET /metr");
  ASSERT_TRUE(f.WaitForConnections(200));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // their bytes are in
  int status = 0;
  double dt = TimedGet(f.port(), &status);
  std::printf("GET /metrics with 200 slow-loris connections open: %.1f ms\n", dt * 1e3);
  ::testing::Test::RecordProperty("slowloris200_get_ms", static_cast<int>(dt * 1e3));
  EXPECT_EQ(status, 200);
  EXPECT_LT(dt, 1.0);
  CloseAll(slow);
}

struct JunkCase {
  const char* name;
  std::string request;
  int status;
};

TEST(HttpServerTest, JunkIsAnsweredAtOnceAndClosed) {
  ServerFixture f;
  std::string binary;
  for (int i = 0; i < 512; ++i) binary.push_back(static_cast<char>((i * 151 + 7) & 0xff));
  const JunkCase cases[] = {
      {"binary bytes", binary, 400},
      {"TLS hello on the plain port",
       std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11), 400},
      {"100 KB request line", "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n",
       414},
      {"10 KB of headers",
       "GET /metrics HTTP/1.1\r\nX-Junk: " + std::string(10000, 'b') + "\r\n\r\n", 431},
      {"200 headers",
       [] {
         std::string r = "GET /metrics HTTP/1.1\r\n";
         for (int i = 0; i < 200; ++i) r += "X-" + std::to_string(i) + ": 1\r\n";
         return r + "\r\n";
       }(),
       431},
      {"huge Content-Length",
       "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999\r\n\r\n", 413},
      {"chunked body",
       "GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 413},
      {"POST", "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405},
      {"POST with a body",
       "POST /metrics HTTP/1.1\r\nContent-Length: 90000\r\n\r\n" + std::string(90000, 'x'), 405},
      {"DELETE", "DELETE /metrics HTTP/1.1\r\n\r\n", 405},
      {"HTTP/2.0", "GET /metrics HTTP/2.0\r\n\r\n", 505},
      {"no version", "GET /metrics\r\n\r\n", 400},
      {"control byte in a header", std::string("GET /metrics HTTP/1.1\r\nX-A: a\x01z\r\n\r\n"),
       400},
      {"folded header", "GET /metrics HTTP/1.1\r\nX-A: a\r\n  b\r\n\r\n", 400},
      {"bad Content-Length", "GET /metrics HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n", 400},
  };
  double worst = 0;
  for (const auto& c : cases) {
    int fd = Connect(f.port());
    ASSERT_GE(fd, 0);
    double t0 = Now();
    SendAll(fd, c.request);
    Reply r = ReadReply(fd, 2);
    double dt = Now() - t0;
    worst = std::max(worst, dt);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.head;
    EXPECT_LT(dt, 1.0) << c.name;
    EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << c.name;
    if (c.status == 405) {
      EXPECT_NE(r.head.find("Allow: GET, HEAD"), std::string::npos);
    }
    EXPECT_TRUE(ClosedWithin(fd, 2)) << c.name << ": left open";
    ::close(fd);
  }
  std::printf("junk answered: slowest %.1f ms over %zu cases\n", worst * 1e3, std::size(cases));
  ::testing::Test::RecordProperty("junk_worst_ms", static_cast<int>(worst * 1e3));
  EXPECT_EQ(f.served(), 0);
  // The server is fine afterwards.
  int status = 0;
  TimedGet(f.port(), &status);
  EXPECT_EQ(status, 200);
}

TEST(HttpServerTest, JunkIsAnsweredWhileTwoHundredIdleConnectionsAreOpen) {
  ServerFixture f;
  std::vector<int> idle = OpenMany(f.port(), 200);
  ASSERT_TRUE(f.WaitForConnections(200));
  int fd = Connect(f.port());
  double t0 = Now();
  SendAll(fd, std::string("\x00\xff\xfe garbage\r\n\r\n", 14));
  Reply r = ReadReply(fd, 2);
  double dt = Now() - t0;
  std::printf("junk answered with 200 idle connections open: %.1f ms\n", dt * 1e3);
  EXPECT_EQ(r.status, 400);
  EXPECT_LT(dt, 1.0);
  ::close(fd);
  CloseAll(idle);
}

TEST(HttpServerTest, IdleAndSlowConnectionsAreClosedOnTime) {
  // The timeouts run on a fake clock: nothing closes while it stands still,
  // and each closes once the clock passes its timeout, with no real wait.
  HttpServerLimits limits;
  limits.idle_timeout_s = 0.5;
  limits.request_timeout_s = 1;
  FakeClock clock;
  ServerFixture f(limits, &clock);
  const double t0 = clock.Monotonic();
  int idle = Connect(f.port());
  int used = Connect(f.port());
  int slow = Connect(f.port());
  SendAll(used, kGet);
  EXPECT_EQ(ReadReply(used, 2).status, 200);
  SendAll(slow, "GET /metrics HTTP/1.1\r\nHost: a");  // and never more
  ASSERT_TRUE(f.WaitForConnections(3));
  EXPECT_FALSE(ClosedWithin(idle, 0.2)) << "closed with no time passed on the server's clock";
  clock.Advance(0.6);
  f.server().Wake();
  EXPECT_TRUE(ClosedWithin(idle, 1.5)) << "a connection that never sent a byte";
  double idle_s = clock.Monotonic() - t0;
  EXPECT_TRUE(ClosedWithin(used, 1.5)) << "a keep-alive connection after its answer";
  clock.Advance(0.6);
  f.server().Wake();
  Reply r = ReadReply(slow, 2.5);
  double slow_s = clock.Monotonic() - t0;
  EXPECT_EQ(r.status, 408);
  EXPECT_TRUE(ClosedWithin(slow, 1.5));
  std::printf(
      "idle connection closed after %.2f s (timeout 0.5 s); slow request answered 408 after %.2f s "
      "(timeout 1 s), on the fake clock\n",
      idle_s, slow_s);
  EXPECT_GE(f.server().counters().idle_closed, 2u);
  ::close(idle);
  ::close(used);
  ::close(slow);
}

TEST(HttpServerTest, AClientAddressIsCapped) {
  ServerFixture f;  // default cap: 32 per client address
  std::vector<int> mine;
  for (int i = 0; i < 32; ++i) mine.push_back(Connect(f.port(), "127.0.0.9"));
  ASSERT_TRUE(f.WaitForConnections(32));
  double t0 = Now();
  int extra = Connect(f.port(), "127.0.0.9");
  ASSERT_GE(extra, 0);
  Reply r = ReadReply(extra, 1);
  double dt = Now() - t0;
  EXPECT_TRUE(r.status == 503 || r.closed) << r.head;
  EXPECT_TRUE(r.closed || ClosedWithin(extra, 1.5));
  EXPECT_LT(dt, 1.0);
  std::printf("33rd connection from one address refused in %.1f ms (status %d)\n", dt * 1e3,
              r.status);
  EXPECT_EQ(f.server().counters().refused, 1u);
  // Another address is served, and so is this one once it closes some.
  int status = 0;
  TimedGet(f.port(), &status);
  EXPECT_EQ(status, 200);
  ::close(extra);
  ::close(mine.back());
  mine.pop_back();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int again = Connect(f.port(), "127.0.0.9");
  SendAll(again, kGet);
  EXPECT_EQ(ReadReply(again, 2).status, 200);
  ::close(again);
  CloseAll(mine);
}

TEST(HttpServerTest, TwoThousandRequestsFromTwentyThreadsAllSucceed) {
  ServerFixture f;
  std::atomic<int> ok{0}, failed{0};
  double t0 = Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 20; ++t) {
    threads.emplace_back([&, t] {
      int fd = -1;
      for (int i = 0; i < 100; ++i) {
        // Keep-alive, with a fresh connection every tenth request (and for
        // odd threads, every request).
        if (fd < 0 || i % 10 == 0 || t % 2 == 1) {
          if (fd >= 0) ::close(fd);
          fd = Connect(f.port(), "127.0.1." + std::to_string(1 + t));
        }
        bool good = fd >= 0 && SendAll(fd, kGet);
        Reply r = good ? ReadReply(fd, 5) : Reply{};
        if (r.status == 200 && r.body == "evenkeel_up 1\n") {
          ++ok;
        } else {
          ++failed;
          if (fd >= 0) ::close(fd);
          fd = -1;
        }
      }
      if (fd >= 0) ::close(fd);
    });
  }
  for (auto& th : threads) th.join();
  double dt = Now() - t0;
  std::printf("2000 requests from 20 threads: %d ok, %d failed, %.2f s (%.0f requests/s)\n",
              ok.load(), failed.load(), dt, 2000 / dt);
  ::testing::Test::RecordProperty("throughput_rps", static_cast<int>(2000 / dt));
  EXPECT_EQ(ok.load(), 2000);
  EXPECT_EQ(failed.load(), 0);
}

TEST(HttpServerTest, PipeliningHeadAndNotFound) {
  ServerFixture f;
  int fd = Connect(f.port());
  SendAll(fd, std::string(kGet) + "HEAD /metrics HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n");
  std::string rest;
  Reply a = ReadReply(fd, 2, false, &rest);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "evenkeel_up 1\n");
  Reply b = ReadReply(fd, 2, /*head_only=*/true, &rest);
  EXPECT_EQ(b.status, 200);
  EXPECT_NE(b.head.find("Content-Length: 14"), std::string::npos);
  Reply c = ReadReply(fd, 2, false, &rest);
  EXPECT_EQ(c.status, 404);
  ::close(fd);
  // HTTP/1.0 closes unless asked to keep alive.
  fd = Connect(f.port());
  SendAll(fd, "GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(ReadReply(fd, 2).status, 200);
  EXPECT_TRUE(ClosedWithin(fd, 1));
  ::close(fd);
}

TEST(HttpServerTest, ABigBodyToAClientThatDoesNotReadBlocksNoOne) {
  ServerFixture f;
  int stuck = Connect(f.port());
  SendAll(stuck, "GET /big HTTP/1.1\r\n\r\n");  // 8 MB, never read
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int status = 0;
  double dt = TimedGet(f.port(), &status);
  EXPECT_EQ(status, 200);
  EXPECT_LT(dt, 1.0);
  // The reader that does read gets all of it.
  int reader = Connect(f.port());
  SendAll(reader, "GET /big HTTP/1.1\r\n\r\n");
  Reply r = ReadReply(reader, 5);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), 8u << 20);
  ::close(reader);
  ::close(stuck);
}

TEST(HttpServerTest, FilterQueryAndSecrets) {
  HttpServer server;
  server.SetFilter([](const HttpServer::Request& req) -> std::optional<HttpServer::Response> {
    if (ConstantTimeEquals(req.QueryParam("token"), "a b/c") ||
        req.Header("authorization") == "Bearer x") {
      return std::nullopt;
    }
    return HttpServer::Response::Text(401, "no\n");
  });
  server.Get("/metrics",
             [](const HttpServer::Request&) { return HttpServer::Response::Text(200, "ok\n"); });
  auto port = server.Bind("127.0.0.1:0");
  ASSERT_TRUE(port.ok());
  std::thread t([&] { (void)server.Serve(); });
  int fd = Connect(*port);
  SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ReadReply(fd, 2).status, 401);
  SendAll(fd, "GET /metrics?x=1&token=a+b%2Fc HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ReadReply(fd, 2).status, 200);
  SendAll(fd, "GET /metrics HTTP/1.1\r\nAuthorization: Bearer x\r\n\r\n");
  EXPECT_EQ(ReadReply(fd, 2).status, 200);
  ::close(fd);
  server.Stop();
  t.join();
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cre", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cretX", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("", ""));
}

TEST(HttpServerTest, BindErrorsNameTheAddress) {
  HttpServer a, b;
  auto port = a.Bind("127.0.0.1:0");
  ASSERT_TRUE(port.ok());
  auto clash = b.Bind("127.0.0.1:" + std::to_string(*port));
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("Address already in use"), std::string::npos)
      << clash.status().message();
  EXPECT_FALSE(b.Bind("127.0.0.1:99999").ok());
  HttpServer unbound;
  EXPECT_FALSE(unbound.Serve().ok());
}

}  // namespace
}  // namespace ek::net
