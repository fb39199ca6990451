// The table reader (arrow_source.cc, over libarrow and libparquet) is a module of its own,
// libevenkeel_arrow.so, that arrow_loader.cc opens the first time an input is a table.
// Loading pyarrow's libarrow and libparquet costs every process about 12 ms of start-up
// (their relocations, the OpenSSL each bundles initialising its tables) and starts
// jemalloc's background thread, whether or not an input is a table; a JSON-lines pack
// now pays none of it. Internal to ingest; only built where Arrow C++ is found.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "ingest/source.h"

namespace ek::ingest {

// What the module hands the loader: arrow_source.h's functions. The module is built
// from the same sources as the binary that loads it; `abi` and the sizes below catch a
// module left from another build of evenkeel.
struct ArrowModuleApi {
  uint32_t abi;
  uint32_t sizes;
  Result<std::unique_ptr<RecordSource>> (*open)(const std::string& path, FileKind kind,
                                                const OpenOptions& options);
  Result<uint64_t> (*count)(const std::string& path, FileKind kind, const OpenOptions& options);
  Result<InputIdentity> (*identify)(const std::string& path, FileKind kind,
                                    const OpenOptions& options);
};
inline constexpr uint32_t kArrowModuleAbi = 1;
inline constexpr uint32_t ArrowModuleSizes() {
  return static_cast<uint32_t>(sizeof(ArrowModuleApi) << 24 | sizeof(OpenOptions) << 12 |
                               sizeof(InputIdentity) << 6 | sizeof(Status));
}

}  // namespace ek::ingest

// The module's one exported symbol.
extern "C" const ek::ingest::ArrowModuleApi* ek_arrow_module_api();
