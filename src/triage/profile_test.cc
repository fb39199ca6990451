#include "triage/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/file.h"

namespace ek::triage {
namespace {

TEST(Profile, B300IsTheReportsNumbers) {
  Profile p = *BuiltinProfile("b300");
  EXPECT_EQ(p.name, "B300");
  EXPECT_DOUBLE_EQ(p.healthy_lo_w, 940);
  EXPECT_DOUBLE_EQ(p.healthy_hi_w, 1040);
  EXPECT_DOUBLE_EQ(p.communication_w, 640);
  EXPECT_DOUBLE_EQ(p.starvation_w, 575);
  EXPECT_DOUBLE_EQ(p.floor_w, 190);
  EXPECT_DOUBLE_EQ(p.floor_max_w(), 382.5);
  EXPECT_DOUBLE_EQ(p.healthy_min_w(), 790);
  EXPECT_TRUE(p.Validate().ok());
}

TEST(Profile, OthersScaleByPowerLimit) {
  for (const auto& [name, limit] :
       std::vector<std::pair<std::string, double>>{{"H100", 700}, {"H200", 700}, {"A100", 400}}) {
    Profile p = *BuiltinProfile(name);
    EXPECT_EQ(p.name, name);
    EXPECT_DOUBLE_EQ(p.power_limit_w, limit);
    EXPECT_NEAR(p.healthy_lo_w, 940 * limit / 1100, 1e-9);
    EXPECT_NEAR(p.floor_w, 190 * limit / 1100, 1e-9);
    EXPECT_TRUE(p.Validate().ok()) << name;
  }
  EXPECT_NEAR(BuiltinProfile("H100")->healthy_lo_w, 598.2, 0.1);
  EXPECT_NEAR(BuiltinProfile("A100")->floor_w, 69.1, 0.1);
  EXPECT_NEAR(BuiltinProfile("limit:350")->communication_w, 640 * 350.0 / 1100, 1e-9);
  EXPECT_FALSE(BuiltinProfile("limit:abc").ok());
  EXPECT_EQ(BuiltinProfile("V100").status().code(), StatusCode::kNotFound);
}

TEST(Profile, FromBandsReproducesB300Proportions) {
  Profile p = ProfileFromBands("x", 940, 1040, 190);
  EXPECT_NEAR(p.communication_w, 640, 1e-9);
  EXPECT_NEAR(p.starvation_w, 575, 1e-9);
}

TEST(Profile, JsonRoundTripThroughAFile) {
  Profile p = *BuiltinProfile("H200");
  p.idle_w = 75;
  char tmpl[] = "/tmp/ek_profile_test.XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string path = dir + "/h200.json";
  ASSERT_TRUE(WriteFileAtomic(path, ProfileToJson(p)).ok());
  Result<Profile> q = LoadProfile(path);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->name, "H200");
  EXPECT_NEAR(q->healthy_lo_w, p.healthy_lo_w, 0.05);
  EXPECT_NEAR(q->floor_w, p.floor_w, 0.05);
  EXPECT_DOUBLE_EQ(q->idle_w, 75);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST(Profile, BadFilesAreErrorsNamingTheFile) {
  EXPECT_EQ(ParseProfileJson("{", "p.json").status().code(), StatusCode::kCorrupt);
  EXPECT_NE(ParseProfileJson("{}", "p.json").status().message().find("p.json"), std::string::npos);
  std::string unordered =
      R"({"format":"evenkeel-triage-profile/1","healthy_lo_w":500,"healthy_hi_w":600,)"
      R"("communication_w":640,"starvation_w":575,"floor_w":190})";
  EXPECT_FALSE(ParseProfileJson(unordered, "p.json").ok());
  std::string missing = R"({"format":"evenkeel-triage-profile/1","healthy_lo_w":940})";
  EXPECT_NE(ParseProfileJson(missing, "p.json").status().message().find("healthy_hi_w"),
            std::string::npos);
  EXPECT_EQ(LoadProfile("/nonexistent/profile.json").status().code(), StatusCode::kNotFound);
}

// A calibrated profile file is read strictly: a mistyped name or number is an
// error naming the file and the field (the old reader skipped a mistyped name).
TEST(Profile, ProfileFileNamesAMissingOrMistypedField) {
  Profile p = B300Profile();
  const std::string good = ProfileToJson(p);
  auto with = [&](std::string_view from, std::string_view to) {
    std::string j = good;
    size_t at = j.find(from);
    EXPECT_NE(at, std::string::npos) << from << " in " << good;
    if (at != std::string::npos) j.replace(at, from.size(), to);
    auto back = ParseProfileJson(j, "cal.json");
    return back.ok() ? std::string("ok") : back.status().message();
  };
  EXPECT_EQ(with("", ""), "ok");
  EXPECT_EQ(with("\"name\": \"B300\"", "\"name\": 300"), "cal.json: name: not a string");
  EXPECT_EQ(with("\"healthy_lo_w\"", "\"healthy_low_w\""), "cal.json: healthy_lo_w: missing");
  EXPECT_EQ(with("\"floor_w\": ", "\"floor_w\": \"W\", \"x\": "),
            "cal.json: floor_w: not a number");
  EXPECT_EQ(with("\"floor_w\": ", "\"floor_w\": {\"w\": 1}, \"x\": "),
            "cal.json: floor_w: not a number");
  EXPECT_EQ(ParseProfileJson("[1]", "cal.json").status().message(), "cal.json: not a JSON object");
}

// The profile file's bytes: one field a line, as docs/triage_profile_format.md shows it.
TEST(Profile, FileBytesArePinned) {
  Profile p = *BuiltinProfile("H200");
  p.name = "x\"y";
  p.idle_w = 75.25;
  p.power_limit_w = 0;
  EXPECT_EQ(ProfileToJson(p),
            "{\n"
            "  \"format\": \"evenkeel-triage-profile/1\",\n"
            "  \"name\": \"x\\\"y\",\n"
            "  \"origin\": \"B300 bands scaled to a 700 W power limit (x0.636)\",\n"
            "  \"healthy_lo_w\": 598.2,\n"
            "  \"healthy_hi_w\": 661.8,\n"
            "  \"communication_w\": 407.3,\n"
            "  \"starvation_w\": 365.9,\n"
            "  \"floor_w\": 120.9,\n"
            "  \"idle_w\": 75.2\n"
            "}\n");
}

}  // namespace
}  // namespace ek::triage
