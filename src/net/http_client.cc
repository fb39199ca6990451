// The only file that includes cpp-httplib's client (a large header).
#include "net/http_client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

namespace ek::net {

namespace {

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

// httplib's one-word error, in a person's words.
std::string Explain(httplib::Error error, const std::string& url, double timeout_s) {
  std::string where = AuthorityOf(url).authority;
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout: {
      std::string why = DescribeConnectFailure(url, timeout_s);
      return why.empty() ? fmt::format("cannot connect to {} (a second attempt connected)", where)
                         : why;
    }
    case httplib::Error::Read:
      return fmt::format(
          "{} accepted the connection but sent no complete response within {:.1f} s (read timed "
          "out or "
          "the connection was closed)",
          where, timeout_s);
    case httplib::Error::Write:
      return fmt::format(
          "{} accepted the connection but the request could not be sent within {:.1f} s (write "
          "failed)",
          where, timeout_s);
    case httplib::Error::BindIPAddress:
      return fmt::format("cannot bind a local address to reach {}", where);
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return fmt::format("TLS with {} failed ({})", where, httplib::to_string(error));
    default:
      return fmt::format("request to {} failed ({})", where, httplib::to_string(error));
  }
}

class HttplibClient : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url,
                            const std::string& body, const HttpHeaders& headers,
                            double timeout_s) override {
    size_t a = url.find("://");
    if (a == std::string::npos)
      return InvalidArgumentError(fmt::format("{} {}: not a URL (no scheme)", method, url));
    size_t slash = url.find('/', a + 3);
    std::string base = url.substr(0, slash);
    std::string path = slash == std::string::npos ? "/" : url.substr(slash);
    httplib::Client client(base);
    if (!client.is_valid())
      return InvalidArgumentError(fmt::format("{} {}: unsupported URL", method, url));
    auto sec = static_cast<time_t>(timeout_s);
    auto usec = static_cast<time_t>((timeout_s - std::floor(timeout_s)) * 1e6);
    client.set_connection_timeout(sec, usec);
    client.set_read_timeout(sec, usec);
    client.set_write_timeout(sec, usec);
    httplib::Headers h;
    for (const auto& [k, v] : headers) h.emplace(k, v);
    httplib::Result res =
        method == "POST" ? client.Post(path, h, body, "application/json") : client.Get(path, h);
    if (!res)
      return UnavailableError(
          fmt::format("{} {}: {}", method, url, Explain(res.error(), url, timeout_s)));
    return HttpResponse{res->status, std::move(res->body)};
  }
};

}  // namespace

Result<std::string> HttpClient::Get(const std::string& url, double timeout_s) {
  EK_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", url, "", {}, timeout_s));
  if (r.status != 200) {
    std::string_view reason = ReasonPhrase(r.status);
    return UnavailableError(fmt::format("GET {}: HTTP {}{} from {}", url, r.status,
                                        reason.empty() ? "" : fmt::format(" ({})", reason),
                                        AuthorityOf(url).authority));
  }
  return std::move(r.body);
}

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<HttplibClient>(); }

UrlAuthority AuthorityOf(std::string_view url) {
  size_t a = url.find("://");
  std::string_view scheme = a == std::string_view::npos ? "http" : url.substr(0, a);
  std::string_view rest = a == std::string_view::npos ? url : url.substr(a + 3);
  UrlAuthority out;
  std::string_view authority = rest.substr(0, rest.find('/'));
  std::string_view host = authority;
  std::string port = scheme == "https" ? "443" : "80";
  size_t bracket = authority.find(']');
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port = std::string(authority.substr(colon + 1));
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  out.host = std::string(host);
  out.port = port;
  out.authority =
      colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)
          ? std::string(authority)
          : fmt::format("{}:{}", authority, port);
  return out;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "";
  }
}

std::string DescribeConnectFailure(const std::string& url, double timeout_s) {
  UrlAuthority where = AuthorityOf(url);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(where.host.c_str(), where.port.c_str(), &hints, &res); rc != 0) {
    return fmt::format("cannot resolve {}: {}", where.host,
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
    return fmt::format("no answer from {} within {:.1f} s (connect timed out)", where.authority,
                       timeout_s);
  }
  return fmt::format("cannot connect to {}: {}", where.authority, std::strerror(err));
}

}  // namespace ek::net
