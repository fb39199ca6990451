#include "telemetry/nvml.h"

#include <gtest/gtest.h>

#include "core/fake_clock.h"

namespace ek::telemetry {
namespace {

TEST(Nvml, NoLibraryIsUnavailableNotACrash) {
  auto nvml = LoadNvml("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("NVML unavailable"), std::string::npos);
}

TEST(Nvml, LibraryWithoutNvmlSymbolsIsUnavailable) {
  auto nvml = LoadNvml("libc.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_NE(nvml.status().message().find("nvmlInit_v2"), std::string::npos);
}

TEST(Nvml, ReadsThroughDlopenAndAveragesPowerFromEnergy) {
  auto nvml = LoadNvml(EK_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  FakeClock clock(100);
  NvmlSource source(std::move(*nvml), &clock, "node-a");
  Batch b;
  ASSERT_TRUE(source.Poll(101, &b).ok());
  ASSERT_EQ(b.samples.size(), 2u);
  const Sample& s0 = b.samples[0];
  EXPECT_DOUBLE_EQ(*s0.power_w, 690);  // first reading: instant power
  EXPECT_DOUBLE_EQ(*s0.util_pct, 100);
  EXPECT_DOUBLE_EQ(*s0.mem_used_mib, 60 * 1024);
  EXPECT_DOUBLE_EQ(*s0.sm_clock_mhz, 1980);
  EXPECT_EQ(*s0.throttle_reasons, 0x4u);
  EXPECT_EQ(*s0.processes, 1);
  EXPECT_FALSE(b.samples[1].power_w.has_value());  // Not Supported is missing, not 0 W
  EXPECT_DOUBLE_EQ(*b.samples[1].util_pct, 0);
  EXPECT_EQ(*b.samples[1].processes, 0);
  clock.Advance(2);
  b = Batch();
  ASSERT_TRUE(source.Poll(103, &b).ok());
  // +700 J over 2 s: the exact average, not the instant 690 W.
  EXPECT_DOUBLE_EQ(*b.samples[0].power_w, 350);
  EXPECT_EQ(b.samples[0].host, "node-a");
  EXPECT_DOUBLE_EQ(b.samples[0].time, 102);
}

}  // namespace
}  // namespace ek::telemetry
