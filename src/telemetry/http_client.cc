// The only file that includes cpp-httplib (a large header); see prometheus.h.
#include <fmt/format.h>
#include <httplib.h>

#include <cmath>

#include "telemetry/http_request.h"
#include "telemetry/prometheus.h"

namespace ek::telemetry {

Result<HttpReply> HttpRequest(const std::string& method, const std::string& url, const std::string& body,
                              const std::vector<std::pair<std::string, std::string>>& headers, double timeout_s) {
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
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  httplib::Result res = method == "POST" ? client.Post(path, h, body, "application/json") : client.Get(path, h);
  if (!res) return UnavailableError(fmt::format("{} {}: {}", method, url, httplib::to_string(res.error())));
  return HttpReply{res->status, std::move(res->body)};
}

namespace {

class HttplibClient : public HttpClient {
 public:
  Result<std::string> Get(const std::string& url, double timeout_s) override {
    auto reply = HttpRequest("GET", url, "", {}, timeout_s);
    if (!reply.ok()) {
      if (reply.status().code() != StatusCode::kUnavailable) return reply.status();
      return UnavailableError("scrape failed: " + reply.status().message());
    }
    if (reply->status != 200) {
      return UnavailableError(fmt::format("scrape failed: HTTP {}", reply->status));
    }
    return std::move(reply->body);
  }
};

}  // namespace

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<HttplibClient>(); }

}  // namespace ek::telemetry
