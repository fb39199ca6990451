#include "core/module.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

namespace ek {

namespace {

std::string BesideExecutable(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (exe.parent_path() / name).string();
}

}  // namespace

Result<const void*> OpenModule(const std::string& name, const std::string& built_at,
                               const char* entry, const std::function<const void*(void*)>& take,
                               std::string_view what) {
  std::string tried;
  for (const std::string& path : {BesideExecutable(name), built_at}) {
    if (path.empty() || ::access(path.c_str(), F_OK) != 0) {
      if (!path.empty()) tried += fmt::format("{}{} (absent)", tried.empty() ? "" : ", ", path);
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      return UnavailableError(fmt::format("cannot load {}: {}", path, why ? why : "?"));
    }
    void* symbol = ::dlsym(handle, entry);
    const void* api = symbol ? take(symbol) : nullptr;
    if (!api) {
      return UnavailableError(
          fmt::format("{} is not this evenkeel's {} (another build's module): rebuild, or put this "
                      "build's {} beside the executable",
                      path, what, name));
    }
    return api;
  }
  return UnavailableError(fmt::format("{} not found (looked for {})", name, tried));
}

}  // namespace ek
