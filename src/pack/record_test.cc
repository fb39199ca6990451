#include "pack/record.h"

#include <gtest/gtest.h>

#include "pack/record_encoder.h"

namespace ek::pack {
namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

RenderedRecord RenderRecord(const RecordOptions& opt, std::string_view line, Status* st = nullptr) {
  RecordRenderer r(opt);
  RenderedRecord out;
  size_t replaced = 0;
  Status s = r.Render(line, &out, &replaced);
  if (st) *st = s;
  if (!s.ok()) out.text = "<error>";
  return out;
}

std::string Render(const RecordOptions& opt, std::string_view line, Status* st = nullptr) {
  return RenderRecord(opt, line, st).text;
}

// The spans of `r` as the strings they cover.
std::vector<std::string> Covered(const RenderedRecord& r) {
  std::vector<std::string> out;
  for (auto [b, e] : r.spans) out.push_back(r.text.substr(b, e - b));
  return out;
}

std::shared_ptr<const tmpl::ChatTemplate> Jinja(std::string_view source) {
  auto t = tmpl::ChatTemplate::FromText(source, "test.jinja", "");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::make_shared<const tmpl::ChatTemplate>(std::move(*t));
}

const char* kConversation =
    R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " yo "},)"
    R"( {"role": "user", "content": "Again"}, {"role": "assistant", "content": "ok"}]})";

TEST(RecordTest, TextField) {
  RecordOptions opt;
  EXPECT_EQ(Render(opt, R"({"id": 3, "text": "hi\nthere"})"), "hi\nthere");
  opt.text_field = "content";
  EXPECT_EQ(Render(opt, R"({"content": "x"})"), "x");
  EXPECT_FALSE(RenderRecord(opt, R"({"content": "x"})").chat);
  // The text is the parsed string: the tokenizer skips its UTF-8 check (EncodeChecked).
  EXPECT_TRUE(RenderRecord(opt, R"({"content": "x"})").parsed_strings);
}

TEST(RecordTest, ChatmlAndLlama3MarkAssistantContentAndEndOfTurn) {
  RecordOptions opt;
  opt.chat = ChatMode::kChatml;
  opt.spans = true;
  std::string line =
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " yo "}]})";
  RenderedRecord r = RenderRecord(opt, line);
  EXPECT_EQ(r.text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n yo <|im_end|>\n");
  EXPECT_TRUE(r.chat);
  EXPECT_FALSE(r.parsed_strings);  // rendered: the tokenizer checks it
  EXPECT_EQ(Covered(r), std::vector<std::string>{" yo <|im_end|>"});
  opt.chat = ChatMode::kLlama3;
  r = RenderRecord(opt, line);
  EXPECT_EQ(r.text,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>");
  EXPECT_EQ(Covered(r), std::vector<std::string>{"yo<|eot_id|>"});
  opt.spans = false;
  EXPECT_TRUE(RenderRecord(opt, line).spans.empty());
}

TEST(RecordTest, MixedCorpusTextPassesThroughAndMessagesRender) {
  RecordOptions opt;
  opt.chat = ChatMode::kChatml;
  EXPECT_EQ(Render(opt, R"({"text": "plain"})"), "plain");
  EXPECT_EQ(Render(opt, R"({"messages": [{"role": "user", "content": "q"}]})"),
            "<|im_start|>user\nq<|im_end|>\n");
  // A record with both is a conversation (here an empty one, which is refused:
  // it would pack as a lone EOS).
  Status st;
  Render(opt, R"({"text": "t", "messages": []})", &st);
  EXPECT_NE(st.message().find("rendered to empty text"), std::string::npos) << st.message();
  opt.allow_template_drops = true;
  RenderedRecord r = RenderRecord(opt, R"({"text": "t", "messages": []})");
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.dropped_parts, 1u);
}

TEST(RecordTest, BadRecordsSayWhy) {
  RecordOptions opt;
  Status st;
  Render(opt, R"({"txt": "x"})", &st);
  EXPECT_NE(st.message().find("record matches no shape (it has fields \"txt\")"), std::string::npos)
      << st.message();
  Render(opt, R"({"text": 5})", &st);
  EXPECT_NE(st.message().find("not a string"), std::string::npos);
  Render(opt, R"({"text": "x")", &st);
  EXPECT_NE(st.message().find("malformed JSON"), std::string::npos);
  Render(opt, "{\"text\": \"a\xff\"}", &st);
  EXPECT_NE(st.message().find("byte 11: invalid UTF-8"), std::string::npos) << st.message();
  // Every kind of lone surrogate escape is refused: the parse (simdjson refuses them all,
  // which lets a line that parses skip the check) and then the check name it.
  for (std::string_view lone :
       {R"({"text": "a\ud800b"})", R"({"text": "\udc00"})", R"({"text": "\ude00\ud83d"})",
        R"({"text": "\ud800\u0041"})", R"({"text": "x", "id": "\ud800"})"}) {
    Render(opt, lone, &st);
    EXPECT_NE(st.message().find("lone surrogate"), std::string::npos)
        << lone << ": " << st.message();
  }
  // Bad UTF-8 in a line that is malformed too: the byte is named first, as it always was
  // (a line is parsed before SanitizeJsonLine checks it, and checked when the parse fails).
  Render(opt, "{\"text\": \"a\xff\"", &st);
  EXPECT_NE(st.message().find("byte 11: invalid UTF-8"), std::string::npos) << st.message();
  EXPECT_EQ(Render(opt, R"({"text": "a\ud83d\ude00"})"), "a\U0001F600");  // a pair is fine
  opt.chat = ChatMode::kChatml;
  Render(opt, R"({"messages": [{"role": "user", "content": 1}]})", &st);
  EXPECT_NE(st.message().find("messages[0].content is not a string"), std::string::npos)
      << st.message();
  opt.chat = ChatMode::kNone;
  Render(opt, R"({"messages": []})", &st);
  EXPECT_NE(st.message().find("--chat-template is none"), std::string::npos) << st.message();
  // auto without a template: the reason the packer found, at the first chat record only.
  opt.chat = ChatMode::kAuto;
  opt.no_template = "no chat template: because";
  EXPECT_EQ(Render(opt, R"({"text": "fine"})"), "fine");
  Render(opt, R"({"messages": []})", &st);
  EXPECT_EQ(st.message(), "no chat template: because");
  opt.jinja = Jinja("{% for m in messages %}{{ m.content }}{% endfor %}");
  Render(opt, R"({"messages": {"a": 1}})", &st);
  EXPECT_NE(st.message().find("\"messages\" is not an array"), std::string::npos) << st.message();
  Render(opt, R"({"messages": [], "tools": 3})", &st);
  EXPECT_NE(st.message().find("\"tools\" is not an array"), std::string::npos) << st.message();
}

TEST(RecordTest, ReplaceMode) {
  RecordOptions opt;
  opt.invalid_utf8 = InvalidUtf8Policy::kReplace;
  EXPECT_EQ(Render(opt,
                   "{\"text\": \"a\xff"
                   "b\"}"),
            "a\uFFFDb");
  // Repaired, then parsed: valid UTF-8 still.
  EXPECT_TRUE(RenderRecord(opt, "{\"text\": \"a\xff\"}").parsed_strings);
  EXPECT_EQ(Render(opt, R"({"text": "a\ud800b\ud83d\ude00"})"), "a\uFFFDb\U0001F600");
}

TEST(RecordTest, ParseChatTemplateNamesAndFiles) {
  EXPECT_EQ(ParseChatTemplate("")->mode, ChatMode::kAuto);
  EXPECT_EQ(ParseChatTemplate("auto")->mode, ChatMode::kAuto);
  EXPECT_EQ(ParseChatTemplate("none")->mode, ChatMode::kNone);
  EXPECT_EQ(ParseChatTemplate("chatml")->mode, ChatMode::kChatml);
  EXPECT_EQ(ParseChatTemplate("llama3")->mode, ChatMode::kLlama3);
  auto t = ParseChatTemplate("dir/qwen3_training.jinja");
  EXPECT_EQ(t->mode, ChatMode::kJinja);
  EXPECT_EQ(t->file, "dir/qwen3_training.jinja");
  EXPECT_FALSE(ParseLossMask("all").ok());
  EXPECT_EQ(*ParseLossMask("assistant"), LossMask::kAssistant);
}

const char* kChatmlJinja =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

TEST(RecordTest, JinjaWithGenerationBlocksGivesTheirSpans) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.spans = true;
  opt.jinja = Jinja(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n"
      "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}"
      "{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}");
  RenderedRecord r = RenderRecord(opt, kConversation);
  EXPECT_EQ(Covered(r), (std::vector<std::string>{" yo <|im_end|>", "ok<|im_end|>"}));
}

TEST(RecordTest, JinjaWithoutGenerationBlocksUsesGrowingPrefixes) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.spans = true;
  opt.jinja = Jinja(kChatmlJinja);
  RenderedRecord r = RenderRecord(opt, kConversation);
  // TRL's completion: everything message i adds after the generation prompt.
  EXPECT_EQ(Covered(r), (std::vector<std::string>{" yo <|im_end|>\n", "ok<|im_end|>\n"}));
  // Tools reach the template.
  opt.jinja = Jinja("{% if tools %}T{{ tools | length }}{{ tools[0].name }}|{% endif %}" +
                    std::string(kChatmlJinja));
  r = RenderRecord(
      opt, R"({"messages": [{"role": "assistant", "content": "a"}], "tools": [{"name": "f"}]})");
  EXPECT_EQ(r.text, "T1f|<|im_start|>assistant\na<|im_end|>\n");
  EXPECT_EQ(Covered(r), std::vector<std::string>{"a<|im_end|>\n"});
}

TEST(RecordTest, APrefixBreakingTemplateIsAnErrorNamingTheMessage) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.spans = true;
  // Like Qwen3's: only the last assistant turn keeps its reasoning.
  opt.jinja = Jinja(
      "{% for m in messages %}{{ m.role }}:{% if m.role == 'assistant' and loop.last %}<think>{{ "
      "m.reasoning_content }}"
      "</think>{% endif %}{{ m.content }};{% endfor %}{% if add_generation_prompt %}assistant:{% "
      "endif %}");
  Status st;
  RenderRecord(
      opt,
      R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"},)"
      R"( {"role": "user", "content": "q2"}, {"role": "assistant", "content": "b", "reasoning_content": "s"}]})",
      &st);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not prefix-preserving at messages[1]"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("{% generation %}"), std::string::npos) << st.message();
  // Without masks the same record renders.
  opt.spans = false;
  EXPECT_EQ(
      Render(
          opt,
          R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}]})"),
      "user:q;assistant:<think>r</think>a;");
}

TEST(RecordTest, JinjaErrorsComeBackAsErrors) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.jinja = Jinja(
      "{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}x");
  Status st;
  Render(opt, R"({"messages": [{"role": "user", "content": "q"}]})", &st);
  EXPECT_NE(st.message().find("system first"), std::string::npos) << st.message();
}

TEST(MaskFromSpansTest, ATokenIsMarkedWhenItOverlapsASpan) {
  // Tokens: [0,3) [3,5) [5,9) [9,10) [10,14)
  std::vector<uint32_t> ends{3, 5, 9, 10, 14};
  std::vector<uint8_t> mask;
  MaskFromSpans(ends, Spans{{4, 9}, {13, 14}}, &mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 1, 1, 0, 1}));
  mask.clear();
  MaskFromSpans(ends, Spans{}, &mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 0, 0, 0}));
  mask.clear();
  MaskFromSpans(ends, Spans{{0, 14}}, &mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 1, 1, 1, 1}));
  mask.clear();
  MaskFromSpans(ends, Spans{{5, 5}}, &mask);  // empty span marks nothing
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 0, 0, 0}));
}

// A batch's TaskOut is reused: Reset empties every field as a new one has it, and the id,
// mask and offset vectors keep their memory.
TEST(TaskOutTest, ResetEmptiesEveryFieldAndKeepsTheVectorsMemory) {
  TaskOut out;
  out.ids.assign(1000, 7);
  out.mask.assign(1000, 1);
  out.offsets.assign(100, 3);
  out.chat = 2;
  out.errors.push_back({1, InvalidArgumentError("x"), "tokenize"});
  out.replaced = 3;
  out.drop_records = 4;
  out.drop_parts = 5;
  const int32_t* ids = out.ids.data();
  out.Reset();
  EXPECT_TRUE(out.ids.empty() && out.mask.empty() && out.offsets.empty() && out.errors.empty());
  EXPECT_EQ(out.chat + out.replaced + out.drop_records + out.drop_parts, 0u);
  EXPECT_GE(out.ids.capacity(), 1000u);
  EXPECT_GE(out.mask.capacity(), 1000u);
  EXPECT_GE(out.offsets.capacity(), 100u);
  out.ids.push_back(1);
  EXPECT_EQ(out.ids.data(), ids);  // the same memory, no reallocation
}

}  // namespace
}  // namespace ek::pack
