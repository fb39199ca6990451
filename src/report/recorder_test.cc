#include "report/recorder.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace ek::report {
namespace {

std::vector<RankInfo> Ranks(int n) {
  std::vector<RankInfo> r;
  for (int i = 0; i < n; ++i)
    r.push_back({i, i < n / 2 ? "node-a" : "node-b", i % (n / 2 > 0 ? n / 2 : 1)});
  return r;
}

std::string Field(const std::string& json, const std::string& key, size_t from = 0) {
  auto at = json.find("\"" + key + "\":", from);
  if (at == std::string::npos) return "";
  at += key.size() + 3;
  size_t end = json[at] == '"' ? json.find('"', at + 1) + 1 : json.find_first_of(",}]", at);
  return json.substr(at, end - at);
}

std::vector<uint8_t> Unbase64(std::string s) {
  if (!s.empty() && s.front() == '"') s = s.substr(1, s.size() - 2);
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = val(c);
    if (v < 0) break;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  return out;
}

TEST(RecorderTest, LevelsKeepMinAndMaxNeverAverages) {
  // 4 ranks, 10,000 s at 1 Hz; rank 2 at 0% for exactly two samples in the middle.
  Recorder rec(Ranks(4));
  for (int t = 0; t < 10000; ++t) {
    for (int r = 0; r < 4; ++r) {
      double util = (r == 2 && (t == 5000 || t == 5001)) ? 0 : 100;
      rec.AddReading(r, 1000.0 + t, util, 990.0);
    }
  }
  ModelOptions o;
  o.max_cols = 100;  // 100 s a column at the widest zoom
  std::string json = rec.ToJson(o);
  size_t lv = json.find("\"levels\":[");
  ASSERT_NE(lv, std::string::npos);
  EXPECT_EQ(Field(json, "cols", lv), "100");
  auto umin = Unbase64(Field(json, "util_min", lv));
  auto umax = Unbase64(Field(json, "util_max", lv));
  ASSERT_EQ(umin.size(), 400u);
  EXPECT_EQ(umin[2 * 100 + 50], 0) << "the two-sample dip must survive the widest zoom";
  EXPECT_EQ(umax[2 * 100 + 50], 100);
  EXPECT_EQ(umin[1 * 100 + 50], 100);
  auto pmin = Unbase64(Field(json, "power_min", lv));
  EXPECT_EQ(pmin[0], static_cast<uint8_t>(std::lround(990.0 / 1500 * 254)));
  // Finer levels up to the samples themselves fit the default budget.
  EXPECT_NE(json.find("\"cols\":10000"), std::string::npos);
}

TEST(RecorderTest, MissingIsMissingAndTheBudgetBoundsTheLevels) {
  Recorder rec(Ranks(2));
  for (int t = 0; t < 1000; ++t) {
    rec.AddReading(0, 100.0 + t, std::nullopt, 500.0);
    rec.AddReading(1, 100.0 + t, 50.0, std::nullopt);
  }
  ModelOptions o;
  o.max_cols = 10;
  o.byte_budget = 2 * 10 * 4 + 10 + 2 * 40 * 4 + 40;  // the 10- and 40-column levels, not the 160
  std::string json = rec.ToJson(o);
  EXPECT_NE(json.find("\"cols\":40"), std::string::npos);
  EXPECT_EQ(json.find("\"cols\":160"), std::string::npos);
  size_t lv = json.find("\"levels\":[");
  auto umin = Unbase64(Field(json, "util_min", lv));
  auto pmax = Unbase64(Field(json, "power_max", lv));
  EXPECT_EQ(umin[0], 255) << "no utilization reading is missing, not 0";
  EXPECT_EQ(pmax[10], 255);
  EXPECT_EQ(umin[10], 50);
}

TEST(RecorderTest, VerdictSegmentsBandAndIncidents) {
  Recorder rec(Ranks(4));
  for (int t = 0; t < 100; ++t) {
    for (int r = 0; r < 4; ++r) rec.AddReading(r, 1000.0 + t, 100, 990);
    triage::Assessment a;
    a.time = 1001.0 + t;
    a.verdict = t < 60 ? triage::Verdict::kHealthy : triage::Verdict::kDeadlockSuspect;
    a.ranks = t < 60 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{3};
    a.reason = t < 60 ? "healthy" : "rank 3 at 0%";
    rec.AddAssessment(a);
  }
  auto inc = rec.TriageIncidents();
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_EQ(inc[0].kind, "deadlock");
  EXPECT_EQ(inc[0].ranks, std::vector<int>{3});
  EXPECT_EQ(inc[0].hosts, std::vector<std::string>{"node-b"});
  EXPECT_DOUBLE_EQ(inc[0].since, 1061);
  EXPECT_FALSE(inc[0].until.has_value());
  std::string json = rec.ToJson(ModelOptions{});
  EXPECT_NE(json.find("\"verdict\":\"HEALTHY\",\"ranks\":[]"), std::string::npos)
      << "all ranks: said as none";
  EXPECT_NE(json.find("\"verdict\":\"DEADLOCK_SUSPECT\",\"ranks\":[3]"), std::string::npos);
  size_t band = json.find("\"band\":[");
  auto values = Unbase64(Field(json, "values", band));
  ASSERT_EQ(values.size(), 100u);
  EXPECT_EQ(values[59], 0);  // HEALTHY
  EXPECT_EQ(values[61], 2);  // DEADLOCK_SUSPECT
  EXPECT_NE(json.find("\"colors\":{\"HEALTHY\":\"#009E73\""), std::string::npos);
}

TEST(RecorderTest, EveryTriageIncidentCarriesTheClassifiersReasonAsEvidence) {
  // Runs of 2, 3 and 40 windows (even and odd lengths), the reason given at the onset and
  // changing within the run ("for N s"): the incident cites the reason its verdict began with.
  for (int len : {2, 3, 40}) {
    Recorder rec(Ranks(4));
    double t = 1000;
    auto add = [&](triage::Verdict v, std::vector<int> ranks, std::string reason) {
      triage::Assessment a;
      a.time = t++;
      a.verdict = v;
      a.ranks = std::move(ranks);
      a.reason = std::move(reason);
      rec.AddAssessment(a);
    };
    for (int k = 0; k < 5; ++k) add(triage::Verdict::kHealthy, {0, 1, 2, 3}, "healthy");
    for (int k = 0; k < len; ++k)
      add(triage::Verdict::kDeadlockSuspect, {3}, fmt::format("rank 3 at 0% for {} s", k));
    for (int k = 0; k < 5; ++k) add(triage::Verdict::kHealthy, {0, 1, 2, 3}, "healthy");
    for (int k = 0; k < len; ++k) add(triage::Verdict::kUnknown, {1}, k ? "" : "rank 1 missing");
    auto inc = rec.TriageIncidents();
    ASSERT_EQ(inc.size(), 2u) << len;
    EXPECT_EQ(inc[0].evidence, "rank 3 at 0% for 0 s") << len;
    EXPECT_EQ(inc[1].evidence, "rank 1 missing") << len;
    std::string json = rec.ToJson(ModelOptions{});
    EXPECT_NE(json.find("\"evidence\":\"rank 3 at 0% for 0 s\""), std::string::npos) << len;
    EXPECT_EQ(json.find("\"evidence\":\"\""), std::string::npos) << len;
  }
  // A run whose first window has no reason takes the first one given.
  Recorder rec(Ranks(4));
  for (int k = 0; k < 4; ++k) {
    triage::Assessment a;
    a.time = 1000 + k;
    a.verdict = triage::Verdict::kStarvation;
    a.ranks = {2};
    a.reason = k < 2 ? "" : "scatter";
    rec.AddAssessment(a);
  }
  auto inc = rec.TriageIncidents();
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_EQ(inc[0].evidence, "scatter");
}

TEST(RecorderTest, AnEmptyRecorderSaysSoWithoutInventing) {
  Recorder rec({});
  rec.notes.push_back("no GPU telemetry given");
  std::string json = rec.ToJson(ModelOptions{});
  EXPECT_NE(json.find("\"heatmap\":null"), std::string::npos);
  EXPECT_NE(json.find("\"time\":null"), std::string::npos);
  EXPECT_NE(json.find("\"summary\":{}"), std::string::npos);
  EXPECT_NE(json.find("no GPU telemetry given"), std::string::npos);
}

}  // namespace
}  // namespace ek::report
