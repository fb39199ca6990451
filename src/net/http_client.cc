// What the client needs besides cpp-httplib: the URL's parts, the reason phrases, why a
// connection fails, GET over Send. Built into ek_net and into the module
// (http_module.h), whose Send explains httplib's errors with DescribeConnectFailure.
#include "net/http_client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
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
