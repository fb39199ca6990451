#include "tokenize/bpe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace ek::tokenize {
namespace {

// A toy byte-level model: all 256 bytes, then merges a+b, ab+c, b+c, a+bc.
class BpeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    tokens.push_back("ab");   // 256
    tokens.push_back("abc");  // 257
    tokens.push_back("bc");   // 258
    tokens.push_back("aa");   // 259
    std::vector<bool> present(tokens.size(), true);
    std::vector<std::pair<int32_t, int32_t>> merges = {
        {'b', 'c'}, {'a', 'b'}, {256, 'c'}, {'a', 258}, {'a', 'a'}};
    ASSERT_TRUE(model_.Init(tokens, present, merges, false).ok());
  }
  std::vector<int32_t> Encode(std::string_view w) {
    std::vector<int32_t> out;
    BpeScratch s;
    model_.EncodeWord(w, &out, &s);
    return out;
  }
  BpeModel model_;
};

TEST_F(BpeTest, LowestRankFirst) {
  // bc (rank 0) merges before ab (rank 1), then a+bc (rank 3) -> abc.
  EXPECT_EQ(Encode("abc"), (std::vector<int32_t>{257}));
  EXPECT_EQ(Encode("ab"), (std::vector<int32_t>{256}));
  EXPECT_EQ(Encode("x"), (std::vector<int32_t>{'x'}));
}

TEST_F(BpeTest, LeftmostOnTies) { EXPECT_EQ(Encode("aaa"), (std::vector<int32_t>{259, 'a'})); }

TEST_F(BpeTest, LongWordsMatchShortAlgorithm) {
  // Words above the short threshold use the heap; the result must be the same
  // as concatenating the independent short encodings when separated by 'x'.
  std::string w;
  std::vector<int32_t> expect;
  for (int i = 0; i < 40; ++i) {
    w += "abcaax";
    expect.insert(expect.end(), {257, 259, 'x'});
  }
  EXPECT_EQ(Encode(w), expect);
}

// InitMerges guesses a merged token as the one the merge before made or the id
// after it, and looks it up otherwise: merges of both kinds, and one whose token
// is neither, give the ids a lookup gives.
TEST(BpeInitTest, MergedTokensGuessedOrLookedUp) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"xy", "xyz", "yz", "ab"}) tokens.emplace_back(t);  // 256..259
  std::vector<std::pair<int32_t, int32_t>> merges = {
      {'x', 'y'},  // 256: looked up (the first)
      {256, 'z'},  // 257: the id after the merge before's
      {'y', 'z'},  // 258: the id after
      {'x', 258},  // 257 again: neither 258 nor 259, looked up
      {'a', 'b'},  // 259: neither 257 nor 258, looked up
  };
  BpeModel m;
  ASSERT_TRUE(m.Init(tokens, std::vector<bool>(tokens.size(), true), merges, false).ok());
  BpeScratch s;
  for (const auto& [word, id] : std::vector<std::pair<std::string, int32_t>>{
           {"xy", 256}, {"xyz", 257}, {"yz", 258}, {"ab", 259}}) {
    std::vector<int32_t> out;
    m.EncodeWord(word, &out, &s);
    EXPECT_EQ(out, std::vector<int32_t>{id}) << word;
  }
}

// With a key repeated in the vocabulary a right guess is not enough (a lookup
// gives the first id): every merged token is looked up.
TEST(BpeInitTest, ARepeatedKeyTurnsGuessingOff) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"ab", "cd", "ab"}) tokens.emplace_back(t);  // 256..258
  BpeModel m;
  // c+d makes 257, so a guess for a+b would be 258, the second "ab".
  ASSERT_TRUE(
      m.Init(tokens, std::vector<bool>(tokens.size(), true), {{'c', 'd'}, {'a', 'b'}}, false).ok());
  EXPECT_EQ(m.Find("ab"), 256);
  BpeScratch s;
  std::vector<int32_t> out;
  m.EncodeWord("ab", &out, &s);
  EXPECT_EQ(out, std::vector<int32_t>{256});
}

// Where merged ids never fall with the rank, the table holds codes (merged id and
// place among the merges making it) instead of ranks. A random model whose tokens
// are each made by one to four merges, numbered in merge order (codes) and in
// reverse (ranks), must encode every word the same, through MergeShort and the heap.
// (It fails with too narrow a shift. The place bits order two merges making one
// token, which matters only where such pairs overlap, as ab+a and a+ba in "aba";
// random words rarely get there: the real files' parity suites cover that.)
TEST(BpeInitTest, CodesEncodeAsRanks) {
  std::mt19937 rng(7);
  std::vector<std::string> made;                            // non-byte tokens in merge order
  std::vector<std::pair<std::string, std::string>> splits;  // the merges, in rank order
  std::vector<size_t> made_by;                              // each merge's token in `made`
  auto is_token = [&](const std::string& t) {
    return t.size() == 1 || std::find(made.begin(), made.end(), t) != made.end();
  };
  const std::string alphabet = "ab";  // two letters: pairs making one token overlap (aa+a, a+aa)
  while (made.size() < 300) {
    std::string t;
    for (size_t n = 2 + rng() % 8; t.size() < n;) t += alphabet[rng() % alphabet.size()];
    if (is_token(t)) continue;
    std::vector<size_t> cuts;
    for (size_t c = 1; c < t.size(); ++c) {
      if (is_token(t.substr(0, c)) && is_token(t.substr(c))) cuts.push_back(c);
    }
    if (cuts.empty()) continue;
    std::shuffle(cuts.begin(), cuts.end(), rng);
    cuts.resize(std::min<size_t>(cuts.size(), 1 + rng() % 4));
    for (size_t c : cuts) {
      splits.emplace_back(t.substr(0, c), t.substr(c));
      made_by.push_back(made.size());
    }
    made.push_back(t);
  }
  // Model 0: made[k] has id 256 + k (ids rise with the rank); model 1: 256 + (N-1-k).
  const size_t n = made.size();
  auto id_of = [&](int model, const std::string& t) -> int32_t {
    if (t.size() == 1) return static_cast<unsigned char>(t[0]);
    const auto k = static_cast<size_t>(std::find(made.begin(), made.end(), t) - made.begin());
    return static_cast<int32_t>(256 + (model == 0 ? k : n - 1 - k));
  };
  BpeModel models[2];
  for (int model = 0; model < 2; ++model) {
    std::vector<std::string> tokens(256 + n);
    for (int b = 0; b < 256; ++b)
      tokens[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
    for (const auto& t : made) tokens[static_cast<size_t>(id_of(model, t))] = t;
    std::vector<std::pair<int32_t, int32_t>> merges;
    for (const auto& [l, r] : splits) merges.emplace_back(id_of(model, l), id_of(model, r));
    ASSERT_TRUE(
        models[model].Init(tokens, std::vector<bool>(tokens.size(), true), merges, false).ok());
  }
  ASSERT_TRUE(models[0].merge_codes());
  ASSERT_FALSE(models[1].merge_codes());
  BpeScratch s;
  for (int i = 0; i < 3000; ++i) {
    std::string w;
    for (size_t len = 2 + rng() % (i % 10 == 0 ? 120 : 40); w.size() < len;) {
      w += alphabet[rng() % alphabet.size()];
    }
    std::vector<int32_t> got[2];
    for (int model = 0; model < 2; ++model) models[model].EncodeWord(w, &got[model], &s);
    for (int32_t& id : got[1]) {
      if (id >= 256) id = static_cast<int32_t>(256 + (n - 1 - static_cast<size_t>(id - 256)));
    }
    ASSERT_EQ(got[0], got[1]) << w;
  }
}

TEST(BpeInitTest, MissingByteIsUnsupported) {
  BpeModel m;
  std::vector<std::string> tokens = {"a"};
  EXPECT_EQ(m.Init(tokens, {true}, {}, false).code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace ek::tokenize
