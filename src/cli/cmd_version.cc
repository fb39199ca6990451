#include <cstdio>

#include "cli/commands.h"
#include "core/version.h"

namespace ek::cli {

int RunVersion(int, char**) {
  std::printf("evenkeel %s\n", kVersion);
  return 0;
}

}  // namespace ek::cli
