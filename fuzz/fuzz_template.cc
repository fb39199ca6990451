// The chat template engine (template/): a template's source through
// Template::Parse, rendered with a fixed small conversation as transformers
// would pass it; and, when the input has a second part (after
// kConfigSeparator), that part as a tokenizer_config.json: its special tokens
// (SpecialTokensFromConfig) and its own chat_template
// (ChatTemplate::FromTokenizerConfig), applied to the same conversation.
// A template is code: what it may do is bounded by the engine (MAX_RANGE,
// recursion depth), and what it cannot do must be an error, never a crash.
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "template/chat.h"
#include "template/template.h"

using namespace ek;

namespace {

constexpr std::string_view kConfigSeparator = "\n#EK-CONFIG#\n";

constexpr std::string_view kMessages = R"([
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "Hi <b>there</b> \u00e9\ud83d\ude00"},
  {"role": "assistant", "content": "Hello!", "reasoning_content": "greet back",
   "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
  {"role": "tool", "content": "4", "name": "add"},
  {"role": "user", "content": ["a", {"type": "text", "text": "2+2?"}]}
])";

const tmpl::Value& Messages() {
  static const tmpl::Value* messages = [] {
    auto v = tmpl::ValueFromJsonText(kMessages);
    if (!v.ok()) abort();  // the harness's own constant
    return new tmpl::Value(std::move(*v));
  }();
  return *messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = fuzz::Split(fuzz::Bytes(data, size), kConfigSeparator, 2);
  tmpl::Dict specials;
  std::string config_path;
  if (parts.size() == 2) {
    config_path = fuzz::ScratchDir() + "/tokenizer_config.json";
    fuzz::WriteWhole(config_path, parts[1]);
    if (auto s = tmpl::SpecialTokensFromConfig(config_path); s.ok()) specials = std::move(*s);
  }
  if (auto t = tmpl::Template::Parse(parts[0], "fuzz.jinja"); t.ok()) {
    tmpl::Dict vars;
    vars.Set("messages", Messages());
    vars.Set("tools", tmpl::Value::None());
    vars.Set("add_generation_prompt", tmpl::Value::Bool(true));
    for (const auto& [k, v] : specials.items) vars.Set(k, v);
    (void)t->Render(vars);
  }
  if (!config_path.empty()) {
    if (auto chat = tmpl::ChatTemplate::FromTokenizerConfig(config_path); chat.ok()) {
      (void)chat->Apply(Messages(), tmpl::Value::None(), false);
    }
    ::unlink(config_path.c_str());
  }
  return 0;
}
