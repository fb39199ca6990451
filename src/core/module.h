// The modules evenkeel opens on first use, each holding libraries most commands never need
// (libevenkeel_arrow.so: Apache Arrow for tables; libevenkeel_http.so: cpp-httplib with
// OpenSSL). Each module is built from the same sources as the binary and exports one
// function that hands back its table of functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ek {

// Opens the module file `name` beside the running executable (a binary copied or
// installed together with its modules), else at `built_at` (where the build tree made
// it), with RTLD_NOW | RTLD_LOCAL: its libraries' symbols stay out of the global scope
// the rest of the process binds against. Hands its symbol `entry` to `take`, which calls
// it as the function it is and returns the table it hands back when that is this build's
// (the module's ABI number and the sizes of what crosses), else null. Else Unavailable,
// naming the path: not found (both places named), not loadable (dlerror's reason), or not
// this evenkeel's `what` (another build's module). Never a fall-back from a module that
// does not load to the other place. Never closed.
Result<const void*> OpenModule(const std::string& name, const std::string& built_at,
                               const char* entry, const std::function<const void*(void*)>& take,
                               std::string_view what);

// OpenModule once per process for a module whose table `Api` starts with its `abi` and
// `sizes` (uint32_t each): the first call opens it, every call gets that answer. The
// table, or why there is none.
template <class Api>
Result<const Api*> OpenModuleOnce(const char* name, const char* built_at, const char* entry,
                                  uint32_t abi, uint32_t sizes, std::string_view what) {
  static const Result<const void*> opened = OpenModule(
      name, built_at, entry,
      [abi, sizes](void* symbol) -> const void* {
        const Api* api = reinterpret_cast<const Api* (*)()>(symbol)();
        return api && api->abi == abi && api->sizes == sizes ? api : nullptr;
      },
      what);
  if (!opened.ok()) return opened.status();
  return static_cast<const Api*>(*opened);
}

}  // namespace ek
