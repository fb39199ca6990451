// A small HTTP/1.1 server for read-only GET endpoints (the agent's /metrics
// and /status, the watcher's live page), built to stay responsive under
// hostile or broken clients.
//
// One thread runs a poll() loop over non-blocking sockets; nothing a client
// does can block it. A thread per connection (what cpp-httplib's server does)
// let 200 idle connections delay a Prometheus scrape by more than 10 s, and
// junk (binary bytes, a 100 KB request line, a huge Content-Length) got no
// answer while those connections stayed open. Here:
//   - every connection has a hard read-buffer limit: a request line over
//     max_request_line bytes is 414, request line plus headers over
//     max_header_bytes 431, a byte that cannot be in a request line 400, all
//     answered as soon as the bytes arrive;
//   - a method other than GET or HEAD is 405; a GET or HEAD with a body
//     (Content-Length > 0, or Transfer-Encoding) is 413: none is ever read;
//   - an idle keep-alive connection is closed after idle_timeout_s; a request
//     must be complete within request_timeout_s of its first byte (slow loris:
//     408, then closed);
//   - at most max_per_client connections per client address (and
//     max_connections in all): one more gets 503 and is closed at once;
//   - responses are written without blocking from a per-connection buffer, so
//     a client that does not read (or reads an 11 MB page slowly) delays no
//     one; a connection whose writes make no progress for write_timeout_s is
//     closed.
// After an error answer the server stops reading the request, half-closes and
// drains what the client still sends for a moment (lingering close), so the
// client reads the status instead of a reset.
//
// Handlers run on the loop thread: they must be quick (a cached body is
// shared, not copied, via Response::shared_body).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace ek::net {

struct HttpServerLimits {
  size_t max_request_line = 8192;  // bytes; over: 414
  size_t max_header_bytes = 8192;  // request line + headers; over: 431
  size_t max_headers = 64;         // header fields; over: 431
  double idle_timeout_s = 2;       // a keep-alive connection with no request in flight
  double request_timeout_s = 5;    // first byte of a request to its blank line; over: 408
  double write_timeout_s = 10;     // no write progress for this long: closed
  double linger_s = 1;             // draining after an error answer
  int max_per_client = 32;         // connections per client address; beyond: 503
  int max_connections = 1000;      // in all (also bounded by RLIMIT_NOFILE); beyond: 503
  int max_requests_per_connection = 1000;
};

class HttpServer {
 public:
  struct Request {
    std::string method;  // "GET" or "HEAD" by the time a handler sees it
    std::string target;  // as sent: "/metrics?x=1"
    std::string path;    // "/metrics"
    std::string query;   // "x=1"
    std::vector<std::pair<std::string, std::string>> headers;
    std::string peer;  // the client's address

    // The first header of that name (case-insensitive), or "".
    std::string Header(std::string_view name) const;
    // The percent-decoded value of a query parameter, or "".
    std::string QueryParam(std::string_view name) const;
  };

  struct Response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    // When set, sent instead of `body` without a copy (a big cached page).
    std::shared_ptr<const std::string> shared_body;
    std::vector<std::pair<std::string, std::string>> headers;

    static Response Text(int status, std::string body);
  };

  // What the front of a connection's input holds (ParseRequest).
  struct Parsed {
    enum class Kind {
      kEmpty,       // nothing but blank lines (allowed before a request, RFC 9112 2.2)
      kIncomplete,  // a request that may still become valid: read more
      kRequest,     // a complete GET or HEAD request without a body
      kRefuse,      // answer `status` and stop reading
    };
    Kind kind = Kind::kEmpty;
    size_t skipped = 0;       // blank lines before the request: consumed whatever the kind
    size_t length = 0;        // kRequest: its bytes after `skipped` (request line to blank line)
    int status = 0;           // kRefuse: 400, 405, 413, 414, 431 or 505
    Request request;          // kRequest (all but `peer`)
    bool keep_alive = false;  // kRequest: what the client asked for (version, Connection)
  };
  // Parses the request at the front of `in` (bytes as they arrived, possibly
  // ending mid-request, possibly followed by pipelined ones) under `limits`.
  // Pure: the server's whole reading of client bytes, and what fuzz/fuzz_http_request
  // feeds junk to.
  static Parsed ParseRequest(std::string_view in, const HttpServerLimits& limits);

  using Handler = std::function<Response(const Request&)>;
  // Runs before routing; a response it returns is sent instead (auth).
  using Filter = std::function<std::optional<Response>(const Request&)>;

  struct Counters {
    uint64_t accepted = 0;
    uint64_t refused = 0;  // over a per-client or total cap
    uint64_t requests = 0;
    uint64_t bad_requests = 0;  // answered 4xx by the server itself (400, 405, 408, 413, 414, 431)
    uint64_t idle_closed = 0;
  };

  // The timeouts run on `clock` (its monotonic time); a test passes a
  // FakeClock, moves it on and calls Wake().
  explicit HttpServer(HttpServerLimits limits = {}, Clock* clock = Clock::Default());
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes; set before Serve().
  void Get(std::string path, Handler handler);
  void SetFilter(Filter filter);

  // Binds "HOST:PORT" (port 0: any free one; "[::1]:PORT" for IPv6). Returns
  // the bound port.
  Result<int> Bind(const std::string& listen);
  // Serves until Stop(); blocks the calling thread.
  Status Serve();
  // Thread-safe and async-signal-safe: a flag and a byte down a pipe.
  void Stop();
  // Makes Serve() look at its clock now rather than at its next poll timeout
  // (up to a second): for a test that moved its FakeClock past a deadline.
  // Thread-safe and async-signal-safe.
  void Wake();

  // A snapshot; thread-safe.
  Counters counters() const;
  // Open connections now; thread-safe.
  int connections() const { return open_.load(); }

  static std::string_view StatusText(int status);

 private:
  struct Conn;
  void AcceptAll(double now);
  void OnReadable(Conn& c, double now);
  void OnWritable(Conn& c, double now);
  void ProcessInput(Conn& c, double now);
  void Answer(Conn& c, Response r, bool head, bool keep_alive, double now);
  void Refuse(Conn& c, int status, double now);
  void StartClose(Conn& c, double now);
  void Close(Conn& c);
  double Deadline(const Conn& c) const;

  HttpServerLimits limits_;
  Clock* clock_;
  std::map<std::string, Handler, std::less<>> routes_;
  Filter filter_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int> open_{0};
  std::vector<std::unique_ptr<Conn>> conns_;
  std::map<std::string, int> per_client_;
  double accept_paused_until_ = 0;  // after EMFILE: out of descriptors
  struct AtomicCounters {
    std::atomic<uint64_t> accepted{0}, refused{0}, requests{0}, bad_requests{0}, idle_closed{0};
  } counters_;
};

// Compares without an early exit, so the response time does not tell how much
// of a guessed token was right. An empty `expected` never matches.
bool ConstantTimeEquals(std::string_view given, std::string_view expected);

}  // namespace ek::net
