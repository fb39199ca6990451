#include "pack/shape.h"

#include <gtest/gtest.h>

#include "pack/record.h"

namespace ek::pack {
namespace {

// The record normalized, as JSON ("messages | tools"), or "text:..." for plain
// text, or "error: ..." when it is refused.
std::string ShapeOf(const Shape& shape, std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root)) return "bad test json";
  NormalizedRecord out;
  Status st = NormalizeRecord(shape, "text", root, &out);
  if (!st.ok()) return "error: " + st.message();
  if (!out.chat) {
    if (out.completion_start == std::string::npos) return "text:" + out.text;
    return "text:" + out.text.substr(0, out.completion_start) + "|" +
           out.text.substr(out.completion_start);
  }
  auto j = [](const tmpl::Value& v) {
    auto s = tmpl::ToJson(v, -1, false, ", ", ": ");
    return s.ok() ? *s : "?";
  };
  std::string s = j(out.messages);
  if (!out.tools.is_none()) s += " | " + j(out.tools);
  if (out.prompt_messages != std::string::npos)
    s += " | prompt " + std::to_string(out.prompt_messages);
  return s;
}

std::string AutoShape(std::string_view json) { return ShapeOf(Shape{}, json); }

bool Has(const std::string& s, std::string_view piece) {
  return s.find(piece) != std::string::npos;
}

TEST(ShapeTest, PlainTextAndItsMappedField) {
  EXPECT_EQ(AutoShape(R"({"text": "héllo 🎉"})"), "text:héllo 🎉");
  Shape s;
  s.columns["text"] = "body";
  EXPECT_EQ(ShapeOf(s, R"({"body": "b", "text": "t"})"), "text:b");
}

TEST(ShapeTest, MessagesContentPartsAreJoinedInOrder) {
  EXPECT_EQ(AutoShape(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},)"
                      R"( {"type": "text", "text": "b ü"}]}]})"),
            R"([{"role": "user", "content": "ab ü"}])");
  std::string err = AutoShape(
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": [{"type": "text", "text": "a"},)"
      R"( {"type": "image_url", "image_url": {"url": "u"}}]}]})");
  EXPECT_TRUE(Has(err, "messages[1].content[1] is a part of type \"image_url\"")) << err;
  err = AutoShape(R"({"messages": [{"role": "user", "content": [3]}]})");
  EXPECT_TRUE(Has(err, "messages[0].content[0] is not a content part")) << err;
}

TEST(ShapeTest, ToolCallArgumentsGivenAsAJsonStringBecomeAnObject) {
  const char* rec =
      R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"type": "function", )"
      R"("function": {"name": "get_weather", "arguments": "{\"city\": \"Zürich\"}"}}]}],)"
      R"( "tools": [{"type": "function", "function": {"name": "get_weather"}}]})";
  EXPECT_EQ(AutoShape(rec),
            R"([{"role": "assistant", "content": null, "tool_calls": [{"type": "function", )"
            R"("function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]}] | )"
            R"([{"type": "function", "function": {"name": "get_weather"}}])");
  // An object stays as it is.
  EXPECT_TRUE(Has(AutoShape(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": )"
                            R"({"name": "f", "arguments": {"a": 1}}}]}]})"),
                  R"("arguments": {"a": 1})"));
  std::string err = AutoShape(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]})");
  EXPECT_TRUE(Has(err, "messages[0].tool_calls[0].function.arguments is a string that is not JSON"))
      << err;
  err = AutoShape(R"({"messages": [{"role": "assistant", "tool_calls": 3}]})");
  EXPECT_TRUE(Has(err, "messages[0].tool_calls is not an array")) << err;
}

TEST(ShapeTest, AnUnknownRoleNamesTheMessageAndTheRolesKnown) {
  std::string err = AutoShape(
      R"({"messages": [{"role": "human", "content": "hi"}, {"role": "gpt", "content": "yo"}]})");
  EXPECT_TRUE(Has(err, "messages[0] has the unknown role \"human\"")) << err;
  EXPECT_TRUE(Has(err, "\"user\", \"assistant\", \"system\", \"tool\"")) << err;
  EXPECT_TRUE(Has(err, "--tags user_tag=human,assistant_tag=gpt")) << err;
  // Mapped, the same record is a conversation.
  auto s = ParseShape("messages", "", "user_tag=human,assistant_tag=gpt");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(
      ShapeOf(
          *s,
          R"({"messages": [{"role": "human", "content": "hi"}, {"role": "gpt", "content": "yo"}]})"),
      R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])");
  err = AutoShape(R"({"messages": [{"content": "hi"}]})");
  EXPECT_TRUE(Has(err, "messages[0] has no \"role\"")) << err;
  err = AutoShape(R"({"messages": [{"role": "user"}]})");
  EXPECT_TRUE(Has(err, "messages[0] has no \"content\"")) << err;
}

TEST(ShapeTest, ShareGptRolesSystemToolsAndFunctionCalls) {
  const char* rec =
      R"({"system": "be brief", "tools": "[{\"name\": \"get_weather\"}]", "conversations": [)"
      R"({"from": "human", "value": "weather?"}, )"
      R"({"from": "function_call", "value": "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"}, )"
      R"({"from": "observation", "value": "3C"}, {"from": "gpt", "value": "3 degrees"}]})";
  EXPECT_EQ(
      AutoShape(rec),
      R"([{"role": "system", "content": "be brief"}, {"role": "user", "content": "weather?"}, )"
      R"({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": )"
      R"({"name": "get_weather", "arguments": {"city": "Oslo"}}}]}, )"
      R"({"role": "tool", "content": "3C"}, {"role": "assistant", "content": "3 degrees"}] | )"
      R"([{"name": "get_weather"}])");
  // tool is an observation too; a function call's arguments may be a JSON string.
  EXPECT_TRUE(Has(
      AutoShape(
          R"({"conversations": [{"from": "function_call", "value": )"
          R"("{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}"}, {"from": "tool", "value": "r"}]})"),
      R"("arguments": {"a": 1}}}]}, {"role": "tool", "content": "r"})"));
  // A `messages` list in ShareGPT's names is ShareGPT.
  EXPECT_EQ(AutoShape(R"({"messages": [{"from": "human", "value": "q"}]})"),
            R"([{"role": "user", "content": "q"}])");
  std::string err = AutoShape(R"({"conversations": [{"from": "bot", "value": "q"}]})");
  EXPECT_TRUE(Has(err, "conversations[0] has the unknown role \"bot\"")) << err;
  EXPECT_TRUE(
      Has(err, "\"human\", \"gpt\", \"system\", \"observation\", \"tool\", \"function_call\""))
      << err;
  err = AutoShape(R"({"conversations": [{"from": "function_call", "value": "not json"}]})");
  EXPECT_TRUE(Has(err, "conversations[0].value (a function call) is not JSON")) << err;
  err = AutoShape(R"({"conversations": [], "tools": "{bad"})");
  EXPECT_TRUE(Has(err, "\"tools\" is a string that is not JSON")) << err;
}

TEST(ShapeTest, ShareGptWithMappedColumnsAndTags) {
  auto s = ParseShape("sharegpt", "messages=dialog,system=sys",
                      "role_tag=speaker,content_tag=text,user_tag=Q,assistant_tag=A");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(
      ShapeOf(
          *s,
          R"({"sys": "S", "dialog": [{"speaker": "Q", "text": "q"}, {"speaker": "A", "text": "a"}]})"),
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "q"}, )"
      R"({"role": "assistant", "content": "a"}])");
  std::string err = ShapeOf(*s, R"({"conversations": []})");
  EXPECT_TRUE(Has(err, "record has no \"dialog\" field, which the sharegpt shape needs")) << err;
  EXPECT_TRUE(Has(err, "it has fields \"conversations\"")) << err;
}

TEST(ShapeTest, AlpacaJoinsInstructionAndInputAndKeepsHistory) {
  EXPECT_EQ(
      AutoShape(R"({"instruction": "Translate", "input": "chat", "output": "cat"})"),
      R"([{"role": "user", "content": "Translate\nchat"}, {"role": "assistant", "content": "cat"}])");
  EXPECT_EQ(AutoShape(R"({"instruction": "Hi", "input": "", "output": "yo", "system": "S",)"
                      R"( "history": [["q1", "a1"]]})"),
            R"([{"role": "system", "content": "S"}, {"role": "user", "content": "q1"}, )"
            R"({"role": "assistant", "content": "a1"}, {"role": "user", "content": "Hi"}, )"
            R"({"role": "assistant", "content": "yo"}])");
  std::string err = AutoShape(R"({"instruction": "Hi", "output": "yo", "history": [["q1"]]})");
  EXPECT_TRUE(Has(err, "\"history\"[0] is not a [user, assistant] pair")) << err;
  err = ShapeOf(Shape{ShapeKind::kAlpaca, {}, {}}, R"({"instruction": "Hi"})");
  EXPECT_TRUE(Has(err, "record has no \"output\" field, which the alpaca shape needs")) << err;
  auto s = ParseShape("alpaca", "prompt=q,response=a", "");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(ShapeOf(*s, R"({"q": "x", "a": "y"})"),
            R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])");
}

TEST(ShapeTest, PromptCompletionStringsOrMessageLists) {
  EXPECT_EQ(AutoShape(R"({"prompt": "2+2=", "completion": "4"})"), "text:2+2=|4");
  EXPECT_EQ(
      AutoShape(R"({"prompt": [{"role": "user", "content": "2+2?"}], "completion": )"
                R"([{"role": "assistant", "content": "4"}]})"),
      R"([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}] | prompt 1)");
  std::string err =
      AutoShape(R"({"prompt": "2+2=", "completion": [{"role": "assistant", "content": "4"}]})");
  EXPECT_TRUE(Has(err, "must both be strings (plain text) or both message lists")) << err;
}

TEST(ShapeTest, ARecordOfNoShapeNamesItsFieldsAndTheShapes) {
  std::string err = AutoShape(R"({"question": "q", "answer": "a"})");
  EXPECT_TRUE(Has(err, "record matches no shape (it has fields \"question\", \"answer\")")) << err;
  EXPECT_TRUE(Has(err, "alpaca (\"instruction\" and \"output\")")) << err;
  EXPECT_TRUE(Has(err, "--columns")) << err;
  err = ShapeOf(Shape{ShapeKind::kText, {}, {}}, R"({"messages": []})");
  EXPECT_TRUE(Has(err, "record has no \"text\" field, which the text shape needs")) << err;
}

TEST(ShapeTest, ParseShapeNamesTheBadKey) {
  EXPECT_FALSE(ParseShape("chatml", "", "").ok());
  auto s = ParseShape("auto", "messages=conv,bogus=x", "");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Has(s.status().message(), "columns: unknown key \"bogus\"")) << s.status().message();
  s = ParseShape("auto", "", "user=human");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Has(s.status().message(), "tags: unknown key \"user\"; the keys are role_tag"))
      << s.status().message();
  s = ParseShape("auto", "text", "");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Has(s.status().message(), "wants key=value pairs")) << s.status().message();
  s = ParseShape("auto", "text=a,text=b", "");
  EXPECT_FALSE(s.ok());
  Shape bad;
  bad.tags["role_tag"] = "";
  EXPECT_FALSE(ValidateShape(bad).ok());
  EXPECT_EQ(*ParseShapeKind("prompt-completion"), ShapeKind::kPromptCompletion);
  EXPECT_EQ(ShapeKindName(ShapeKind::kShareGpt), "sharegpt");
}

// --- the renderer's check that nothing was lost -------------------------------------------

std::shared_ptr<const tmpl::ChatTemplate> ShapeJinja(std::string_view source) {
  auto t = tmpl::ChatTemplate::FromText(source, "test.jinja", "");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::make_shared<const tmpl::ChatTemplate>(std::move(*t));
}

// Like Llama 3's: roles and contents, no tools, no tool calls.
const char* kNoToolsJinja =
    "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{% endfor %}";
// Like Qwen3's: only the roles it knows.
const char* kKnownRolesJinja =
    "{% for m in messages %}{% if m.role == 'user' or m.role == 'assistant' %}"
    "<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}";
// Renders everything.
const char* kToolsJinja =
    "{% for t in tools or [] %}[{{ t.function.name }}]{% endfor %}"
    "{% for m in messages %}<{{ m.role }}>{{ m.content | tojson }}"
    "{% for c in m.tool_calls or [] %}{{ c.function.name }}({{ c.function.arguments | tojson }})"
    "{% endfor %}{% endfor %}";

const char* kToolRecord =
    R"({"messages": [{"role": "user", "content": "weather in \"Oslo\"?\n"}, {"role": "assistant", "content": "", )"
    R"("tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}, )"
    R"({"role": "tool", "content": "3C"}], "tools": [{"type": "function", "function": {"name": "get_weather"}}, )"
    R"({"type": "function", "function": {"name": "get_time"}}]})";

Status RenderShaped(const RecordOptions& opt, std::string_view line, RenderedRecord* out) {
  RecordRenderer r(opt);
  size_t replaced = 0;
  return r.Render(line, out, &replaced);
}

TEST(TemplateDropTest, ATemplateThatIgnoresToolsAndToolCallsIsAnErrorNamingWhat) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.jinja = ShapeJinja(kNoToolsJinja);
  RenderedRecord r;
  Status st = RenderShaped(opt, kToolRecord, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(),
                  "its tools[0] \"get_weather\" is not in the rendered text: the chat "
                  "template test.jinja dropped it"))
      << st.message();
  EXPECT_TRUE(Has(st.message(), "(and 2 more part(s) of the record are missing)")) << st.message();
  EXPECT_TRUE(Has(st.message(), "--allow-template-drops")) << st.message();
  opt.allow_template_drops = true;
  ASSERT_TRUE(RenderShaped(opt, kToolRecord, &r).ok());
  EXPECT_EQ(r.dropped_parts, 3u);  // two tools and one tool call
  EXPECT_EQ(r.text, "<user>weather in \"Oslo\"?<assistant><tool>3C");
}

TEST(TemplateDropTest, ATemplateThatRendersToolsPassesEvenThroughTojson) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.jinja = ShapeJinja(kToolsJinja);
  RenderedRecord r;
  Status st = RenderShaped(opt, kToolRecord, &r);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(r.dropped_parts, 0u);
  // The string arguments reached the template as an object.
  EXPECT_TRUE(Has(r.text, R"(get_weather({"city": "Oslo"}))")) << r.text;
}

// Like Qwen3's: an answer's thinking re-spaced ("<think>\n" + reasoning.strip("\n") +
// "\n</think>\n\n" + answer.lstrip("\n")) in the last turn, left out in the turns before.
const char* kReasoningJinja =
    "{% set ns = namespace(last=0) %}{% for m in messages %}{% if m.role == 'user' %}"
    "{% set ns.last = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}<{{ m.role }}>{% if '</think>' in m.content %}"
    "{% set answer = m.content.split('</think>')[-1].lstrip('\n') %}"
    "{% if loop.index0 > ns.last %}<think>\n"
    "{{ m.content.split('</think>')[0].split('<think>')[-1].strip('\n') }}\n</think>\n\n"
    "{% endif %}{{ answer }}{% else %}{{ m.content }}{% endif %}{% endfor %}";

TEST(TemplateDropTest, ThinkingATemplateRespacesIsNotADropButThinkingItLeavesOutIs) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.jinja = ShapeJinja(kReasoningJinja);
  RenderedRecord r;
  const std::string turn =
      R"({"role": "user", "content": "Sum up: notes\n"}, )"
      R"({"role": "assistant", "content": "<think>\nLet me look. Notes\n\n</think>\n\nThey say: fixes.\n"})";
  Status st = RenderShaped(opt, R"({"messages": [)" + turn + "]}", &r);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(r.text,
            "<user>Sum up: notes\n<assistant><think>\nLet me look. Notes\n</think>\n\nThey say: "
            "fixes.\n");
  EXPECT_EQ(r.dropped_parts, 0u);
  // A turn before the last question loses its thinking: named, unless allowed.
  const std::string two =
      R"({"messages": [)" + turn +
      R"(, {"role": "user", "content": "Again?"}, {"role": "assistant", "content": "Yes."}]})";
  st = RenderShaped(opt, two, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(), "message 1 (assistant): its content \"<think>")) << st.message();
  opt.allow_template_drops = true;
  ASSERT_TRUE(RenderShaped(opt, two, &r).ok());
  EXPECT_EQ(r.dropped_parts, 1u);
  // An answer a template leaves out is missing too, thinking kept or not.
  opt.allow_template_drops = false;
  opt.jinja = ShapeJinja(
      "{% for m in messages %}<{{ m.role }}>{{ m.content.split('</think>')[0] }}{% endfor %}");
  EXPECT_FALSE(RenderShaped(opt, R"({"messages": [)" + turn + "]}", &r).ok());
}

TEST(TemplateDropTest, RolesATemplateSkipsAreCaughtAsDroppedContent) {
  RecordOptions opt;
  opt.chat = ChatMode::kJinja;
  opt.jinja = ShapeJinja(kKnownRolesJinja);
  RenderedRecord r;
  // A system message the template skips: its content is missing.
  Status st = RenderShaped(
      opt,
      R"({"messages": [{"role": "system", "content": "Be terse"}, {"role": "user", "content": "q"}]})",
      &r);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(
      Has(st.message(), "message 0 (system): its content \"Be terse\" is not in the rendered text"))
      << st.message();
  // Unknown roles never reach the template; with the ShareGPT shape they render.
  st = RenderShaped(opt, R"({"messages": [{"role": "human", "content": "q"}]})", &r);
  EXPECT_TRUE(Has(st.message(), "unknown role \"human\"")) << st.message();
  ASSERT_TRUE(
      RenderShaped(
          opt,
          R"({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]})",
          &r)
          .ok());
  EXPECT_EQ(r.text, "<user>q<assistant>a");
  // Empty content is exempt.
  ASSERT_TRUE(
      RenderShaped(
          opt,
          R"({"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "  "}]})",
          &r)
          .ok());
}

TEST(TemplateDropTest, FixedLayoutsRenderNoToolsSoToolsAreDrops) {
  RecordOptions opt;
  opt.chat = ChatMode::kChatml;
  RenderedRecord r;
  Status st = RenderShaped(opt, kToolRecord, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(), "the fixed chatml layout dropped it")) << st.message();
  opt.chat = ChatMode::kLlama3;
  ASSERT_TRUE(RenderShaped(opt, R"({"instruction": "Hi", "output": " yo "})", &r).ok());
  EXPECT_EQ(r.text,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>");
}

TEST(TemplateDropTest, PromptCompletionSpans) {
  RecordOptions opt;
  opt.spans = true;
  RenderedRecord r;
  ASSERT_TRUE(RenderShaped(opt, R"({"prompt": "2+2=", "completion": "4 🎉"})", &r).ok());
  EXPECT_FALSE(r.chat);
  EXPECT_TRUE(r.completion_only);
  EXPECT_EQ(r.text, "2+2=4 🎉");
  ASSERT_EQ(r.spans.size(), 1u);
  EXPECT_EQ(r.text.substr(r.spans[0].first), "4 🎉");
  // Conversational: what follows the prompt with its generation prompt (TRL).
  opt.chat = ChatMode::kJinja;
  opt.jinja = ShapeJinja(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}");
  ASSERT_TRUE(
      RenderShaped(opt,
                   R"({"prompt": [{"role": "user", "content": "q"}], "completion": )"
                   R"([{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]})",
                   &r)
          .ok());
  EXPECT_TRUE(r.chat);
  ASSERT_EQ(r.spans.size(), 1u);
  EXPECT_EQ(r.text.substr(r.spans[0].first, r.spans[0].second - r.spans[0].first),
            "a</s><user>b</s>");
}

}  // namespace
}  // namespace ek::pack
