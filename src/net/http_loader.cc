// MakeHttpClient: a client whose first request opens the module libevenkeel_http.so
// (http_module.h says why it is one), every request then going through the Send it hands
// back. Looked for beside the running executable first (a binary copied or installed
// together with its module), then where this build tree made it.
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "net/http_client.h"
#include "net/http_module.h"

#ifndef EK_HTTP_MODULE_PATH
#error "EK_HTTP_MODULE_PATH: the built module's path (src/net/CMakeLists.txt)"
#endif

namespace ek::net {

namespace {

constexpr const char* kModuleName = "libevenkeel_http.so";

struct Loaded {
  const HttpModuleApi* api = nullptr;
  Status status;
};

std::string BesideExecutable() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (exe.parent_path() / kModuleName).string();
}

Loaded Load() {
  Loaded out;
  std::string tried;
  for (const std::string& path : {BesideExecutable(), std::string(EK_HTTP_MODULE_PATH)}) {
    if (path.empty() || ::access(path.c_str(), F_OK) != 0) {
      if (!path.empty()) tried += fmt::format("{}{} (absent)", tried.empty() ? "" : ", ", path);
      continue;
    }
    // RTLD_LOCAL: cpp-httplib's, OpenSSL's and brotli's symbols stay out of the global
    // scope the rest of the process binds against.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      out.status = UnavailableError(fmt::format("cannot load {}: {}", path, why ? why : "?"));
      return out;
    }
    auto entry =
        reinterpret_cast<const HttpModuleApi* (*)()>(::dlsym(handle, "ek_http_module_api"));
    const HttpModuleApi* api = entry ? entry() : nullptr;
    if (!api || api->abi != kHttpModuleAbi || api->sizes != HttpModuleSizes()) {
      out.status = UnavailableError(fmt::format(
          "{} is not this evenkeel's HTTP client (another build's module): rebuild, or put "
          "this build's {} beside the executable",
          path, kModuleName));
      return out;
    }
    out.api = api;  // never closed: requests may run on any thread until exit
    return out;
  }
  out.status = UnavailableError(fmt::format("{} not found (looked for {})", kModuleName, tried));
  return out;
}

const Loaded& Module() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = Load(); });
  return loaded;
}

class ModuleClient : public HttpClient {
 public:
  Result<HttpResponse> Send(const std::string& method, const std::string& url,
                            const std::string& body, const HttpHeaders& headers,
                            double timeout_s) override {
    const Loaded& m = Module();
    if (!m.api) {
      return Status(m.status.code(),
                    fmt::format("{} {}: evenkeel sends HTTP through its module: {}", method, url,
                                m.status.message()));
    }
    return m.api->send(method, url, body, headers, timeout_s);
  }
};

}  // namespace

std::unique_ptr<HttpClient> MakeHttpClient() { return std::make_unique<ModuleClient>(); }

}  // namespace ek::net
