// Helpers shared by the flightrec tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "flightrec/analyzer.h"
#include "flightrec/loader.h"

namespace ek::flightrec {

inline std::string FixtureDir(const std::string& name) {
  return std::string(EK_SOURCE_DIR) + "/testdata/fr/" + name;
}

// Loads a fixture folder; fails the test if the folder cannot be listed.
inline LoadResult LoadFixture(const std::string& name) {
  auto r = LoadDumps(FixtureDir(name), {});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : LoadResult{};
}

}  // namespace ek::flightrec
