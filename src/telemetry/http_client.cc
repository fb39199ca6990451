// The only file that includes cpp-httplib (a large header); see prometheus.h.
#include <fmt/format.h>
#include <httplib.h>

#include <cmath>

#include "telemetry/prometheus.h"

namespace ek::telemetry {

namespace {

class HttplibClient : public HttpClient {
 public:
  Result<std::string> Get(const std::string& url, double timeout_s) override {
    size_t a = url.find("://");
    if (a == std::string::npos) return InvalidArgumentError(fmt::format("{}: not a URL", url));
    size_t slash = url.find('/', a + 3);
    std::string base = url.substr(0, slash);
    std::string path = slash == std::string::npos ? "/" : url.substr(slash);
    httplib::Client client(base);
    if (!client.is_valid()) return InvalidArgumentError(fmt::format("{}: unsupported URL", url));
    auto sec = static_cast<time_t>(timeout_s);
    auto usec = static_cast<time_t>((timeout_s - std::floor(timeout_s)) * 1e6);
    client.set_connection_timeout(sec, usec);
    client.set_read_timeout(sec, usec);
    client.set_write_timeout(sec, usec);
    auto res = client.Get(path);
    if (!res) {
      return UnavailableError(fmt::format("scrape failed: {}", httplib::to_string(res.error())));
    }
    if (res->status != 200) {
      return UnavailableError(fmt::format("scrape failed: HTTP {}", res->status));
    }
    return std::move(res->body);
  }
};

}  // namespace

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<HttplibClient>(); }

}  // namespace ek::telemetry
