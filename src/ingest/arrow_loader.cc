// arrow_source.h's functions in a build that reads tables: the first call opens the module
// libevenkeel_arrow.so (arrow_module.h says why it is one) and every call goes through the
// functions it hands back. Looked for beside the running executable first (a binary
// copied or installed together with its module), then where this build tree made it.
#include <fmt/format.h>

#include <string>

#include "core/module.h"
#include "ingest/arrow_module.h"
#include "ingest/arrow_source.h"

#ifndef EK_ARROW_MODULE_PATH
#error "EK_ARROW_MODULE_PATH: the built module's path (src/ingest/CMakeLists.txt)"
#endif

namespace ek::ingest {

namespace {

constexpr const char* kModuleName = "libevenkeel_arrow.so";

Result<const ArrowModuleApi*> Api(const std::string& path, FileKind kind) {
  // RTLD_LOCAL (OpenModule) keeps libarrow's and libparquet's symbols (libparquet's vendored
  // simdjson among them) out of the global scope the rest of the process binds against.
  // Never closed: its sources may outlive any caller's scope.
  auto api =
      OpenModuleOnce<ArrowModuleApi>(kModuleName, EK_ARROW_MODULE_PATH, "ek_arrow_module_api",
                                     kArrowModuleAbi, ArrowModuleSizes(), "table reader");
  if (api.ok()) return api;
  return Status(api.status().code(),
                fmt::format("{}: a {} input, which evenkeel reads with Apache Arrow through its "
                            "module: {}",
                            path, FileKindName(kind), api.status().message()));
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
