#include "pack/record.h"

#include <gtest/gtest.h>

namespace ek::pack {
namespace {

std::string Render(const RecordOptions& opt, std::string_view line, Status* st = nullptr) {
  RecordRenderer r(opt);
  std::string text;
  size_t replaced = 0;
  Status s = r.Render(line, &text, &replaced);
  if (st) *st = s;
  return s.ok() ? text : "<error>";
}

TEST(RecordTest, TextField) {
  RecordOptions opt;
  EXPECT_EQ(Render(opt, R"({"id": 3, "text": "hi\nthere"})"), "hi\nthere");
  opt.text_field = "content";
  EXPECT_EQ(Render(opt, R"({"content": "x"})"), "x");
}

TEST(RecordTest, ChatmlAndLlama3) {
  RecordOptions opt;
  opt.chat = ChatTemplate::kChatml;
  std::string line = R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " yo "}]})";
  EXPECT_EQ(Render(opt, line), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n yo <|im_end|>\n");
  opt.chat = ChatTemplate::kLlama3;
  EXPECT_EQ(Render(opt, line),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>");
}

TEST(RecordTest, BadRecordsSayWhy) {
  RecordOptions opt;
  Status st;
  Render(opt, R"({"txt": "x"})", &st);
  EXPECT_NE(st.message().find("no \"text\" field"), std::string::npos);
  Render(opt, R"({"text": 5})", &st);
  EXPECT_NE(st.message().find("not a string"), std::string::npos);
  Render(opt, R"({"text": "x")", &st);
  EXPECT_NE(st.message().find("malformed JSON"), std::string::npos);
  Render(opt, "{\"text\": \"a\xff\"}", &st);
  EXPECT_NE(st.message().find("byte 11: invalid UTF-8"), std::string::npos) << st.message();
  Render(opt, R"({"text": "a\ud800b"})", &st);
  EXPECT_NE(st.message().find("lone surrogate"), std::string::npos) << st.message();
  opt.chat = ChatTemplate::kChatml;
  Render(opt, R"({"messages": [{"role": "user", "content": [1]}]})", &st);
  EXPECT_NE(st.message().find("messages[0].content is not a string"), std::string::npos);
}

TEST(RecordTest, ReplaceMode) {
  RecordOptions opt;
  opt.invalid_utf8 = InvalidUtf8Policy::kReplace;
  EXPECT_EQ(Render(opt, "{\"text\": \"a\xff" "b\"}"), "a\uFFFDb");
  EXPECT_EQ(Render(opt, R"({"text": "a\ud800b\ud83d\ude00"})"), "a\uFFFDb\U0001F600");
}

TEST(RecordTest, JinjaTemplatesAreOutOfScope) {
  auto t = ParseChatTemplate("template.jinja");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("Jinja"), std::string::npos);
}

}  // namespace
}  // namespace ek::pack
