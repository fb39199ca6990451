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

// tokenizer.max_id: the largest id the blocks hold. A pack made before it reads as
// -1, whose largest_id() is vocab_size - 1; a merge keeps the largest of its parts.
TEST(ManifestTest, MaxIdRoundTripsMergesAndMayBeAbsent) {
  Manifest m = Sample(0, 3);
  m.max_id = 42;
  std::string json = ManifestToJson(m);
  EXPECT_NE(json.find(R"("vocab_size": 100, "max_id": 42})"), std::string::npos) << json;
  auto back = ManifestFromJson(json, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->max_id, 42);
  EXPECT_EQ(back->largest_id(), 42);
  EXPECT_EQ(ManifestToJson(*back), json);

  // Without it (an older pack): absent from the JSON, read back as -1.
  Manifest old = Sample(0, 3);
  std::string old_json = ManifestToJson(old);
  EXPECT_EQ(old_json.find("max_id"), std::string::npos) << old_json;
  auto before = ManifestFromJson(old_json, "m.json");
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_EQ(before->max_id, -1);
  EXPECT_EQ(before->largest_id(), 99);
  EXPECT_EQ(ManifestToJson(*before), old_json);

  // Read strictly: mistyped, negative, or not below vocab_size is named.
  auto error_for = [&](const std::string& value) {
    std::string bad = json;
    bad.replace(bad.find(R"("max_id": 42)"), 12, R"("max_id": )" + value);
    auto r = ManifestFromJson(bad, "m.json");
    EXPECT_FALSE(r.ok()) << bad;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(error_for(R"("42")"), "m.json: tokenizer.max_id: not an integer");
  EXPECT_NE(error_for("-1").find("m.json: tokenizer.max_id: "), std::string::npos);
  EXPECT_EQ(error_for("100"), "m.json: tokenizer.max_id: 100 is not below vocab_size 100");

  // Merged parts: the largest of theirs; unknown when one part predates it.
  Manifest a = Sample(0, 1), b = Sample(2, 3);
  a.max_id = 42;
  b.max_id = 57;
  auto merged = MergeManifests({a, b}, {"n0", "n1"});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->max_id, 57);
  b.max_id = -1;
  merged = MergeManifests({a, b}, {"n0", "n1"});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->max_id, -1);
  EXPECT_EQ(merged->largest_id(), 99);
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

Manifest WithDocs(int lo, int hi) {
  Manifest m = Sample(lo, hi);
  for (auto& r : m.ranks) {
    r.docs_file = DocsFileName(r.rank);
    r.docs_xxh3 = 0x77u + static_cast<uint64_t>(r.rank);
    r.documents = 3;
  }
  return m;
}

TEST(ManifestTest, DocsFieldsRoundTripAndAreAbsentInAnOlderPack) {
  Manifest m = WithDocs(0, 3);
  std::string json = ManifestToJson(m);
  EXPECT_NE(json.find(R"("docs_file": "rank-00002.docs", "docs_xxh3": "0000000000000079", )"
                      R"("documents": 3)"),
            std::string::npos)
      << json;
  auto back = ManifestFromJson(json, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ranks[2].docs_file, "rank-00002.docs");
  EXPECT_EQ(back->ranks[2].docs_xxh3, 0x79u);
  EXPECT_EQ(back->ranks[2].documents, 3u);
  EXPECT_EQ(ManifestToJson(*back), json);
  auto old = ManifestFromJson(ManifestToJson(Sample(0, 3)), "m.json");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->packing, Packing::kSequential);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE(old->ranks[0].docs_file.empty());
  EXPECT_EQ(ManifestToJson(Sample(0, 3)).find("docs_file"), std::string::npos);
}

TEST(ManifestTest, DocsFieldsAreReadStrictly) {
  std::string json = ManifestToJson(WithDocs(0, 3));
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = json;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  auto no_hash = ManifestFromJson(replace(R"("docs_xxh3": "0000000000000077", )", ""), "m.json");
  ASSERT_FALSE(no_hash.ok());
  EXPECT_NE(no_hash.status().message().find("m.json: ranks[0].docs_xxh3: missing"),
            std::string::npos)
      << no_hash.status().message();
  auto bad_count =
      ManifestFromJson(replace(R"("documents": 3,)", R"("documents": "3",)"), "m.json");
  ASSERT_FALSE(bad_count.ok());
  EXPECT_NE(bad_count.status().message().find("documents"), std::string::npos);
  auto path = ManifestFromJson(replace(R"("rank-00001.docs")", R"("../x.docs")"), "m.json");
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("ranks[1].docs_file: must be a file name"),
            std::string::npos)
      << path.status().message();
  Manifest mixed = WithDocs(0, 3);
  mixed.ranks[2].docs_file.clear();
  auto mix = ManifestFromJson(ManifestToJson(mixed), "m.json");
  ASSERT_FALSE(mix.ok());
  EXPECT_NE(mix.status().message().find("every rank or on none"), std::string::npos)
      << mix.status().message();
}

TEST(ManifestTest, PackingAndItsCountsRoundTripAddUpInAMergeAndMayBeAbsent) {
  Manifest a = WithDocs(0, 1), b = WithDocs(2, 3);
  a.shard = b.shard = ShardMode::kContiguous;
  a.packing = b.packing = Packing::kBfd;
  a.packing_seed = b.packing_seed = 9;
  a.ranks[1].padding_tokens = 5;
  a.ranks[1].split_documents = 2;
  b.ranks[0].padding_tokens = 7;
  a.total_padding_tokens = 5;
  a.total_split_documents = 2;
  std::string json = ManifestToJson(a);
  EXPECT_NE(json.find(R"("packing": {"strategy": "bfd", "seed": 9})"), std::string::npos) << json;
  auto back = ManifestFromJson(json, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->packing, Packing::kBfd);
  EXPECT_EQ(back->packing_seed, 9u);
  EXPECT_EQ(back->ranks[1].padding_tokens, 5u);
  EXPECT_EQ(back->ranks[1].split_documents, 2u);
  EXPECT_EQ(back->total_padding_tokens, 5u);
  EXPECT_EQ(back->total_split_documents, 2u);
  auto merged = MergeManifests({a, b}, {"n0", "n1"});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->total_padding_tokens, 12u);
  EXPECT_EQ(merged->total_split_documents, 2u);
  b.packing = Packing::kSequential;
  auto differ = MergeManifests({a, b}, {"n0", "n1"});
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.status().message().find("the packing"), std::string::npos);
  std::string bad = json;
  bad.replace(bad.find(R"("bfd")"), 5, R"("best")");
  auto unknown = ManifestFromJson(bad, "m.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("m.json: packing.strategy: unknown packing 'best'"),
            std::string::npos)
      << unknown.status().message();
}

TEST(ManifestTest, MergeKeepsEachRanksDocsAndRefusesAPartWithout) {
  auto merged = MergeManifests({WithDocs(0, 1), WithDocs(2, 3)}, {"n0", "n1"});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  for (const auto& r : merged->ranks) {
    EXPECT_EQ(r.docs_file, DocsFileName(r.rank));
    EXPECT_EQ(r.docs_xxh3, 0x77u + static_cast<uint64_t>(r.rank));
    EXPECT_EQ(r.documents, 3u);
  }
  auto differ = MergeManifests({WithDocs(0, 1), Sample(2, 3)}, {"n0", "n1"});
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.status().message().find("n1 disagrees with n0 on document boundaries"),
            std::string::npos)
      << differ.status().message();
}

}  // namespace
}  // namespace ek::pack
