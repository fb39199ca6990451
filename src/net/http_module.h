// The HTTP client's transport (cpp-httplib) is a module of its own, libevenkeel_http.so,
// that http_loader.cc opens the first time a request is sent. Debian's libcpp-httplib
// brings libssl, libcrypto and brotli with it, and loading them cost every evenkeel
// process about 5 ms of start-up (their relocations and OpenSSL's initialisation),
// though only the watcher and triage's Prometheus source ever send a request. Internal
// to net.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "net/http_client.h"

namespace ek::net {

// What the module hands the loader. It is built from the same sources as the binary that
// loads it; `abi` and the sizes catch a module left from another build of evenkeel.
struct HttpModuleApi {
  uint32_t abi;
  uint32_t sizes;
  // HttpClient::Send, as the header says; thread-safe.
  Result<HttpResponse> (*send)(const std::string& method, const std::string& url,
                               const std::string& body, const HttpHeaders& headers,
                               double timeout_s);
};
inline constexpr uint32_t kHttpModuleAbi = 1;
inline constexpr uint32_t HttpModuleSizes() {
  return static_cast<uint32_t>(sizeof(HttpModuleApi) << 24 | sizeof(HttpResponse) << 12 |
                               sizeof(HttpHeaders) << 6 | sizeof(Status));
}

}  // namespace ek::net

// The module's one exported symbol.
extern "C" const ek::net::HttpModuleApi* ek_http_module_api();
