#include "ckpt/manifest.h"

#include <gtest/gtest.h>

#include "ckpt/test_util.h"

namespace ek::ckpt {
namespace {

CheckpointManifest Sample() {
  CheckpointManifest m = testing::SampleMeta(120);
  m.epoch_complete = true;
  m.final = true;
  m.created = "2026-01-02T03:04:05Z";
  m.evenkeel_version = "0.1.0";
  // Spacing, exponents and a 20-digit integer survive byte for byte.
  m.extra =
      "{\n    \"data\": {\"consumed\": [1, 2, 3], \"big\": 12345678901234567890},\n    \"lr\": "
      "1.50e-05 }";
  FileRecord f;
  f.name = "model.safetensors";
  f.size = kChunkBytes + 5;
  f.xxh3 = 0xabcdef0123456789ull;
  f.chunks = {1, 0xffffffffffffffffull};
  m.files.push_back(f);
  m.files.push_back({"config.json", 0, 0x2d06800538d394c2ull, kChunkBytes, {}});
  return m;
}

TEST(Manifest, RoundTripsEveryFieldAndExtraVerbatim) {
  CheckpointManifest m = Sample();
  std::string json = CheckpointManifestToJson(m);
  auto back = CheckpointManifestFromJson(json, "evenkeel-checkpoint.json");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << json;
  EXPECT_EQ(back->step, 120);
  EXPECT_EQ(back->epoch, 1);
  EXPECT_EQ(back->step_in_epoch, 120 % 7);
  EXPECT_TRUE(back->epoch_complete);
  EXPECT_TRUE(back->final);
  EXPECT_EQ(back->tokens_seen, 120u * 65536);
  EXPECT_EQ(back->run.name, "demo");
  EXPECT_EQ(back->run.path, "/runs/demo/run.toml");
  EXPECT_EQ(back->run.xxh3, 0x0123456789abcdefull);
  EXPECT_EQ(back->pack.dir, "/data/pack");
  EXPECT_EQ(back->pack.manifest_xxh3, 0xfedcba9876543210ull);
  EXPECT_EQ(back->pack.world, 16);
  EXPECT_EQ(back->pack.seq_len, 2048);
  EXPECT_EQ(back->dtype, "bfloat16");
  EXPECT_EQ(back->created, "2026-01-02T03:04:05Z");
  EXPECT_EQ(back->evenkeel_version, "0.1.0");
  EXPECT_EQ(back->extra, m.extra);
  ASSERT_EQ(back->files.size(), 2u);
  EXPECT_EQ(back->files[0].name, "model.safetensors");
  EXPECT_EQ(back->files[0].size, kChunkBytes + 5);
  EXPECT_EQ(back->files[0].xxh3, 0xabcdef0123456789ull);
  EXPECT_EQ(back->files[0].chunks, m.files[0].chunks);
  EXPECT_EQ(back->files[1].chunks.size(), 0u);
  EXPECT_EQ(CheckpointManifestToJson(*back), json);
  // An empty extra is written as {} and read back as {}.
  m.extra.clear();
  back = CheckpointManifestFromJson(CheckpointManifestToJson(m), "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->extra, "{}");
}

// Removes the first occurrence of `what` from the manifest's JSON.
std::string Without(const std::string& json, const std::string& what) {
  std::string out = json;
  size_t at = out.find(what);
  EXPECT_NE(at, std::string::npos) << what;
  if (at != std::string::npos) out.erase(at, what.size());
  return out;
}

std::string ErrorOf(const std::string& json) {
  auto m = CheckpointManifestFromJson(json, "step-00000120/evenkeel-checkpoint.json");
  return m.ok() ? "" : m.status().message();
}

TEST(Manifest, AMissingFieldIsNamed) {
  const std::string json = CheckpointManifestToJson(Sample());
  const std::string top[] = {
      "format_version", "step",        "epoch", "step_in_epoch", "epoch_complete",
      "final",          "tokens_seen", "dtype", "created",       "evenkeel_version"};
  for (const std::string& key : top) {
    size_t at = json.find("  \"" + key + "\": ");
    ASSERT_NE(at, std::string::npos) << key;
    std::string cut = json;
    cut.erase(at, json.find('\n', at) + 1 - at);
    EXPECT_EQ(ErrorOf(cut), "step-00000120/evenkeel-checkpoint.json: " + key + ": missing") << key;
  }
  EXPECT_EQ(ErrorOf(Without(json, "\"path\": \"/runs/demo/run.toml\", ")),
            "step-00000120/evenkeel-checkpoint.json: run.path: missing");
  EXPECT_EQ(ErrorOf(Without(json, ", \"seq_len\": 2048")),
            "step-00000120/evenkeel-checkpoint.json: pack.seq_len: missing");
  EXPECT_EQ(ErrorOf(Without(json, "\"size\": 0, ")),
            "step-00000120/evenkeel-checkpoint.json: files[1].size: missing");
  EXPECT_NE(ErrorOf(Without(json, "\"extra\": ")), "");
}

TEST(Manifest, AMistypedFieldIsNamedNeverZero) {
  const std::string json = CheckpointManifestToJson(Sample());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string out = json;
    size_t at = out.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return out.replace(at, from.size(), to);
  };
  EXPECT_EQ(ErrorOf(replaced("\"step\": 120", "\"step\": \"120\"")),
            "step-00000120/evenkeel-checkpoint.json: step: not an integer");
  EXPECT_EQ(
      ErrorOf(replaced("\"step\": 120", "\"step\": -4")),
      "step-00000120/evenkeel-checkpoint.json: step: -4 is out of range [0, 9223372036854775807]");
  EXPECT_EQ(ErrorOf(replaced("\"final\": true", "\"final\": 1")),
            "step-00000120/evenkeel-checkpoint.json: final: not true or false");
  EXPECT_EQ(ErrorOf(replaced("\"tokens_seen\": 7864320", "\"tokens_seen\": 1.5")),
            "step-00000120/evenkeel-checkpoint.json: tokens_seen: not a non-negative integer");
  EXPECT_EQ(ErrorOf(replaced("0123456789abcdef", "0123456789abcdeg")),
            "step-00000120/evenkeel-checkpoint.json: run.xxh3: not a 16-digit hex hash");
  EXPECT_EQ(ErrorOf(replaced("\"ffffffffffffffff\"", "\"fff\"")),
            "step-00000120/evenkeel-checkpoint.json: files[0].chunks[1]: not a 16-digit hex xxh3");
  EXPECT_NE(ErrorOf(replaced(", \"ffffffffffffffff\"", ""))
                .find("files[0].chunks: 1 hashes, a 67108869-byte file"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(replaced("\"extra\": {", "\"extra\": [{")).substr(0, 60),
            "step-00000120/evenkeel-checkpoint.json: malformed JSON: line");
  EXPECT_EQ(ErrorOf(replaced("\"name\": \"config.json\"", "\"name\": \"../config.json\"")),
            "step-00000120/evenkeel-checkpoint.json: files[1].name: '../config.json' is not a "
            "plain file name");
  EXPECT_EQ(
      ErrorOf(replaced("\"name\": \"config.json\"", "\"name\": \"model.safetensors\"")),
      "step-00000120/evenkeel-checkpoint.json: files[1].name: 'model.safetensors' listed twice");
  auto future = CheckpointManifestFromJson(
      replaced("\"format_version\": 2", "\"format_version\": 3"), "m.json");
  EXPECT_EQ(future.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(future.status().message(), "m.json: format_version 3 (this evenkeel reads 1 to 2)");
  EXPECT_EQ(CheckpointManifestFromJson(replaced("\"format_version\": 2", "\"format_version\": 0"),
                                       "m.json")
                .status()
                .code(),
            StatusCode::kUnsupported);
  EXPECT_NE(ErrorOf("[1]"), "");
  EXPECT_NE(ErrorOf("{\"format_version\": 1"), "");
}

CheckpointManifest WithTrainState() {
  CheckpointManifest m = Sample();
  m.train_state = TrainStateRef{};
  m.train_state->world = 4;
  m.train_state->precision = "fp32";
  m.train_state->contents = {"model", "optimizer", "scheduler", "rng", "data"};
  m.files.push_back({"train_state/.metadata", 0, 0x2d06800538d394c2ull, kChunkBytes, {}});
  m.files.push_back({"train_state/__0_0.distcp", 0, 0x2d06800538d394c2ull, kChunkBytes, {}});
  return m;
}

TEST(Manifest, FormatOneIsReadWithoutATrainState) {
  CheckpointManifest m = Sample();
  m.format_version = 1;
  std::string json = CheckpointManifestToJson(m);
  ASSERT_NE(json.find("\"format_version\": 1,"), std::string::npos) << json;
  auto back = CheckpointManifestFromJson(json, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->format_version, 1);
  EXPECT_FALSE(back->train_state.has_value());
  EXPECT_EQ(json.find("train_state"), std::string::npos);
  // A format 2 manifest may go without one as well.
  back = CheckpointManifestFromJson(CheckpointManifestToJson(Sample()), "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->format_version, 2);
  EXPECT_FALSE(back->train_state.has_value());
}

TEST(Manifest, TrainStateRoundTrips) {
  CheckpointManifest m = WithTrainState();
  std::string json = CheckpointManifestToJson(m);
  auto back = CheckpointManifestFromJson(json, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << json;
  ASSERT_TRUE(back->train_state.has_value());
  EXPECT_EQ(back->train_state->format, "torch.distributed.checkpoint");
  EXPECT_EQ(back->train_state->dir, "train_state");
  EXPECT_EQ(back->train_state->world, 4);
  EXPECT_EQ(back->train_state->precision, "fp32");
  EXPECT_EQ(back->train_state->contents, m.train_state->contents);
  ASSERT_EQ(back->files.size(), 4u);
  EXPECT_EQ(back->files[3].name, "train_state/__0_0.distcp");
  EXPECT_EQ(CheckpointManifestToJson(*back), json);
}

TEST(Manifest, ABadTrainStateFieldIsNamed) {
  const std::string json = CheckpointManifestToJson(WithTrainState());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string out = json;
    size_t at = out.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? out : out.replace(at, from.size(), to);
  };
  const std::string f = "step-00000120/evenkeel-checkpoint.json: ";
  EXPECT_EQ(ErrorOf(replaced("\"format_version\": 2", "\"format_version\": 1")),
            f + "train_state: present in a format_version 1 manifest (format 2 added it)");
  EXPECT_EQ(ErrorOf(replaced("\"train_state\": {", "\"train_state\": [{")).substr(0, 60),
            f.substr(0, f.size() - 2) + ": malformed JSON: line");
  EXPECT_EQ(
      ErrorOf(replaced("\"format\": \"torch.distributed.checkpoint\"", "\"format\": \"orbax\"")),
      f + "train_state.format: 'orbax' unknown (this evenkeel reads "
          "'torch.distributed.checkpoint')");
  EXPECT_EQ(ErrorOf(replaced("\"format\": \"torch.distributed.checkpoint\"", "\"format\": 2")),
            f + "train_state.format: not a string");
  EXPECT_EQ(ErrorOf(replaced("\"dir\": \"train_state\"", "\"dir\": \"state\"")),
            f + "train_state.dir: 'state', must be 'train_state'");
  EXPECT_EQ(ErrorOf(replaced("\"dir\": \"train_state\"", "\"dir\": \"train_state/x\"")),
            f + "train_state.dir: 'train_state/x', must be 'train_state'");
  EXPECT_EQ(ErrorOf(replaced("\"world\": 4,", "\"world\": 0,")),
            f + "train_state.world: 0, must be at least 1");
  EXPECT_EQ(ErrorOf(replaced("\"world\": 4,", "\"world\": \"4\",")),
            f + "train_state.world: not an integer");
  EXPECT_EQ(ErrorOf(replaced("\"world\": 4, ", "")), f + "train_state.world: missing");
  EXPECT_EQ(ErrorOf(replaced("\"precision\": \"fp32\"", "\"precision\": null")),
            f + "train_state.precision: not a string");
  EXPECT_EQ(ErrorOf(replaced("\"rng\"", "7")), f + "train_state.contents[3]: not a string");
  EXPECT_EQ(ErrorOf(replaced("\"contents\": [", "\"contents\": 5, \"c\": [")),
            f + "train_state.contents: not an array");
  EXPECT_EQ(ErrorOf(replaced("\"train_state\": {", "\"train_state\": 3, \"x\": {")),
            f + "train_state: not an object");
  // A state file's name: train_state/NAME, nothing deeper, and only with a train_state.
  EXPECT_EQ(ErrorOf(replaced("train_state/__0_0.distcp", "train_state/a/__0_0.distcp")),
            f + "files[3].name: 'train_state/a/__0_0.distcp' is neither a plain file name nor "
                "train_state/NAME");
  EXPECT_EQ(ErrorOf(replaced("train_state/__0_0.distcp", "other/__0_0.distcp")),
            f + "files[3].name: 'other/__0_0.distcp' is neither a plain file name nor "
                "train_state/NAME");
  CheckpointManifest plain = Sample();
  plain.files.push_back({"train_state/.metadata", 0, 0x2d06800538d394c2ull, kChunkBytes, {}});
  EXPECT_EQ(ErrorOf(CheckpointManifestToJson(plain)),
            f + "files[2].name: 'train_state/.metadata' is not a plain file name");
}

TEST(Manifest, ExtraMustBeAnObject) {
  EXPECT_TRUE(CheckExtraJson("").ok());
  EXPECT_TRUE(CheckExtraJson("{\"a\": [1]}").ok());
  EXPECT_EQ(CheckExtraJson("[1]").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckExtraJson("{\"a\": }").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckExtraJson("{} {}").code(), StatusCode::kInvalidArgument);
  // simdjson's limits are the format's: integers beyond 64 bits are refused
  // up front rather than written into a manifest that could not be read back.
  Status big = CheckExtraJson("{\"seed\": 123456789012345678901}");
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("checkpoint extra: malformed JSON: "), std::string::npos)
      << big.message();
}

}  // namespace
}  // namespace ek::ckpt
