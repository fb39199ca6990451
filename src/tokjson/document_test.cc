#include "tokjson/document.h"

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "core/huge_pages.h"
#include "tokjson/test_json.h"
#include "tokjson/vocab_hash.h"

namespace ek::tokjson {
namespace {

// A byte-level vocabulary written out by hand: printable ASCII bytes are
// themselves in GPT-2's table, "Ġ" (U+0120) is the space.
std::string Json(std::string_view vocab, std::string_view added = "[]",
                 std::string_view decoder = R"({"type":"ByteLevel"})",
                 std::string_view merges = R"(["a b"])") {
  return testing::TokenizerJson(vocab, added, decoder, merges);
}

std::string ErrorOf(std::string_view json) {
  auto doc = Document::Parse(json, "m/tokenizer.json");
  EXPECT_FALSE(doc.ok());
  return doc.ok() ? "" : doc.status().message();
}

TEST(TokenizerJson, VocabLenCountsDistinctKeys) {
  // A JSON object may repeat a key: vocab_len (where added tokens' ids start) counts it
  // once, over enough keys that the set probes past collisions.
  std::string vocab = "{";
  for (int i = 0; i < 1500; ++i) vocab += fmt::format("{}\"k{}\":{}", i ? "," : "", i % 1000, i);
  vocab += "}";
  auto doc = Document::Parse(Json(vocab), "t.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->vocab_len, 1000);
  EXPECT_EQ(doc->vocab_limit, 1500);
}

TEST(TokenizerJson, TheVocabularyByIdInItsTwoSpellings) {
  auto doc = Document::Parse(Json(R"({"a":0,"b":1,"Ġa":2,"☃":4})"), "t.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->name(), "t.json");
  EXPECT_EQ(doc->decoder, Decoder::kByteLevel);
  EXPECT_EQ(doc->vocab_limit, 5);
  EXPECT_EQ(doc->vocab_len, 4);
  EXPECT_EQ(doc->id_limit, 5);
  EXPECT_EQ(doc->has_id, (std::vector<bool>{true, true, true, false, true}));
  EXPECT_EQ(doc->vocab_bytes[2], " a");
  EXPECT_TRUE(doc->vocab_byte_level[2]);
  EXPECT_EQ(doc->vocab_key[2], "Ġa");
  // Outside the byte-level alphabet: its own text, no bytes.
  EXPECT_FALSE(doc->vocab_byte_level[4]);
  EXPECT_EQ(doc->vocab_bytes[4], "");
  ASSERT_EQ(doc->vocab_other.size(), 1u);
  EXPECT_EQ(doc->vocab_other.at(4), "☃");
  // The hole.
  EXPECT_FALSE(doc->vocab_byte_level[3]);
  EXPECT_EQ(doc->vocab_key[3], "");

  auto none = Document::Parse(Json(R"({"a":0})", "[]", "null"), "t.json");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->decoder, Decoder::kNone);
  auto absent = Document::Parse(R"({"model":{"vocab":{"a":0}}})", "t.json");
  ASSERT_TRUE(absent.ok()) << absent.status().message();
  EXPECT_EQ(absent->decoder, Decoder::kNone);
  EXPECT_TRUE(absent->added_tokens.empty());
}

TEST(TokenizerJson, AddedTokensTakeTheIdsHuggingFaceAssigns) {
  // Vocabulary of 3 (ids 0-2). In file order: <s> listed as 3 keeps 3 (the
  // vocabulary's size); "b" is a vocabulary entry and takes its id 1 whatever
  // it says; <t> listed as 99 takes max + 1 = 4; "☃" is a key outside the
  // alphabet and takes its id 2; <s> again keeps its place and id with the
  // later flags; an empty content is dropped.
  auto doc = Document::Parse(Json(R"({"a":0,"b":1,"☃":2})",
                                  R"([{"id":3,"content":"<s>","special":true},)"
                                  R"({"id":7,"content":"b","special":false,"lstrip":true},)"
                                  R"({"id":99,"content":"<t>","special":true,"normalized":true},)"
                                  R"({"id":8,"content":"☃","single_word":true},)"
                                  R"({"id":3,"content":"<s>","special":false,"rstrip":true},)"
                                  R"({"id":9,"content":""}])"),
                             "t.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const auto& added = doc->added_tokens;
  ASSERT_EQ(added.size(), 4u);
  EXPECT_EQ(added[0].content, "<s>");
  EXPECT_EQ(added[0].id, 3);
  EXPECT_FALSE(added[0].special);  // the later listing's flags
  EXPECT_TRUE(added[0].rstrip);
  EXPECT_EQ(added[1].content, "b");
  EXPECT_EQ(added[1].id, 1);
  EXPECT_TRUE(added[1].lstrip);
  EXPECT_EQ(added[2].content, "<t>");
  EXPECT_EQ(added[2].id, 4);
  EXPECT_TRUE(added[2].special);
  EXPECT_TRUE(added[2].normalized);
  EXPECT_EQ(added[3].content, "☃");
  EXPECT_EQ(added[3].id, 2);
  EXPECT_TRUE(added[3].single_word);
  EXPECT_EQ(doc->vocab_limit, 3);
  EXPECT_EQ(doc->id_limit, 5);
  EXPECT_EQ(doc->has_id, (std::vector<bool>{true, true, true, true, true}));

  // With no added id reaching the vocabulary's size, the first new one takes it.
  auto low = Document::Parse(Json(R"({"a":0,"b":1})", R"([{"id":0,"content":"<x>"}])"), "t.json");
  ASSERT_TRUE(low.ok());
  ASSERT_EQ(low->added_tokens.size(), 1u);
  EXPECT_EQ(low->added_tokens[0].id, 2);
}

TEST(TokenizerJson, WhatMakesTheIdsMeaninglessIsAnErrorNamingTheFileAndField) {
  EXPECT_EQ(ErrorOf(R"({"model":{"type":"BPE"}})"),
            "m/tokenizer.json: model.vocab: missing or not an object");
  EXPECT_EQ(ErrorOf(Json(R"({"a":0,"b":"one"})")),
            "m/tokenizer.json: model.vocab[b]: id is not a non-negative integer");
  EXPECT_EQ(ErrorOf(Json(R"({"a":-1})")),
            "m/tokenizer.json: model.vocab[a]: id is not a non-negative integer");
  EXPECT_EQ(ErrorOf(Json(R"({"a":0,"b":1000000})")),
            "m/tokenizer.json: model.vocab: ids are too sparse: the largest is 1000000 for 2 "
            "entries");
  EXPECT_EQ(ErrorOf(Json(R"({"a":0})", R"([{"content":"<s>"}])")),
            "m/tokenizer.json: added_tokens[0]: bad id");
  EXPECT_EQ(ErrorOf(Json(R"({"a":0})", R"([{"id":1,"content":"<s>"},{"id":2}])")),
            "m/tokenizer.json: added_tokens[1]: bad content");
  EXPECT_EQ(ErrorOf(Json(R"({"a":0})", R"([{"id":1,"content":"<s>","special":"yes"}])")),
            "m/tokenizer.json: added_tokens[0].special: not a bool");
  EXPECT_EQ(ErrorOf(Json(R"({"a":0})", R"({"id":1})")),
            "m/tokenizer.json: added_tokens: not an array");
  EXPECT_EQ(ErrorOf("[1]"),
            "m/tokenizer.json: not a tokenizer.json: the top level is not an object");
  EXPECT_EQ(ErrorOf(R"({"version":"1.0"})"),
            "m/tokenizer.json: model: missing: not a tokenizer.json");
  EXPECT_NE(ErrorOf(R"({"model":)").find("m/tokenizer.json: malformed JSON: line 1"),
            std::string::npos);

  auto decoder = Document::Parse(Json(R"({"a":0})", "[]", R"({"type":"WordPiece"})"), "t.json");
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(decoder.status().message(),
            "t.json: decoder: unsupported: 'WordPiece' (supported: ByteLevel; or Replace, "
            "ByteFallback, Fuse, Strip, Metaspace and a Sequence of these)");
  // A SentencePiece-style chain is read as one family; a stranger inside it is
  // named by its place.
  auto pieces = Document::Parse(
      Json(R"({"a":0})", "[]",
           R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},)"
           R"("content":" "},{"type":"ByteFallback"},{"type":"Fuse"},)"
           R"({"type":"Strip","content":" ","start":1,"stop":0}]})"),
      "t.json");
  ASSERT_TRUE(pieces.ok()) << pieces.status().message();
  EXPECT_EQ(pieces->decoder, Decoder::kPieces);
  auto inner = Document::Parse(
      Json(R"({"a":0})", "[]",
           R"({"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"WordPiece"}]})"),
      "t.json");
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(
      inner.status().message().rfind("t.json: decoder.decoders[1]: unsupported: 'WordPiece'", 0),
      0u)
      << inner.status().message();
  auto model = Document::Parse(R"({"model":{"type":"Unigram","vocab":[]}})", "t.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(model.status().message(),
            "t.json: model.type: unsupported: 'Unigram' (only BPE is supported)");
}

TEST(TokenizerJson, EncodingPartsAreLeftToTheirReader) {
  // Merges, pre-tokenizer and normalizer are not read by Parse: a file wrong in
  // them alone still parses (the vocabulary fingerprint needs only the ids).
  std::string json = Json(R"({"a":0,"b":1})", "[]", R"({"type":"ByteLevel"})", R"(["nospace"])");
  json.insert(1, R"("pre_tokenizer":{"type":"Metaspace"},"normalizer":{"type":"Lowercase"},)");
  auto doc = Document::Parse(json, "t.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  // Handed over as JSON, valid after the Document moves (the DOM is on the heap).
  Document moved = std::move(doc).value();
  EXPECT_EQ(TypeOf(moved.root()["pre_tokenizer"].value_unsafe()), "Metaspace");
  EXPECT_EQ(TypeOf(moved.model()), "BPE");
  EXPECT_EQ(TypeOf(moved.root()["normalizer"].value_unsafe()), "Lowercase");
  simdjson::dom::element merges_json;
  ASSERT_EQ(moved.model()["merges"].get(merges_json), simdjson::SUCCESS);
  EXPECT_EQ(TypeOf(merges_json), "");  // not an object
  auto merges = ReadMerges(moved);
  ASSERT_FALSE(merges.ok());
  EXPECT_EQ(merges.status().message(), "t.json: model.merges[0]: no space in merge");
}

TEST(TokenizerJson, MergesAreIdPairsOfTheVocabularysKeysAsWritten) {
  // Byte-level: a side is a byte-level key ("Ġa" is " a"), not "☃", though it is a key.
  auto merges_of = [&](std::string_view merges, bool byte_level = true) {
    auto doc = Document::Parse(
        Json(R"({"a":0,"b":1,"Ġa":2,"☃":3})", "[]", R"({"type":"ByteLevel"})", merges), "t.json");
    EXPECT_TRUE(doc.ok()) << doc.status().message();
    return ReadMerges(*doc, byte_level);
  };
  auto ok = merges_of(R"(["a b",["Ġa","a"]])");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  using Pairs = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(Pairs(ok->begin(), ok->end()), (Pairs{{0, 1}, {2, 0}}));
  EXPECT_EQ(merges_of(R"(["a b",["a"]])").status().message(),
            "t.json: model.merges[1]: not a pair of strings");
  EXPECT_EQ(merges_of(R"([["a","b","a"]])").status().message(),
            "t.json: model.merges[0]: not a pair of strings");
  EXPECT_EQ(merges_of(R"([["a",1]])").status().message(),
            "t.json: model.merges[0]: not a pair of strings");
  EXPECT_EQ(merges_of(R"([7])").status().message(),
            "t.json: model.merges[0]: not a string or a pair");
  EXPECT_EQ(merges_of(R"(["a c"])").status().message(),
            "t.json: model.merges[0]: token 'c' is not a byte-level token in model.vocab");
  EXPECT_EQ(merges_of(R"(["☃ a"])").status().message(),
            "t.json: model.merges[0]: token '☃' is not a byte-level token in model.vocab");
  // " a" decodes "Ġa", but a side is looked up as written.
  EXPECT_EQ(merges_of(R"([[" a","a"]])").status().message(),
            "t.json: model.merges[0]: token ' a' is not a byte-level token in model.vocab");
  // Texts (SentencePiece-style): any key.
  auto texts = merges_of(R"(["☃ a"])", false);
  ASSERT_TRUE(texts.ok()) << texts.status().message();
  EXPECT_EQ(Pairs(texts->begin(), texts->end()), (Pairs{{3, 0}}));
  EXPECT_EQ(merges_of(R"(["a c"])", false).status().message(),
            "t.json: model.merges[0]: token 'c' is not a token in model.vocab");
  auto none = Document::Parse(R"({"model":{"vocab":{"a":0}}})", "t.json");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(ReadMerges(*none).status().message(), "t.json: model.merges: missing or not an array");
}

TEST(TokenizerJson, FindKeysGivesTheLowestIdOfEachKeyAsWritten) {
  // A key repeated on two ids is the lower one's; with two keys on one id the later is
  // its key (the earlier is no key); over enough keys that the index probes past
  // collisions and its batches break.
  std::string vocab = "{";
  for (int i = 0; i < 3000; ++i) vocab += fmt::format("{}\"k{}\":{}", i ? "," : "", i, i);
  vocab += R"(,"k7":3001,"dup":3003,"dup":3002,"early":3004,"late":3004})";
  auto doc = Document::Parse(Json(vocab), "t.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  std::vector<std::string> asked = {"k7", "dup", "early", "late", "k2999", "k3000", "", "k"};
  for (int i = 0; i < 3000; i += 7) asked.push_back(fmt::format("k{}", i));
  std::vector<std::string_view> keys(asked.begin(), asked.end());
  std::vector<int32_t> ids(keys.size(), -7);
  doc->FindKeys(keys.data(), keys.size(), ids.data());
  EXPECT_EQ(ids[0], 7);
  EXPECT_EQ(ids[1], 3002);
  EXPECT_EQ(ids[2], -1);
  EXPECT_EQ(ids[3], 3004);
  EXPECT_EQ(ids[4], 2999);
  EXPECT_EQ(ids[5], -1);
  EXPECT_EQ(ids[6], -1);
  EXPECT_EQ(ids[7], -1);
  for (size_t j = 8; j < keys.size(); ++j) EXPECT_EQ(ids[j], static_cast<int32_t>(7 * (j - 8)));
  // Distinct keys: 3,000 + "dup" + "early" + "late" (k7 and dup repeat).
  EXPECT_EQ(doc->vocab_len, 3003);
}

TEST(TokenizerJson, MergesLookedUpInBatchesReportTheFirstBadMergeInOrder) {
  // ReadMerges looks tokens up 64 merges at a time; which error comes first must not
  // depend on where the batches break.
  auto merges_of = [&](const std::vector<std::string>& items) {
    std::string list = "[";
    for (size_t i = 0; i < items.size(); ++i) list += (i ? "," : "") + items[i];
    list += "]";
    auto doc = Document::Parse(
        Json(R"({"a":0,"b":1,"Ġa":2})", "[]", R"({"type":"ByteLevel"})", list), "t.json");
    EXPECT_TRUE(doc.ok()) << doc.status().message();
    return ReadMerges(*doc);
  };
  std::vector<std::string> good(150, "\"a b\"");
  auto all = merges_of(good);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->size(), 150u);
  // An unknown token before a malformed merge in a later position of the same batch,
  // and in an earlier batch: the unknown token is named.
  for (size_t bad_at : {3u, 63u, 64u, 100u}) {
    std::vector<std::string> items = good;
    items[bad_at] = "\"a c\"";
    items[bad_at + 10] = "\"nospace\"";
    EXPECT_EQ(merges_of(items).status().message(),
              fmt::format("t.json: model.merges[{}]: token 'c' is not a byte-level token in "
                          "model.vocab",
                          bad_at));
    // A malformed merge before an unknown token: the malformed one.
    items = good;
    items[bad_at] = "7";
    items[bad_at + 10] = "\"a c\"";
    EXPECT_EQ(merges_of(items).status().message(),
              fmt::format("t.json: model.merges[{}]: not a string or a pair", bad_at));
  }
  // The right-hand token is named when it is the one outside the table or the vocabulary.
  std::vector<std::string> items = good;
  items[70] = "\"a ☃\"";
  EXPECT_EQ(merges_of(items).status().message(),
            "t.json: model.merges[70]: token '☃' is not a byte-level token in model.vocab");
  items[70] = "\"b d\"";
  EXPECT_EQ(merges_of(items).status().message(),
            "t.json: model.merges[70]: token 'd' is not a byte-level token in model.vocab");
}

// The VmFlags of the mapping holding `p`, from /proc/self/smaps ("" if none holds it).
std::string VmFlagsAt(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo, hi;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// The parser's three large buffers are advised to be huge pages (a one-record pack's start
// and load ~8 ms less): checked where the advice must lie, a whole 2 MiB page into each.
TEST(AllocateParserHuge, AdvisesTheTapeStringsAndStructuralIndexes) {
  const size_t bytes = 8u << 20;  // an 8 MB document's buffers
  simdjson::dom::parser parser;
  AllocateParserHuge(&parser, bytes);
  auto huge = [](const void* buffer) {
    return VmFlagsAt(reinterpret_cast<const void*>(HugePageAbove(buffer) + kHugePage))
               .find(" hg") != std::string::npos;
  };
  ASSERT_NE(parser.doc.tape.get(), nullptr);
  ASSERT_NE(parser.doc.string_buf.get(), nullptr);
  EXPECT_TRUE(huge(parser.doc.tape.get()));
  EXPECT_TRUE(huge(parser.doc.string_buf.get()));
  EXPECT_TRUE(huge(parser.implementation->structural_indexes.get()));
  // And it still parses.
  simdjson::padded_string json(std::string(R"({"a": [1, "b"]})"));
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS);
  EXPECT_EQ(root["a"].at(1).get_string().value(), "b");
}

TEST(VocabHash, IsXxh3OverIdLengthAndBytesPerId) {
  VocabHash hash;
  hash.Add(1, "ab");
  hash.Add(258, "");
  // {uint32 1, uint32 2} "ab" {uint32 258, uint32 0}, little-endian.
  const char bytes[] = {1, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', 2, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(hash.Digest(), XXH3_64bits(bytes, sizeof bytes));
  EXPECT_EQ(VocabHash().Digest(), XXH3_64bits(nullptr, 0));
}

// Records gathered in a buffer hash as the bytes in order: across the buffer's edges,
// and with a token larger than the buffer.
TEST(VocabHash, BufferedRecordsHashAsTheirBytes) {
  VocabHash hash;
  std::string all;
  uint32_t state = 7;
  for (int32_t id = 0; id < 40000; ++id) {
    state = state * 1664525u + 1013904223u;
    std::string token((state >> 24) % 24, static_cast<char>('a' + id % 26));
    if (id == 12345) token.assign(200000, 'z');
    const uint32_t head[2] = {static_cast<uint32_t>(id), static_cast<uint32_t>(token.size())};
    all.append(reinterpret_cast<const char*>(head), sizeof head);
    all += token;
    hash.Add(id, token);
  }
  EXPECT_EQ(hash.Digest(), XXH3_64bits(all.data(), all.size()));
}

}  // namespace
}  // namespace ek::tokjson
