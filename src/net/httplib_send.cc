// libevenkeel_http.so (http_module.h): HttpClient::Send over cpp-httplib, the only file
// that includes its client (a large header), and the module's one export.
#include <fmt/format.h>
#include <httplib.h>

#include <cmath>
#include <string>

#include "net/http_client.h"
#include "net/http_module.h"

namespace ek::net {

namespace {

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

Result<HttpResponse> Send(const std::string& method, const std::string& url,
                          const std::string& body, const HttpHeaders& headers, double timeout_s) {
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

constexpr HttpModuleApi kApi = {kHttpModuleAbi, HttpModuleSizes(), Send};

}  // namespace
}  // namespace ek::net

extern "C" __attribute__((visibility("default"))) const ek::net::HttpModuleApi*
ek_http_module_api() {
  return &ek::net::kApi;
}
