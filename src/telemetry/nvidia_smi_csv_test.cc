#include "telemetry/nvidia_smi_csv.h"

#include <gtest/gtest.h>

namespace ek::telemetry {
namespace {

struct Parsed {
  std::vector<Sample> samples;
  std::vector<Problem> problems;
};

Parsed Parse(std::string_view text, std::string host = "node-a") {
  NvidiaSmiCsvParser parser("t.csv", host);
  Parsed p;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    parser.ParseLine(text.substr(pos, nl - pos), &p.samples, &p.problems);
    pos = nl + 1;
  }
  return p;
}

TEST(NvidiaSmiCsv, HeaderWithUnits) {
  Parsed p = Parse(
      "timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"
      "2026/11/29 14:03:01.250, 0, 100 %, 991.12 W, 83968 MiB\n"
      "2026/11/29 14:03:01.250, 1, 97 %, 1002.50 W, 83970 MiB\n");
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_TRUE(p.problems.empty());
  const Sample& s = p.samples[1];
  EXPECT_EQ(s.host, "node-a");
  EXPECT_EQ(s.gpu, 1);
  EXPECT_DOUBLE_EQ(*s.util_pct, 97);
  EXPECT_DOUBLE_EQ(*s.power_w, 1002.5);
  EXPECT_DOUBLE_EQ(*s.mem_used_mib, 83970);
  EXPECT_DOUBLE_EQ(s.time, *ParseTimestamp("2026-11-29T14:03:01.250Z"));
}

TEST(NvidiaSmiCsv, NoHeaderNoUnits) {
  Parsed p = Parse("2026/11/29 14:03:01.000, 3, 100, 640.0, 81000\n");
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].gpu, 3);
  EXPECT_DOUBLE_EQ(*p.samples[0].power_w, 640);
}

TEST(NvidiaSmiCsv, NotAvailableAndBlankAreMissingNeverZero) {
  Parsed p = Parse(
      "timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"
      "2026/11/29 14:03:01.000, 0, [N/A], [Not Supported], \n"
      "2026/11/29 14:03:01.000, 1, N/A, [Unknown Error], 5 MiB\n");
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_TRUE(p.problems.empty());
  EXPECT_FALSE(p.samples[0].util_pct.has_value());
  EXPECT_FALSE(p.samples[0].power_w.has_value());
  EXPECT_FALSE(p.samples[0].mem_used_mib.has_value());
  EXPECT_FALSE(p.samples[1].util_pct.has_value());
  EXPECT_FALSE(p.samples[1].power_w.has_value());
  EXPECT_DOUBLE_EQ(*p.samples[1].mem_used_mib, 5);
}

TEST(NvidiaSmiCsv, ReportQueryWithoutTimestampIsTimedByRounds) {
  Parsed p = Parse(
      "index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"
      "0, 0 %, 190.0 W, 80000 MiB\n1, 100 %, 191.0 W, 80000 MiB\n"
      "0, 0 %, 190.0 W, 80000 MiB\n1, 100 %, 191.0 W, 80000 MiB\n");
  ASSERT_EQ(p.samples.size(), 4u);
  EXPECT_DOUBLE_EQ(p.samples[0].time, 0);
  EXPECT_DOUBLE_EQ(p.samples[1].time, 0);
  EXPECT_DOUBLE_EQ(p.samples[2].time, 1);
  EXPECT_DOUBLE_EQ(p.samples[3].time, 1);
}

TEST(NvidiaSmiCsv, HostColumn) {
  Parsed p = Parse(
      "host, timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"
      "node-b, 2026/11/29 14:03:01.000, 2, 100 %, 990 W, 1 MiB\n");
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].host, "node-b");
}

TEST(NvidiaSmiCsv, GarbageLinesAreReportedWithLineNumbers) {
  Parsed p = Parse(
      "timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"
      "\x01\x02 garbage \xff\n"
      "2026/11/29 14:03:01.000, 0, 100 %, 990 W\n"
      "yesterday, 0, 100 %, 990 W, 1 MiB\n"
      "2026/11/29 14:03:01.000, zero, 100 %, 990 W, 1 MiB\n"
      "2026/11/29 14:03:01.000, 1, 100 %, lots W, 1 MiB\n");
  ASSERT_EQ(p.problems.size(), 5u);
  EXPECT_EQ(p.problems[0].where, "t.csv:2");
  EXPECT_NE(p.problems[1].what.find("4 fields, expected 5"), std::string::npos);
  EXPECT_EQ(p.problems[1].where, "t.csv:3");
  EXPECT_NE(p.problems[2].what.find("bad timestamp"), std::string::npos);
  EXPECT_NE(p.problems[3].what.find("bad GPU index"), std::string::npos);
  EXPECT_EQ(p.problems[4].where, "t.csv:6");
  // Only the last row survives, without its power.
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_FALSE(p.samples[0].power_w.has_value());
  EXPECT_DOUBLE_EQ(*p.samples[0].util_pct, 100);
}

TEST(NvidiaSmiCsv, NegativeAndAbsurdValuesAreMissing) {
  Parsed p = Parse(
      "2026/11/29 14:03:01.000, 0, 250, -5.0, 81000\n"
      "2026/11/29 14:03:01.000, 1, 100, 50000, -1\n");
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(p.problems.size(), 4u);
  EXPECT_FALSE(p.samples[0].util_pct.has_value());
  EXPECT_FALSE(p.samples[0].power_w.has_value());
  EXPECT_FALSE(p.samples[1].power_w.has_value());
  EXPECT_FALSE(p.samples[1].mem_used_mib.has_value());
  EXPECT_DOUBLE_EQ(*p.samples[1].util_pct, 100);
}

TEST(NvidiaSmiCsv, NanAndInfinityAreBadValues) {
  Parsed p = Parse("2026/11/29 14:03:01.000, 0, nan, inf, 1\n");
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_FALSE(p.samples[0].util_pct.has_value());
  EXPECT_FALSE(p.samples[0].power_w.has_value());
  EXPECT_EQ(p.problems.size(), 2u);
}

TEST(Timestamp, Formats) {
  EXPECT_DOUBLE_EQ(*ParseTimestamp("1970/01/02 00:00:01.500"), 86401.5);
  EXPECT_DOUBLE_EQ(*ParseTimestamp("1970-01-01T00:01:00Z"), 60);
  EXPECT_DOUBLE_EQ(*ParseTimestamp("1764424981.25"), 1764424981.25);
  EXPECT_FALSE(ParseTimestamp("2026/13/01 00:00:00").has_value());
  EXPECT_FALSE(ParseTimestamp("2026/11/29 14:03").has_value());
  EXPECT_FALSE(ParseTimestamp("-5").has_value());
  EXPECT_EQ(FormatTimestamp(*ParseTimestamp("2026/11/29 14:03:01.250")),
            "2026-11-29T14:03:01.250Z");
}

}  // namespace
}  // namespace ek::telemetry

namespace ek::telemetry {
namespace {

// Random lines built from the characters CSV rows are made of: the parser
// must never crash, and whatever it accepts must be within physical limits.
TEST(NvidiaSmiCsv, RandomInputNeverCrashesOrYieldsImpossibleValues) {
  const std::string alphabet = "0123456789,,,.. -+eE%W[]NA/:TZnaif\t\"x";
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  NvidiaSmiCsvParser parser("fuzz.csv", "h");
  std::vector<Sample> samples;
  std::vector<Problem> problems;
  for (int i = 0; i < 20000; ++i) {
    std::string line;
    if (i % 7 == 0) line = "2026/11/29 10:00:00.000, 1, 50 %, 100 W, 1 MiB";
    size_t n = next() % 60;
    for (size_t k = 0; k < n; ++k) line.push_back(alphabet[next() % alphabet.size()]);
    if (i % 11 == 0 && !line.empty()) line[next() % line.size()] = '\0';
    parser.ParseLine(line, &samples, &problems);
  }
  EXPECT_FALSE(problems.empty());
  for (const Sample& s : samples) {
    ASSERT_GE(s.gpu, 0);
    EXPECT_TRUE(!s.util_pct || (*s.util_pct >= 0 && *s.util_pct <= 100));
    EXPECT_TRUE(!s.power_w || (*s.power_w >= 0 && *s.power_w <= kMaxPowerW));
    EXPECT_TRUE(!s.mem_used_mib || *s.mem_used_mib >= 0);
  }
}

}  // namespace
}  // namespace ek::telemetry
