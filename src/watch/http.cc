#include "watch/http.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/parse.h"

#include <fmt/format.h>

#include "telemetry/http_request.h"

namespace ek::watch {

namespace {

// cpp-httplib names a transport failure with one word ("GET URL: Connection");
// this says what happened in a person's words, asking the OS for the reason
// where the connection itself failed.
std::string Explain(const std::string& message, const std::string& url, double timeout_s) {
  size_t colon = message.rfind(": ");
  if (colon == std::string::npos) return message;
  std::string_view word = std::string_view(message).substr(colon + 2);
  std::string head = message.substr(0, colon);
  if (word == "Connection" || word == "ConnectionTimeout") {
    std::string why = DescribeConnectFailure(url, timeout_s);
    if (why.empty()) why = "the connection failed (a second attempt connected)";
    return head + ": " + why;
  }
  if (word == "Read") {
    return fmt::format("{}: no complete answer within {:.1f} s (read failed)", head, timeout_s);
  }
  if (word == "Write") return head + ": the request could not be sent (write failed)";
  return message;
}

class HttplibClient : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url,
                            const std::string& body,
                            const std::vector<std::pair<std::string, std::string>>& headers,
                            double timeout_s) override {
    auto reply = telemetry::HttpRequest(method, url, body, headers, timeout_s);
    if (!reply.ok()) {
      if (reply.status().code() != StatusCode::kUnavailable) return reply.status();
      return UnavailableError(Explain(reply.status().message(), url, timeout_s));
    }
    return HttpResponse{reply->status, std::move(reply->body)};
  }
};

// One non-blocking connect to `ai`, waited on for up to timeout_s: 0 when it
// connects, else the errno (ETIMEDOUT when no answer came in time).
int TryConnect(const addrinfo* ai, double timeout_s) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return errno;
  int err = 0;
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int n = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (n == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof err;
        if (n < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
  }
  ::close(fd);
  return err;
}

}  // namespace

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<HttplibClient>(); }

std::string DescribeConnectFailure(const std::string& url, double timeout_s) {
  size_t a = url.find("://");
  std::string scheme = a == std::string::npos ? "http" : url.substr(0, a);
  std::string rest = a == std::string::npos ? url : url.substr(a + 3);
  std::string authority = rest.substr(0, rest.find('/'));
  std::string host = authority, port = scheme == "https" ? "443" : "80";
  size_t bracket = authority.find(']');
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return fmt::format("cannot resolve {}: {}", host,
                       rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc));
  }
  int err = EHOSTUNREACH;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    err = TryConnect(ai, timeout_s);
    if (err == 0) break;
  }
  ::freeaddrinfo(res);
  if (err == 0) return "";
  if (err == ETIMEDOUT) {
    return fmt::format("no answer from {} within {:.1f} s (connect timed out)", authority,
                       timeout_s);
  }
  return fmt::format("cannot connect to {}: {}", authority, std::strerror(err));
}

bool IsLoopbackHost(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

Status SplitHostPort(const std::string& s, std::string* host, int* port) {
  size_t colon = s.rfind(':');
  std::string p = colon == std::string::npos ? s : s.substr(colon + 1);
  *host = colon == std::string::npos ? "127.0.0.1" : s.substr(0, colon);
  if (host->empty()) *host = "127.0.0.1";
  auto n = ParseIntIn(p, 0, 65535);
  if (!n) return InvalidArgumentError(fmt::format("'{}': expected HOST:PORT", s));
  *port = static_cast<int>(*n);
  return Status::Ok();
}

}  // namespace ek::watch
