// One file over 600 lines: one HTTP/1.1 server; its head parser and poll loop share one state.
#include "net/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "net/host_port.h"
#include "net/http_client.h"

// Sections: request parsing (RFC 9112's request line and header fields, as far
// as GET needs them), requests and responses, then the connection state
// machine (reading -> writing -> reading again, or -> lingering -> closed) and
// its poll loop.

namespace ek::net {

namespace {

// ---- request parsing ----

constexpr size_t kNpos = std::string::npos;
constexpr size_t kMaxMethod = 32;  // no method we could answer is longer
constexpr size_t kReadChunk = 16384;

// RFC 9110 5.6.2: token characters.
bool IsTchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool IsVisible(unsigned char c) { return c > 0x20 && c < 0x7f; }

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value holds `token` (case-insensitive).
bool HasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    if (EqualsNoCase(TrimOws(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// Checks a request line as far as it has arrived ("GET /x HTTP/1.1", without
// the line end). Returns 0 while it can still become valid, else the status to
// answer: 400 for junk, 505 for another HTTP version.
int CheckRequestLine(std::string_view line, bool complete) {
  // The line end may have arrived in part ("\r" without its "\n").
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  int part = 0;  // 0 method, 1 target, 2 version
  size_t start = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    auto c = static_cast<unsigned char>(line[i]);
    if (c == ' ') {
      if (part == 2 || i == start) return 400;
      ++part;
      start = i + 1;
      continue;
    }
    if (part == 0 && (!IsTchar(c) || i >= kMaxMethod)) return 400;
    if (part > 0 && !IsVisible(c)) return 400;
    if (part == 2 && i - start >= 8) return 400;  // longer than "HTTP/1.1"
  }
  if (!complete) return 0;
  if (part != 2) return 400;
  std::string_view version = line.substr(start);
  if (version == "HTTP/1.1" || version == "HTTP/1.0") return 0;
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (version.size() == 8 && version.starts_with("HTTP/") && digit(version[5]) &&
      version[6] == '.' && digit(version[7])) {
    return 505;
  }
  return 400;
}

// The end of the header block (just past its blank line), or npos.
size_t FindHeaderEnd(std::string_view in) {
  size_t pos = 0;
  while (true) {
    size_t nl = in.find('\n', pos);
    if (nl == std::string_view::npos) return kNpos;
    size_t next = nl + 1;
    if (next < in.size() && in[next] == '\n') return next + 1;
    if (next + 1 < in.size() && in[next] == '\r' && in[next + 1] == '\n') return next + 2;
    if (next >= in.size() || (next + 1 == in.size() && in[next] == '\r')) return kNpos;
    pos = next;
  }
}

struct Head {
  bool http10 = false;
  bool close = false;       // Connection: close
  bool keep_alive = false;  // Connection: keep-alive (HTTP/1.0)
  bool body = false;        // Content-Length > 0 or Transfer-Encoding
};

std::string_view NextLine(std::string_view* rest) {
  size_t nl = rest->find('\n');
  std::string_view line = rest->substr(0, nl);
  rest->remove_prefix(nl == std::string_view::npos ? rest->size() : nl + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Parses a complete header block whose request line passed CheckRequestLine.
// Returns 0, or the status to answer (400, 431).
int ParseHead(std::string_view block, size_t max_headers, HttpServer::Request* req, Head* head) {
  std::string_view line = NextLine(&block);
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  req->method = std::string(line.substr(0, sp1));
  req->target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  head->http10 = line.substr(sp2 + 1) == "HTTP/1.0";
  std::string_view content_length;
  while (true) {
    line = NextLine(&block);
    if (line.empty()) break;
    if (line[0] == ' ' || line[0] == '\t') return 400;  // obsolete line folding
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return 400;
    std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
    for (char c : name) {
      if (!IsTchar(static_cast<unsigned char>(c))) return 400;
    }
    for (char c : value) {
      auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && u != '\t') || u == 0x7f) return 400;
    }
    value = TrimOws(value);
    if (req->headers.size() >= max_headers) return 431;
    req->headers.emplace_back(std::string(name), std::string(value));
    if (EqualsNoCase(name, "content-length")) {
      if (value.empty() || value.find_first_not_of("0123456789") != value.npos) return 400;
      if (!content_length.empty() && content_length != value) return 400;
      content_length = value;
      if (value.find_first_not_of('0') != std::string_view::npos) head->body = true;
    } else if (EqualsNoCase(name, "transfer-encoding")) {
      head->body = true;
    } else if (EqualsNoCase(name, "connection")) {
      head->close = head->close || HasToken(value, "close");
      head->keep_alive = head->keep_alive || HasToken(value, "keep-alive");
    }
  }
  // Origin form "/path?query"; the absolute form "http://host/path" too.
  std::string_view target = req->target;
  if (!target.starts_with("/")) {
    size_t scheme = target.find("://");
    if (scheme == std::string_view::npos) return 400;
    size_t slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  size_t q = target.find('?');
  req->path = std::string(target.substr(0, q));
  req->query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  return 0;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
               HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string PeerAddress(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      ::inet_ntop(AF_INET, &a6.s6_addr[12], buf, sizeof buf);
    } else {
      ::inet_ntop(AF_INET6, &a6, buf, sizeof buf);
    }
  }
  return buf;
}

// Descriptors this process may still open, less a reserve for everything else.
int DescriptorBudget() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return std::max(16, static_cast<int>(rl.rlim_cur) - 64);
}

}  // namespace

// ---- requests and responses ----

std::string HttpServer::Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (EqualsNoCase(k, name)) return v;
  }
  return "";
}

std::string HttpServer::Request::QueryParam(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view item = q.substr(0, amp);
    size_t eq = item.find('=');
    if (PercentDecode(item.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? "" : PercentDecode(item.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return "";
}

HttpServer::Response HttpServer::Response::Text(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string_view HttpServer::StatusText(int status) {
  std::string_view phrase = net::ReasonPhrase(status);
  return phrase.empty() ? "Unknown" : phrase;
}

bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  if (expected.empty()) return false;
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return diff == 0;
}

// ---- connections: the state machine and the poll loop ----

struct HttpServer::Conn {
  enum class State { kReading, kWriting, kLingering, kClosed };
  int fd = -1;
  std::string peer;
  bool counted = true;  // in per_client_ (a refused one is not)
  State state = State::kReading;
  std::string in;
  std::string out_head;
  std::shared_ptr<const std::string> out_body;
  size_t out_off = 0;
  bool close_after_write = false;
  bool peer_done = false;  // the client shut its side
  double last_active = 0;
  double request_start = -1;  // first byte of the request being read
  double linger_until = 0;
  int requests = 0;
};

HttpServer::HttpServer(HttpServerLimits limits, Clock* clock) : limits_(limits), clock_(clock) {
  if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
}

HttpServer::~HttpServer() {
  for (auto& c : conns_) {
    if (c->state != Conn::State::kClosed) Close(*c);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
}

void HttpServer::Get(std::string path, Handler handler) {
  routes_[std::move(path)] = std::move(handler);
}

void HttpServer::SetFilter(Filter filter) { filter_ = std::move(filter); }

HttpServer::Counters HttpServer::counters() const {
  return {counters_.accepted.load(), counters_.refused.load(), counters_.requests.load(),
          counters_.bad_requests.load(), counters_.idle_closed.load()};
}

void HttpServer::Stop() {
  stop_.store(true);
  Wake();
}

void HttpServer::Wake() {
  if (wake_[1] >= 0) {
    char b = 1;
    ssize_t n = ::write(wake_[1], &b, 1);
    (void)n;
  }
}

Result<int> HttpServer::Bind(const std::string& listen) {
  if (wake_[0] < 0) return ErrnoError("http: pipe", errno);
  std::string host;
  int port = 0;
  EK_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_s = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res); rc != 0) {
    return InvalidArgumentError(
        fmt::format("{}: cannot resolve {}: {}", listen, host, ::gai_strerror(rc)));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) return UnavailableError(fmt::format("cannot listen on {}: {}", listen, why));
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  int bound = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(ss).sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in&>(ss).sin_port);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = fd;
  return bound;
}

Status HttpServer::Serve() {
  if (listen_fd_ < 0) return FailedPreconditionError("http: Serve() before Bind()");
  limits_.max_connections = std::min(limits_.max_connections, DescriptorBudget());
  std::vector<pollfd> fds;
  Status result;
  while (!stop_.load()) {
    double now = clock_->Monotonic();
    bool accepting = now >= accept_paused_until_;
    double next = now + 1;
    if (!accepting) next = std::min(next, accept_paused_until_);
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (const auto& c : conns_) {
      short events = c->state == Conn::State::kWriting ? POLLOUT : POLLIN;
      fds.push_back({c->fd, events, 0});
      next = std::min(next, Deadline(*c));
    }
    int timeout_ms = static_cast<int>(std::clamp(std::ceil((next - now) * 1000), 0.0, 1000.0));
    int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      result = ErrnoError("http: poll", errno);
      break;
    }
    now = clock_->Monotonic();
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (::read(wake_[0], buf, sizeof buf) > 0) {
      }
    }
    if (stop_.load()) break;
    const size_t polled = conns_.size();
    for (size_t i = 0; i < polled; ++i) {
      Conn& c = *conns_[i];
      short re = fds[i + 2].revents;
      if (re == 0 || c.state == Conn::State::kClosed) continue;
      if (re & (POLLERR | POLLNVAL)) {
        Close(c);
        continue;
      }
      if (c.state == Conn::State::kWriting && (re & (POLLOUT | POLLHUP))) OnWritable(c, now);
      bool reading = c.state == Conn::State::kReading || c.state == Conn::State::kLingering;
      if (reading && (re & (POLLIN | POLLHUP))) {
        OnReadable(c, now);
      }
    }
    if (fds[1].revents & POLLIN) AcceptAll(now);
    for (auto& c : conns_) {
      if (c->state == Conn::State::kClosed || now < Deadline(*c)) continue;
      if (c->state == Conn::State::kReading && c->request_start >= 0) {
        Refuse(*c, 408, now);  // slow loris: the request never completed
      } else {
        if (c->state == Conn::State::kReading) counters_.idle_closed.fetch_add(1);
        Close(*c);
      }
    }
    std::erase_if(conns_,
                  [](const std::unique_ptr<Conn>& c) { return c->state == Conn::State::kClosed; });
  }
  for (auto& c : conns_) {
    if (c->state != Conn::State::kClosed) Close(*c);
  }
  conns_.clear();
  return result;
}

double HttpServer::Deadline(const Conn& c) const {
  switch (c.state) {
    case Conn::State::kReading:
      return c.request_start >= 0 ? c.request_start + limits_.request_timeout_s
                                  : c.last_active + limits_.idle_timeout_s;
    case Conn::State::kWriting:
      return c.last_active + limits_.write_timeout_s;
    case Conn::State::kLingering:
      return c.linger_until;
    case Conn::State::kClosed:
      break;
  }
  return 1e300;
}

void HttpServer::AcceptAll(double now) {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until_ = now + 0.1;  // out of descriptors: let closes catch up
      }
      return;
    }
    counters_.accepted.fetch_add(1);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = PeerAddress(ss);
    c->last_active = now;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (static_cast<int>(conns_.size()) >= limits_.max_connections) {
      // Over the total cap: no buffer, no linger, just a best-effort 503.
      static constexpr std::string_view kBusy =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      ssize_t w = ::send(fd, kBusy.data(), kBusy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)w;
      ::close(fd);
      counters_.refused.fetch_add(1);
      continue;
    }
    open_.fetch_add(1);
    int& count = per_client_[c->peer];
    Conn& ref = *c;
    conns_.push_back(std::move(c));
    if (count >= limits_.max_per_client) {
      ref.counted = false;
      counters_.refused.fetch_add(1);
      Refuse(ref, 503, now);
      continue;
    }
    ++count;
  }
}

void HttpServer::OnReadable(Conn& c, double now) {
  char buf[kReadChunk];
  while (true) {
    size_t want = sizeof buf;
    if (c.state == Conn::State::kReading) {
      // Read no more than what can still be a valid head: one byte over the
      // limit is enough to refuse it.
      size_t cap = limits_.max_header_bytes + 1;
      if (c.in.size() >= cap) break;
      want = std::min(want, cap - c.in.size());
    }
    ssize_t n = ::recv(c.fd, buf, want, 0);
    if (n > 0) {
      c.last_active = now;
      if (c.state == Conn::State::kReading) c.in.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < want) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // EOF or an error: the client is gone (or done sending).
    if (c.state == Conn::State::kLingering || n < 0) {
      Close(c);
      return;
    }
    c.peer_done = true;
    break;
  }
  if (c.state != Conn::State::kReading) return;
  ProcessInput(c, now);
  if (c.state == Conn::State::kReading && c.peer_done) Close(c);
}

HttpServer::Parsed HttpServer::ParseRequest(std::string_view in, const HttpServerLimits& limits) {
  Parsed p;
  // Blank lines before a request line are allowed (RFC 9112 2.2).
  while (p.skipped < in.size() && (in[p.skipped] == '\r' || in[p.skipped] == '\n')) ++p.skipped;
  in.remove_prefix(p.skipped);
  if (in.empty()) return p;
  auto refuse = [&p](int status) {
    p.kind = Parsed::Kind::kRefuse;
    p.status = status;
    return p;
  };
  p.kind = Parsed::Kind::kIncomplete;
  size_t eol = in.find('\n');
  std::string_view line = in.substr(0, eol);
  if (int bad = CheckRequestLine(line, eol != kNpos)) return refuse(bad);
  if (line.size() > limits.max_request_line) return refuse(414);
  if (eol == kNpos) {
    if (in.size() > limits.max_header_bytes) return refuse(431);
    return p;
  }
  size_t end = FindHeaderEnd(in);
  if (end == kNpos ? in.size() > limits.max_header_bytes : end > limits.max_header_bytes)
    return refuse(431);
  if (end == kNpos) return p;
  Head head;
  if (int bad = ParseHead(in.substr(0, end), limits.max_headers, &p.request, &head))
    return refuse(bad);
  if (p.request.method != "GET" && p.request.method != "HEAD") return refuse(405);
  if (head.body) return refuse(413);  // GET-only endpoints: no body is read, ever
  p.kind = Parsed::Kind::kRequest;
  p.length = end;
  p.keep_alive = head.http10 ? head.keep_alive : !head.close;
  return p;
}

void HttpServer::ProcessInput(Conn& c, double now) {
  while (c.state == Conn::State::kReading) {
    Parsed p = ParseRequest(c.in, limits_);
    c.in.erase(0, p.skipped);
    if (p.kind == Parsed::Kind::kEmpty) {
      c.request_start = -1;
      return;
    }
    if (c.request_start < 0) c.request_start = now;
    if (p.kind == Parsed::Kind::kRefuse) return Refuse(c, p.status, now);
    if (p.kind == Parsed::Kind::kIncomplete) return;
    Request req = std::move(p.request);
    c.in.erase(0, p.length);
    c.request_start = -1;
    req.peer = c.peer;
    counters_.requests.fetch_add(1);
    ++c.requests;
    bool keep_alive =
        p.keep_alive && c.requests < limits_.max_requests_per_connection && !c.peer_done;
    Response res;
    std::optional<Response> filtered = filter_ ? filter_(req) : std::nullopt;
    if (filtered) {
      res = std::move(*filtered);
    } else if (auto it = routes_.find(req.path); it != routes_.end()) {
      try {
        res = it->second(req);
      } catch (const std::exception& e) {
        // A handler's bug (or no memory) costs one answer, not the server.
        res = Response::Text(500, std::string("internal error: ") + e.what() + "\n");
      }
    } else {
      res = Response::Text(404, "not found: " + req.path + "\n");
    }
    Answer(c, std::move(res), req.method == "HEAD", keep_alive, now);
  }
}

void HttpServer::Answer(Conn& c, Response r, bool head, bool keep_alive, double now) {
  std::shared_ptr<const std::string> body = std::move(r.shared_body);
  if (!body) body = std::make_shared<const std::string>(std::move(r.body));
  std::string h = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n", r.status,
      StatusText(r.status), r.content_type, body->size(), keep_alive ? "keep-alive" : "close");
  for (const auto& [k, v] : r.headers) h += k + ": " + v + "\r\n";
  h += "\r\n";
  c.out_head = std::move(h);
  c.out_body = head ? nullptr : std::move(body);
  c.out_off = 0;
  c.close_after_write = !keep_alive;
  c.state = Conn::State::kWriting;
  c.last_active = now;
  OnWritable(c, now);
}

void HttpServer::Refuse(Conn& c, int status, double now) {
  if (status != 503) counters_.bad_requests.fetch_add(1);
  std::string why;
  switch (status) {
    case 400:
      why = "bad request: not an HTTP/1.1 request line or header\n";
      break;
    case 405:
      why = "read-only: GET or HEAD only\n";
      break;
    case 408:
      why = "request not complete in time\n";
      break;
    case 413:
      why = "no request body accepted: these endpoints are GET-only\n";
      break;
    case 414:
      why = fmt::format("request line over {} bytes\n", limits_.max_request_line);
      break;
    case 431:
      why = fmt::format("request headers over {} bytes\n", limits_.max_header_bytes);
      break;
    case 503:
      why = fmt::format("too many connections from {}\n", c.peer);
      break;
    default:
      why = std::string(StatusText(status)) + "\n";
  }
  Response r = Response::Text(status, std::move(why));
  if (status == 405) r.headers.emplace_back("Allow", "GET, HEAD");
  c.in.clear();
  c.request_start = -1;
  // Writing this answer may finish (and close) right away: the connection
  // must not be read as a new request meanwhile, hence the state first.
  Answer(c, std::move(r), false, false, now);
}

void HttpServer::OnWritable(Conn& c, double now) {
  while (true) {
    iovec iov[2];
    int n = 0;
    const size_t head_size = c.out_head.size();
    if (c.out_off < head_size) iov[n++] = {c.out_head.data() + c.out_off, head_size - c.out_off};
    size_t body_off = c.out_off > head_size ? c.out_off - head_size : 0;
    size_t body_size = c.out_body ? c.out_body->size() : 0;
    if (body_off < body_size) {
      iov[n++] = {const_cast<char*>(c.out_body->data()) + body_off, body_size - body_off};
    }
    if (n == 0) break;
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.out_off += static_cast<size_t>(w);
      c.last_active = now;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Close(c);
    return;
  }
  // All written.
  c.out_head.clear();
  c.out_body.reset();
  c.out_off = 0;
  if (c.close_after_write) {
    StartClose(c, now);
    return;
  }
  c.state = Conn::State::kReading;
  c.last_active = now;
  // A pipelined request may already be waiting.
  if (!c.in.empty()) ProcessInput(c, now);
}

void HttpServer::StartClose(Conn& c, double now) {
  if (c.peer_done) {
    Close(c);
    return;
  }
  // Half-close and drain for a moment: closing with unread bytes would send a
  // reset that can destroy the answer before the client reads it.
  ::shutdown(c.fd, SHUT_WR);
  c.in.clear();
  c.state = Conn::State::kLingering;
  c.linger_until = now + limits_.linger_s;
}

void HttpServer::Close(Conn& c) {
  if (c.state == Conn::State::kClosed) return;
  ::close(c.fd);
  c.fd = -1;
  c.state = Conn::State::kClosed;
  open_.fetch_sub(1);
  if (c.counted) {
    auto it = per_client_.find(c.peer);
    if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  }
}

}  // namespace ek::net
