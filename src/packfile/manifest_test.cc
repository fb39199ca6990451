#include "packfile/manifest.h"

#include <gtest/gtest.h>

namespace ek::pack {
namespace {

Manifest Sample(int lo, int hi) {
  Manifest m;
  m.evenkeel_version = "0.1.0";
  m.tokenizer_path = "t.json";
  m.tokenizer_xxh3 = 0xabcdef;
  m.vocab_size = 100;
  m.seq_len = 4;
  m.world = 4;
  m.eos_token = "<eos>";
  m.eos_id = 99;
  m.inputs.push_back({"a.jsonl", 10, 0x1234, 5, 0});
  for (int r = lo; r <= hi; ++r)
    m.ranks.push_back({r, 1, 10, 2, 32, 2, 0x42u + r, RankFileName(r)});
  return m;
}

TEST(ManifestTest, RoundTrips) {
  Manifest m = Sample(0, 3);
  auto back = ManifestFromJson(ManifestToJson(m), "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ManifestToJson(*back), ManifestToJson(m));
  EXPECT_TRUE(back->complete());
}

TEST(ManifestTest, MergeChecksAgreementAndCoverage) {
  auto merged = MergeManifests({Sample(0, 1), Sample(2, 3)}, {"n0", "n1"});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->ranks.size(), 4u);
  EXPECT_EQ(merged->total_tokens, 40u);
  auto gap = MergeManifests({Sample(0, 1), Sample(3, 3)}, {"n0", "n1"});
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("ranks 2 are in no manifest"), std::string::npos);
  Manifest other = Sample(2, 3);
  other.tokenizer_xxh3 = 1;
  auto differ = MergeManifests({Sample(0, 1), other}, {"n0", "n1"});
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.status().message().find("tokenizer"), std::string::npos);
  auto twice = MergeManifests({Sample(0, 2), Sample(2, 3)}, {"n0", "n1"});
  ASSERT_FALSE(twice.ok());
}

TEST(ManifestTest, TemplateDropsRoundTripAddUpInAMergeAndMayBeAbsent) {
  Manifest a = Sample(0, 1), b = Sample(2, 3);
  a.shard = b.shard = ShardMode::kContiguous;
  a.template_drop_records = 2;
  a.template_drop_parts = 5;
  b.template_drop_records = 1;
  b.template_drop_parts = 1;
  std::string json = ManifestToJson(a);
  EXPECT_NE(json.find(R"("template_drops": {"records": 2, "parts": 5})"), std::string::npos)
      << json;
  auto back = ManifestFromJson(json, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->template_drop_records, 2u);
  EXPECT_EQ(back->template_drop_parts, 5u);
  auto merged = MergeManifests({a, b}, {"n0", "n1"});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->template_drop_records, 3u);
  EXPECT_EQ(merged->template_drop_parts, 6u);
  // A pack made before the field existed reads as none; a mistyped one is named.
  std::string old = json;
  old.erase(old.find(R"("template_drops")"),
            std::string(R"("template_drops": {"records": 2, "parts": 5},)").size());
  auto before = ManifestFromJson(old, "m.json");
  ASSERT_TRUE(before.ok()) << before.status().message() << old;
  EXPECT_EQ(before->template_drop_parts, 0u);
  std::string bad = json;
  bad.replace(bad.find(R"("parts": 5)"), 10, R"("parts": "5")");
  auto mistyped = ManifestFromJson(bad, "m.json");
  ASSERT_FALSE(mistyped.ok());
  EXPECT_NE(mistyped.status().message().find("template_drops.parts"), std::string::npos)
      << mistyped.status().message();
}

TEST(ManifestTest, ForeignJsonIsRefused) {
  EXPECT_FALSE(ManifestFromJson("{\"format_version\": 1}", "m.json").ok());
  EXPECT_FALSE(ManifestFromJson("[1, 2", "m.json").ok());
}

TEST(ManifestTest, AMissingPackDirectorySaysSo) {
  auto missing = ReadManifest("/nonexistent-evenkeel-pack");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "/nonexistent-evenkeel-pack: directory does not exist");
  auto file = ReadManifest("/proc/self/status");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("not a directory"), std::string::npos);
  auto empty = ReadManifest("/");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("//manifest.json: no manifest"), std::string::npos)
      << empty.status().message();
}

}  // namespace
}  // namespace ek::pack
