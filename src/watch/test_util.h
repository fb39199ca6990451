// Helpers for the watch tests.
#pragma once

#include "core/scratch_dir_testing.h"

namespace ek::watch::testing {

using ek::testing::ScratchDir;

}  // namespace ek::watch::testing
