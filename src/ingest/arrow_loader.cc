// arrow_source.h's functions in a build that reads tables: the first call opens the module
// libevenkeel_arrow.so (arrow_module.h says why it is one) and every call goes through the
// functions it hands back. Looked for beside the running executable first (a binary
// copied or installed together with its module), then where this build tree made it.
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "ingest/arrow_module.h"
#include "ingest/arrow_source.h"

#ifndef EK_ARROW_MODULE_PATH
#error "EK_ARROW_MODULE_PATH: the built module's path (src/ingest/CMakeLists.txt)"
#endif

namespace ek::ingest {

namespace {

constexpr const char* kModuleName = "libevenkeel_arrow.so";

struct Loaded {
  const ArrowModuleApi* api = nullptr;
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
  for (const std::string& path : {BesideExecutable(), std::string(EK_ARROW_MODULE_PATH)}) {
    if (path.empty() || ::access(path.c_str(), F_OK) != 0) {
      if (!path.empty()) tried += fmt::format("{}{} (absent)", tried.empty() ? "" : ", ", path);
      continue;
    }
    // RTLD_LOCAL: libarrow's and libparquet's symbols (libparquet's vendored simdjson among
    // them) stay out of the global scope the rest of the process binds against.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      out.status = UnavailableError(fmt::format("cannot load {}: {}", path, why ? why : "?"));
      return out;
    }
    auto entry =
        reinterpret_cast<const ArrowModuleApi* (*)()>(::dlsym(handle, "ek_arrow_module_api"));
    const ArrowModuleApi* api = entry ? entry() : nullptr;
    if (!api || api->abi != kArrowModuleAbi || api->sizes != ArrowModuleSizes()) {
      out.status = UnavailableError(fmt::format(
          "{} is not this evenkeel's table reader (another build's module): rebuild, or "
          "put this build's {} beside the executable",
          path, kModuleName));
      return out;
    }
    out.api = api;  // never closed: its sources may outlive any caller's scope
    return out;
  }
  out.status = UnavailableError(fmt::format("{} not found (looked for {})", kModuleName, tried));
  return out;
}

Result<const ArrowModuleApi*> Api(const std::string& path, FileKind kind) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = Load(); });
  if (loaded.api) return loaded.api;
  return Status(loaded.status.code(),
                fmt::format("{}: a {} input, which evenkeel reads with Apache Arrow through its "
                            "module: {}",
                            path, FileKindName(kind), loaded.status.message()));
}

}  // namespace

bool ArrowAvailable() { return true; }

Result<std::unique_ptr<RecordSource>> OpenArrowSource(const std::string& path, FileKind kind,
                                                      const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(const ArrowModuleApi* api, Api(path, kind));
  return api->open(path, kind, options);
}

Result<uint64_t> CountArrowRows(const std::string& path, FileKind kind,
                                const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(const ArrowModuleApi* api, Api(path, kind));
  return api->count(path, kind, options);
}

Result<InputIdentity> IdentifyArrowInput(const std::string& path, FileKind kind,
                                         const OpenOptions& options) {
  EK_ASSIGN_OR_RETURN(const ArrowModuleApi* api, Api(path, kind));
  return api->identify(path, kind, options);
}

}  // namespace ek::ingest
