#include "net/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace ek::net {
namespace {

// A listening loopback socket; `port` is where it listens.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
};

TEST(HttpClient, AClosedPortIsConnectionRefusedNamingHostAndPort) {
  int port = 0;
  {
    Listener l;  // bound, then closed: nothing listens there now
    port = l.port;
  }
  auto http = MakeHttpClient();
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/status";
  auto r = http->Send("GET", url, "", {}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "GET " + url + ": cannot connect to 127.0.0.1:" +
                                      std::to_string(port) + ": Connection refused");
  auto g = http->Get(url, 2);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), r.status().message());
}

// A server that takes the connection (the kernel's backlog does) and never
// answers: the error says the connection was made and how long it waited.
TEST(HttpClient, AServerThatStallsIsATimeoutNamingHostPortAndSeconds) {
  Listener stalled;  // listens, never accepts, never answers
  auto http = MakeHttpClient();
  std::string where = "127.0.0.1:" + std::to_string(stalled.port);
  std::string url = "http://" + where + "/metrics";
  auto start = std::chrono::steady_clock::now();
  auto r = http->Get(url, 0.5);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message().substr(0, url.size() + 6), "GET " + url + ": ");
  EXPECT_NE(r.status().message().find(
                where + " accepted the connection but sent no complete response within 0.5 s"),
            std::string::npos)
      << r.status().message();
  EXPECT_LT(took, 3.0);
}

// Any status comes back from Send; Get turns one other than 200 into an error
// naming the status and host:port.
TEST(HttpClient, AnHttpErrorStatusIsNamedWithHostAndPort) {
  Listener l;
  std::thread server([&] {
    int c = ::accept(l.fd, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    (void)::recv(c, buf, sizeof buf, 0);
    std::string reply =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy";
    (void)::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
    ::shutdown(c, SHUT_WR);
    (void)::recv(c, buf, sizeof buf, 0);
    ::close(c);
  });
  auto http = MakeHttpClient();
  std::string where = "127.0.0.1:" + std::to_string(l.port);
  auto r = http->Get("http://" + where + "/metrics", 2);
  server.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "GET http://" + where + "/metrics: HTTP 503 (Service Unavailable) from " + where);
}

TEST(HttpClient, ABadUrlIsInvalidArgument) {
  auto http = MakeHttpClient();
  auto r = http->Send("GET", "node-a:9400/metrics", "", {}, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "GET node-a:9400/metrics: not a URL (no scheme)");
}

TEST(HttpClient, AuthorityOfNamesHostAndPort) {
  EXPECT_EQ(AuthorityOf("http://n1:9464/status").authority, "n1:9464");
  EXPECT_EQ(AuthorityOf("http://n1/status").authority, "n1:80");
  EXPECT_EQ(AuthorityOf("https://n1").port, "443");
  UrlAuthority v6 = AuthorityOf("http://[::1]:9464/x");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.authority, "[::1]:9464");
}

}  // namespace
}  // namespace ek::net
