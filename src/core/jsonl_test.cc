#include "core/jsonl.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/file.h"

namespace ek {
namespace {

std::vector<TextLine> All(LineSplitter s) {
  std::vector<TextLine> out;
  for (TextLine l; s.Next(&l);) out.push_back(l);
  return out;
}

// The sixteen-at-a-time search agrees with std::string_view::find on texts of backslashes,
// 'u's and other bytes, every length to 70 (the vector steps, their edges and the tail).
TEST(HasUnicodeEscape, AgreesWithFindAtEveryOffset) {
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned>(state >> 33);
  };
  const char alphabet[] = {'\\', 'u', 'x', 'n', '"', 'U'};
  size_t found = 0;
  for (size_t len = 0; len <= 70; ++len) {
    for (int trial = 0; trial < 200; ++trial) {
      std::string s(len, 'a');
      for (char& c : s) c = alphabet[next() % 6];
      const bool want = std::string_view(s).find("\\u") != std::string_view::npos;
      ASSERT_EQ(HasUnicodeEscape(s), want) << "'" << s << "'";
      found += want;
    }
    // The pair alone at each place, and split by one byte.
    for (size_t at = 0; at + 1 < len; ++at) {
      std::string s(len, 'u');
      s[at] = '\\';
      ASSERT_TRUE(HasUnicodeEscape(s)) << len << " " << at;
      s[at + 1] = 'x';
      if (at + 2 < len) s[at + 2] = 'x';
      ASSERT_FALSE(HasUnicodeEscape(s)) << len << " " << at;
    }
  }
  EXPECT_GT(found, 1000u);
}

TEST(LineSplitter, YieldsNumberOffsetAndTextWithoutTheNewline) {
  auto v = All(LineSplitter("a\n\nbc\r\nd"));
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].number, 1u);
  EXPECT_EQ(v[0].offset, 0u);
  EXPECT_EQ(v[0].text, "a");
  EXPECT_EQ(v[1].number, 2u);
  EXPECT_EQ(v[1].offset, 2u);
  EXPECT_EQ(v[1].text, "");
  EXPECT_EQ(v[2].offset, 3u);
  EXPECT_EQ(v[2].text, "bc\r");  // '\r' is the reader's to judge
  EXPECT_EQ(v[3].number, 4u);
  EXPECT_EQ(v[3].offset, 7u);
  EXPECT_EQ(v[3].text, "d");                       // the last line may lack its '\n'
  EXPECT_EQ(All(LineSplitter("x\n")).size(), 1u);  // no empty line after a final '\n'
  EXPECT_TRUE(All(LineSplitter("")).empty());
  LineSplitter s("x\ny\n", 10, 100);
  TextLine l;
  ASSERT_TRUE(s.Next(&l));
  ASSERT_TRUE(s.Next(&l));
  EXPECT_EQ(l.number, 11u);
  EXPECT_EQ(l.offset, 102u);
  EXPECT_FALSE(s.Next(&l));
  EXPECT_EQ(s.next_number(), 12u);
  EXPECT_EQ(s.next_offset(), 104u);
}

// Chunk by chunk, the lines keep their numbers and offsets in the whole file.
TEST(TakeCompleteLines, HandsOverWholeLinesAndKeepsTheUnfinishedOne) {
  std::string buffer = "a\n\nbc\nde";
  std::vector<std::string> got;
  auto take = [&] {
    TakeCompleteLines(&buffer, [&](const TextLine& l) { got.emplace_back(l.text); });
  };
  take();
  EXPECT_EQ(got, (std::vector<std::string>{"a", "", "bc"}));
  EXPECT_EQ(buffer, "de");
  take();  // no newline yet: nothing taken
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(buffer, "de");
  buffer += "f\r\n";
  take();
  EXPECT_EQ(got.back(), "def\r");
  EXPECT_EQ(buffer, "");
}

TEST(LineChunkReader, NextLinesNumbersLinesAcrossChunks) {
  std::string text;
  // Over 1 MiB: the reader reads 1 MiB at a time, so this is several chunks.
  for (int i = 0; i < 200000; ++i)
    text += std::string(static_cast<size_t>(i % 7), 'x') + std::to_string(i) + "\n";
  text += "last";
  const std::string path = ::testing::TempDir() + "/ek_lines_test.jsonl";
  ASSERT_TRUE(WriteFileAtomic(path, text).ok());
  auto reader = LineChunkReader::Open(path, 64);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  struct Got {
    uint64_t number, offset;
    std::string text;  // a chunk's views last until the next chunk
  };
  std::vector<Got> got;
  LineSplitter lines;
  size_t chunks = 0;
  while (true) {
    auto more = (*reader)->NextLines(&lines);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    ++chunks;
    for (TextLine l; lines.Next(&l);) got.push_back({l.number, l.offset, std::string(l.text)});
  }
  std::vector<TextLine> want = All(LineSplitter(text));
  EXPECT_GT(chunks, 1u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].number, want[i].number);
    ASSERT_EQ(got[i].offset, want[i].offset);
    ASSERT_EQ(got[i].text, want[i].text);
  }
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace ek
