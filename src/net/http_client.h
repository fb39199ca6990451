// The one HTTP client: the watcher's agent polls and alert sinks, and the
// Prometheus scraper behind triage and the agent's telemetry, all go through it.
// cpp-httplib (Debian's libcpp-httplib) does the protocol; this adds what it
// lacks, errors a person can act on. httplib names a transport failure with
// one word ("Connection", "Read"); here the error names the method, the URL,
// host:port and what failed, asking the OS for the reason where the connection
// itself failed:
//   GET http://n1:9464/status: cannot connect to n1:9464: Connection refused
//   GET http://n1:9464/status: cannot resolve n1: Name or service not known
//   GET http://n1:9464/status: no answer from n1:9464 within 2.0 s (connect timed out)
//   GET http://n1:9464/status: n1:9464 accepted the connection but sent no response within 2.0 s
//   (read timed out) GET http://n1:9400/metrics: HTTP 503 (Service Unavailable) from n1:9400
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ek::net {

struct HttpResponse {
  int status = 0;
  std::string body;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// The HTTP client seam (a fake in tests). Implementations are thread-safe:
// agents and exporters are polled in parallel through the core thread pool.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // GET (body ignored) or POST with a JSON body; `timeout_s` bounds connect,
  // read and write each. A transport failure is Unavailable, its message as
  // above; any HTTP status comes back as a response. A URL that cannot be
  // used (no scheme, https without TLS support) is InvalidArgument.
  virtual Result<HttpResponse> Send(const std::string& method, const std::string& url,
                                    const std::string& body, const HttpHeaders& headers,
                                    double timeout_s) = 0;
  // GET `url`: the body on 200; any other status is Unavailable naming the URL,
  // the status and host:port.
  Result<std::string> Get(const std::string& url, double timeout_s);
};

// cpp-httplib underneath, one connection per request.
std::unique_ptr<HttpClient> MakeHttpClient();

// "http://[::1]:9464/x" -> "::1", "[::1]:9464"; a missing port is the scheme's.
struct UrlAuthority {
  std::string host;       // without brackets
  std::string port;       // "9464", or "80"/"443" from the scheme
  std::string authority;  // host:port as written in messages
};
UrlAuthority AuthorityOf(std::string_view url);

// Why a TCP connection to `url`'s host and port cannot be made, as the OS says
// it (see the header comment), by trying once; "" when it connects.
// The standard reason phrase of an HTTP status ("Not Found"); empty for one
// evenkeel neither sends nor names.
std::string_view ReasonPhrase(int status);

std::string DescribeConnectFailure(const std::string& url, double timeout_s);

}  // namespace ek::net
