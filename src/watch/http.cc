#include "watch/http.h"

#include "core/parse.h"

#include <fmt/format.h>

#include "telemetry/http_request.h"

namespace ek::watch {

namespace {

class HttplibClient : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url, const std::string& body,
                            const std::vector<std::pair<std::string, std::string>>& headers,
                            double timeout_s) override {
    EK_ASSIGN_OR_RETURN(telemetry::HttpReply reply, telemetry::HttpRequest(method, url, body, headers, timeout_s));
    return HttpResponse{reply.status, std::move(reply.body)};
  }
};

}  // namespace

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<HttplibClient>(); }

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
