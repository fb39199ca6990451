// The agent's (and the live page's) HTTP request handling: the bytes a client
// sends, read the way the server's poll loop reads them (watch/http_server.h:
// HttpServer::ParseRequest over the connection's buffer, request after
// pipelined request), under the default limits and under tight ones, then what
// a handler reads of a request (headers, query parameters, the agent's bearer
// token check). Invariants checked beyond "no crash":
//   - a request that parses whole was never refused while it arrived: every
//     prefix of it reads as incomplete (the server answers at the byte that
//     makes a request bad, and must not answer early);
//   - the server consumes at least one byte per request, and no more than it has.
#include <algorithm>

#include "fuzz/fuzz_util.h"
#include "net/http_server.h"

using ek::net::HttpServer;
using ek::net::HttpServerLimits;

namespace {

using Kind = HttpServer::Parsed::Kind;

void CheckPrefixes(std::string_view request, const HttpServerLimits& limits) {
  // Every cut of a short request; 64 spread cuts of a long one.
  size_t step = std::max<size_t>(1, request.size() / 64);
  for (size_t cut = 1; cut < request.size(); cut += step) {
    HttpServer::Parsed p = HttpServer::ParseRequest(request.substr(0, cut), limits);
    if (p.kind == Kind::kRequest || p.kind == Kind::kRefuse)
      ek::fuzz::Fail("a prefix of a good request was answered");
  }
}

void Serve(std::string_view in, const HttpServerLimits& limits) {
  for (int requests = 0; requests < 64 && !in.empty(); ++requests) {
    HttpServer::Parsed p = HttpServer::ParseRequest(in, limits);
    if (p.skipped > in.size()) ek::fuzz::Fail("skipped past the input");
    in.remove_prefix(p.skipped);
    if (p.kind != Kind::kRequest) return;  // read more, answer the refusal, or done
    if (p.length == 0 || p.length > in.size())
      ek::fuzz::Fail("a request of no bytes, or past the input");
    CheckPrefixes(in.substr(0, p.length), limits);
    const HttpServer::Request& req = p.request;
    (void)req.Header("Host");
    (void)req.QueryParam("since");
    (void)req.QueryParam("");
    std::string auth = req.Header("Authorization");
    std::string_view given = std::string_view(auth).substr(std::min<size_t>(auth.size(), 7));
    (void)ek::net::ConstantTimeEquals(given, "secret-token");
    in.remove_prefix(p.length);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = ek::fuzz::Bytes(data, size);
  Serve(in, HttpServerLimits{});
  HttpServerLimits tight;
  tight.max_request_line = 48;
  tight.max_header_bytes = 160;
  tight.max_headers = 4;
  Serve(in, tight);
  return 0;
}
