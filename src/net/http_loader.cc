// MakeHttpClient: a client whose first request opens the module libevenkeel_http.so
// (http_module.h says why it is one), every request then going through the Send it hands
// back. Looked for beside the running executable first (a binary copied or installed
// together with its module), then where this build tree made it.
#include <fmt/format.h>

#include <string>

#include "core/module.h"
#include "net/http_client.h"
#include "net/http_module.h"

#ifndef EK_HTTP_MODULE_PATH
#error "EK_HTTP_MODULE_PATH: the built module's path (src/net/CMakeLists.txt)"
#endif

namespace ek::net {

namespace {

constexpr const char* kModuleName = "libevenkeel_http.so";

class ModuleClient : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url,
                            const std::string& body, const HttpHeaders& headers,
                            double timeout_s) override {
    // RTLD_LOCAL (OpenModule) keeps cpp-httplib's, OpenSSL's and brotli's symbols out of
    // the global scope the rest of the process binds against. Never closed: requests may
    // run on any thread until exit.
    auto api = OpenModuleOnce<HttpModuleApi>(kModuleName, EK_HTTP_MODULE_PATH, "ek_http_module_api",
                                             kHttpModuleAbi, HttpModuleSizes(), "HTTP client");
    if (!api.ok()) {
      return Status(api.status().code(),
                    fmt::format("{} {}: evenkeel sends HTTP through its module: {}", method, url,
                                api.status().message()));
    }
    return (*api)->send(method, url, body, headers, timeout_s);
  }
};

}  // namespace

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<ModuleClient>(); }

}  // namespace ek::net
