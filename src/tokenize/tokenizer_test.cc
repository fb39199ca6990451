#include "tokenize/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "core/file.h"
#include "core/json_out.h"
#include "tokenize/tiny_tokenizer_testing.h"
#include "tokenize/tokenizer_internal.h"
#include "tokenize/unicode.h"

namespace ek::tokenize {
namespace {

using testing::TinyJson;

std::vector<int32_t> Ids(const Tokenizer& t, std::string_view text) {
  auto r = t.Encode(text);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<int32_t>{};
}

TEST(TokenizerTest, EncodesWithMergesAndAddedTokens) {
  auto t = Tokenizer::FromJson(TinyJson(), "tiny.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Tokenizer& tok = **t;
  EXPECT_EQ(Ids(tok, "hello"), (std::vector<int32_t>{259}));
  EXPECT_EQ(Ids(tok, "hello wo"), (std::vector<int32_t>{259, 260, 'o'}));
  EXPECT_EQ(Ids(tok, "he<|x|>ll"), (std::vector<int32_t>{256, 261, 257}));
  // lstrip/rstrip: the spaces around <y> belong to the token.
  EXPECT_EQ(Ids(tok, "a  <y>  b"), (std::vector<int32_t>{'a', 262, 'b'}));
  EXPECT_EQ(Ids(tok, ""), (std::vector<int32_t>{}));
  EXPECT_EQ(tok.vocab_size(), 263);
}

// A mapped tokenizer.json is parsed where it lies when its last page has room for the
// parser's padding past the end, else copied: files ending at a page boundary, just short
// of it and well before it (both ways of parsing) load alike.
TEST(TokenizerTest, AFileEndingAnywhereInItsLastPageLoads) {
  const std::string json = TinyJson();
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  char tmpl[] = "/tmp/ek_tok_page.XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  for (size_t short_of : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, page / 2}) {
    const size_t size = (json.size() / page + 2) * page - short_of;
    std::string body = json + std::string(size - json.size(), ' ');  // JSON allows trailing space
    const std::string path = dir + "/t" + std::to_string(short_of) + ".json";
    ASSERT_TRUE(WriteFileAtomic(path, body).ok());
    auto t = Tokenizer::FromFile(path);
    ASSERT_TRUE(t.ok()) << short_of << ": " << t.status().message();
    EXPECT_EQ(Ids(**t, "hello wo"), (std::vector<int32_t>{259, 260, 'o'})) << short_of;
    ::unlink(path.c_str());
  }
  ::rmdir(dir.c_str());
}

TEST(TokenizerTest, NormalizesNfcBetweenAddedTokens) {
  auto t = *Tokenizer::FromJson(TinyJson(), "tiny.json");
  // e + combining acute becomes U+00E9 = bytes C3 A9.
  EXPECT_EQ(Ids(*t, "e\u0301"), (std::vector<int32_t>{0xC3, 0xA9}));
  auto raw = *Tokenizer::FromJson(TinyJson("null"), "tiny.json");
  EXPECT_EQ(Ids(*raw, "e\u0301"), (std::vector<int32_t>{'e', 0xCC, 0x81}));
}

TEST(TokenizerTest, OffsetsTileTheTextAndAgreeWithEncode) {
  auto t = *Tokenizer::FromJson(TinyJson(), "tiny.json");
  auto ends_of = [&](std::string_view text, std::vector<int32_t>* ids) {
    std::vector<uint32_t> ends;
    size_t before = ids->size();
    EXPECT_TRUE(t->EncodeWithOffsets(text, ids, &ends).ok());
    EXPECT_EQ(ends.size(), ids->size() - before);
    return ends;
  };
  std::vector<int32_t> ids;
  // hello | " w" | o
  EXPECT_EQ(ends_of("hello wo", &ids), (std::vector<uint32_t>{5, 7, 8}));
  EXPECT_EQ(ids, Ids(*t, "hello wo"));
  // he | <|x|> | ll: the added token ends where its match ends.
  ids.clear();
  EXPECT_EQ(ends_of("he<|x|>ll", &ids), (std::vector<uint32_t>{2, 7, 9}));
  // lstrip/rstrip: the stripped spaces belong to the token.
  ids.clear();
  EXPECT_EQ(ends_of("a  <y>  b", &ids), (std::vector<uint32_t>{1, 8, 9}));
  // Appends to ids (the ends are offsets within each text).
  EXPECT_EQ(ends_of("hello", &ids), (std::vector<uint32_t>{5}));
  EXPECT_EQ(ids.size(), 4u);
  ids.clear();
  EXPECT_TRUE(ends_of("", &ids).empty());
  std::vector<uint32_t> ends;
  EXPECT_FALSE(t->EncodeWithOffsets("a\xff", &ids, &ends).ok());
  EXPECT_TRUE(t->normalizes_nfc());
}

TEST(TokenizerTest, AddedTokensAfterNonByteLevelVocabularyKeys) {
  // A vocabulary key that byte-level BPE cannot reach ("<｜fim｜>", as DeepSeek V3's
  // vocabulary has) still counts in Hugging Face's vocabulary size: an added token
  // that is not in the vocabulary gets the id after all of them.
  std::string json = TinyJson();
  auto at = json.find("\"Ġw\":260");
  ASSERT_NE(at, std::string::npos);
  json.insert(at + std::string("\"Ġw\":260").size(), ",\"<｜fim｜>\":263");
  at = json.find("\"added_tokens\":[");
  json.insert(
      at + std::string("\"added_tokens\":[").size(),
      R"({"id":264,"content":"<｜User｜>","single_word":false,"lstrip":false,"rstrip":false,"normalized":true,"special":false},)");
  auto t = Tokenizer::FromJson(json, "tiny.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  // Hugging Face (tokenizers 0.23, checked with this same file) ignores the ids the
  // file gives added tokens: the vocabulary has 262 keys, so the first added token
  // not in it gets 262 and each next one the largest so far + 1 (263 even though a
  // vocabulary key has it).
  EXPECT_EQ((*t)->TokenToId("<｜User｜>"), std::optional<int32_t>(262));
  EXPECT_EQ(Ids(**t, "<｜User｜>"), (std::vector<int32_t>{262}));
  EXPECT_EQ(Ids(**t, "<|x|>"), (std::vector<int32_t>{263}));
  EXPECT_EQ(Ids(**t, "<y>"), (std::vector<int32_t>{264}));
}

TEST(TokenizerTest, DecodeRoundTrips) {
  auto t = *Tokenizer::FromJson(TinyJson(), "tiny.json");
  std::string out;
  ASSERT_TRUE(t->Decode(Ids(*t, "hello world <|x|> é"), &out).ok());
  EXPECT_EQ(out, "hello world <|x|> é");
  std::vector<int32_t> bad = {1, 999};
  Status st = t->Decode(bad, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("999"), std::string::npos);
}

TEST(TokenizerTest, InvalidUtf8NamesOffset) {
  auto t = *Tokenizer::FromJson(TinyJson(), "tiny.json");
  std::vector<int32_t> ids;
  Status st = t->Encode(std::string_view("abc\xff", 4), &ids);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("byte 3"), std::string::npos) << st.message();
}

TEST(TokenizerTest, MalformedJsonNamesLocation) {
  std::string json = TinyJson();
  json.resize(json.size() / 2);  // truncated
  auto t = Tokenizer::FromJson(json, "cut.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("cut.json"), std::string::npos);
  EXPECT_NE(t.status().message().find("unexpected end of input"), std::string::npos)
      << t.status().message();
  auto u = Tokenizer::FromJson("{\"model\": {\"type\": \"BPE\",, }}", "bad.json");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("line 1, column 26 (byte 25)"), std::string::npos)
      << u.status().message();
}

TEST(TokenizerTest, UnsupportedPartsAreNamed) {
  auto norm = Tokenizer::FromJson(TinyJson(R"({"type":"Lowercase"})"), "t.json");
  ASSERT_FALSE(norm.ok());
  EXPECT_EQ(norm.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(norm.status().message().find("normalizer"), std::string::npos);
  EXPECT_NE(norm.status().message().find("Lowercase"), std::string::npos);

  auto pre = Tokenizer::FromJson(TinyJson("null", R"({"type":"Metaspace"})"), "t.json");
  ASSERT_FALSE(pre.ok());
  EXPECT_NE(pre.status().message().find("Metaspace"), std::string::npos);

  auto wp = Tokenizer::FromJson(R"({"model":{"type":"WordPiece","vocab":{}}})", "t.json");
  ASSERT_FALSE(wp.ok());
  EXPECT_NE(wp.status().message().find("WordPiece"), std::string::npos);

  std::string dropout = TinyJson();
  dropout.replace(dropout.find("\"dropout\":null"), 14, "\"dropout\":0.1");
  auto d = Tokenizer::FromJson(dropout, "t.json");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("model.dropout"), std::string::npos);
}

TEST(TokenizerTest, MergeOutsideVocabNamesIndex) {
  std::string json = TinyJson();
  json.replace(json.find("\"hell o\""), 8, "\"hell q\"");
  auto t = Tokenizer::FromJson(json, "t.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("model.merges[3]"), std::string::npos)
      << t.status().message();
}

// Regression (fuzz_tokenizer): one vocabulary id near 2^30 in a tiny file
// sized the id-indexed tables for it (32 GB: std::bad_alloc, or 2 GB and
// seconds for an id of 47 million). A vocabulary must be about dense.
TEST(TokenizerTest, SparseVocabularyIdsAreAnErrorNotAHugeAllocation) {
  for (const char* id : {"1073741800", "47708351"}) {
    std::string json = TinyJson();
    size_t at = json.find("\"hello\":259");
    ASSERT_NE(at, std::string::npos);
    json.replace(at + 8, 3, id);
    auto t = Tokenizer::FromJson(json, "t.json");
    ASSERT_FALSE(t.ok()) << id;
    EXPECT_NE(t.status().message().find("t.json: model.vocab: ids are too sparse: the largest is " +
                                        std::string(id)),
              std::string::npos)
        << t.status().message();
  }
}

TEST(TokenizerTest, ByteLevelPrefixSpaceAndGpt2Regex) {
  std::string pre = R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})";
  auto t = *Tokenizer::FromJson(TinyJson("null", pre), "t.json");
  // " hello" -> Ġ h e l l o: no merge for Ġh, so bytes then merges inside.
  EXPECT_EQ(Ids(*t, "hello"), (std::vector<int32_t>{' ', 259}));
}

TEST(TokenizerTest, ThreadsShareOneTokenizer) {
  auto t = *Tokenizer::FromJson(TinyJson(), "tiny.json");
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 2000; ++k) {
        auto ids = t->Encode("hello world <|x|> hello");
        if (!ids.ok() ||
            *ids != std::vector<int32_t>{259, 260, 'o', 'r', 'l', 'd', ' ', 261, ' ', 259})
          ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ignore_merges: a piece that is a vocabulary key is that token, though no merge makes
// it ("ello", and a key of 17 bytes, past what the cache holds inline). Once the piece
// cache takes in the vocabulary (FillCacheWithVocabAfter(0): at the first text), the
// pieces it misses skip the lookup of the whole piece; the ids must not change, for
// keys, for pieces that are none, and for keys longer than 16 bytes (still looked up).
TEST(TokenizerTest, IgnoreMergesKeysAreOneTokenWithTheVocabularyCached) {
  std::string json = TinyJson();
  ASSERT_TRUE(testing::ReplaceOnce(&json, R"("ignore_merges":false)", R"("ignore_merges":true)"));
  // Keys of 4, 17 (past a slot's 16 bytes) and 100 bytes (past what the cache holds:
  // looked up).
  const std::string z100(100, 'z');
  ASSERT_TRUE(testing::ReplaceOnce(
      &json, R"("Ġw":260})",
      R"("Ġw":260,"ello":263,"abcdefghijklmnopq":264,")" + z100 + R"(":265})"));
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"ello", {263}},
      {"abcdefghijklmnopq", {264}},
      {z100, {265}},
      {z100 + "z", std::vector<int32_t>(101, 'z')},
      {"ellox", {'e', 257, 'o', 'x'}},
      {"hello ello", {259, ' ', 'e', 257, 'o'}},  // " ello" is no key
      {"hello\nello", {259, '\n', 263}},
      {"abcdefghijklmnop",
       {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p'}},
      {"he", {256}},
  };
  for (size_t after : {size_t{0}, size_t{1} << 14}) {
    auto t = Tokenizer::FromJson(json, "tiny.json");
    ASSERT_TRUE(t.ok()) << t.status().message();
    (*t)->FillCacheWithVocabAfter(after);
    for (int pass = 0; pass < 2; ++pass) {  // the second from the cache
      for (const auto& [text, ids] : cases) EXPECT_EQ(Ids(**t, text), ids) << after << " " << text;
    }
  }
}

// The piece cache's mark that it holds a vocabulary stays while pieces come and go,
// and goes when the cache is cleared (full at its largest size).
TEST(PieceCacheTest, HoldingTheVocabularyEndsWhenItIsCleared) {
  PieceCache cache;
  const std::vector<std::string> keys = {"ab", "hello", "0123456789abcdef"};
  std::vector<std::pair<std::string_view, int32_t>> vocab;
  for (size_t i = 0; i < keys.size(); ++i) vocab.emplace_back(keys[i], static_cast<int32_t>(i));
  ASSERT_TRUE(cache.HoldVocab(vocab));
  ASSERT_TRUE(cache.holds_vocab());
  for (size_t i = 0; i < keys.size(); ++i) {
    int32_t out[24];
    ASSERT_EQ(cache.Write(keys[i], PieceCache::Key(keys[i]), out), 1) << keys[i];
    EXPECT_EQ(out[0], static_cast<int32_t>(i));
  }
  bool cleared = false;
  const int32_t ids[2] = {7, 8};
  for (size_t i = 0; i < PieceCache::kMaxCapacity && !cleared; ++i) {
    const std::string key = "piece" + std::to_string(i);
    const size_t before = cache.used();
    cache.Insert(key, PieceCache::Key(key), ids, 2);
    cleared = cache.used() < before;
    EXPECT_EQ(cache.holds_vocab(), !cleared) << i;
  }
  ASSERT_TRUE(cleared);
  EXPECT_FALSE(cache.Has("hello", PieceCache::Key("hello")));
  ASSERT_TRUE(cache.HoldVocab(vocab));  // filled again
  EXPECT_TRUE(cache.holds_vocab());
  EXPECT_TRUE(cache.Has("hello", PieceCache::Key("hello")));
}

// The table grows in place into memory never written (PieceCache: only the old table is
// cleared): through every size, each piece keeps its ids (short ones in the slot, long
// ones and many ids in the arena) and a piece never put in is not found.
TEST(PieceCacheTest, GrowingToTheLargestSizeKeepsEveryPieceAndFindsNoOther) {
  PieceCache cache;
  const size_t n = PieceCache::kMaxCapacity / 2;  // past two growths, short of a clear
  auto key_of = [](size_t i) {
    std::string k = "p" + std::to_string(i);
    if (i % 7 == 0) k += std::string(20, 'x');  // over 16 bytes: its key in the arena
    return k;
  };
  for (size_t i = 0; i < n; ++i) {
    const std::string key = key_of(i);
    const int32_t ids[4] = {static_cast<int32_t>(i), 1, 2, 3};
    cache.Insert(key, PieceCache::Key(key), ids, i % 5 == 0 ? 4 : 1);
  }
  ASSERT_EQ(cache.used(), n);
  for (size_t i = 0; i < n; ++i) {
    const std::string key = key_of(i);
    int32_t out[PieceCache::kMaxKey];
    ASSERT_EQ(cache.Write(key, PieceCache::Key(key), out), i % 5 == 0 ? 4 : 1) << key;
    ASSERT_EQ(out[0], static_cast<int32_t>(i)) << key;
    const std::string absent = "q" + std::to_string(i);
    ASSERT_FALSE(cache.Has(absent, PieceCache::Key(absent))) << absent;
  }
}

// A vocabulary of over a quarter of the largest table is refused, with no mark (the
// tokenizer then stops asking: EncodeScratch::no_vocab_fill).
TEST(PieceCacheTest, AVocabularyTooLargeIsRefused) {
  PieceCache cache;
  std::vector<std::string> keys;
  for (size_t i = 0; i <= PieceCache::kMaxCapacity / 4; ++i)
    keys.push_back("k" + std::to_string(i));
  std::vector<std::pair<std::string_view, int32_t>> vocab;
  for (size_t i = 0; i < keys.size(); ++i) vocab.emplace_back(keys[i], static_cast<int32_t>(i));
  EXPECT_FALSE(cache.HoldVocab(vocab));
  EXPECT_FALSE(cache.holds_vocab());
  EXPECT_EQ(cache.used(), 0u);
  vocab.pop_back();
  EXPECT_TRUE(cache.HoldVocab(vocab));
  EXPECT_TRUE(cache.holds_vocab());
  EXPECT_EQ(cache.used(), vocab.size());
}

}  // namespace
}  // namespace ek::tokenize
