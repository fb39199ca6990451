#include <fmt/format.h>
#include <httplib.h>

#include <cmath>

#include "watch/http.h"

namespace ek::watch {

namespace {

class HttplibClient : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url, const std::string& body,
                            const std::vector<std::pair<std::string, std::string>>& headers,
                            double timeout_s) override {
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
    httplib::Result res = method == "POST" ? client.Post(path, h, body, "application/json")
                                           : client.Get(path, h);
    if (!res) {
      return UnavailableError(fmt::format("{} {}: {}", method, url, httplib::to_string(res.error())));
    }
    return HttpResponse{res->status, std::move(res->body)};
  }
};

}  // namespace

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<HttplibClient>(); }

Status SplitHostPort(const std::string& s, std::string* host, int* port) {
  size_t colon = s.rfind(':');
  std::string p = colon == std::string::npos ? s : s.substr(colon + 1);
  *host = colon == std::string::npos ? "127.0.0.1" : s.substr(0, colon);
  if (host->empty()) *host = "127.0.0.1";
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(p) > 65535) {
    return InvalidArgumentError(fmt::format("'{}': expected HOST:PORT", s));
  }
  *port = std::stoi(p);
  return Status::Ok();
}

}  // namespace ek::watch
