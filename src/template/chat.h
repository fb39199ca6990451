// apply_chat_template as transformers does it, over the template engine:
// where the template comes from (tokenizer_config.json, a .jinja file), which
// variables it sees (messages, tools, documents, add_generation_prompt and the
// tokenizer's named special tokens), and how messages are prepared (keys whose
// value is null dropped; reasoning aliased under reasoning_content and
// thinking). docs/template.md.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "core/status.h"
#include "template/template.h"
#include "template/value.h"

namespace ek::tmpl {

// A JSON value as Python's json.loads gives it to a template: objects keep
// their key order (a repeated key keeps its first position and last value),
// integers stay integers, numbers with a fraction or exponent are floats.
Result<Value> ValueFromJson(simdjson::dom::element e);
Result<Value> ValueFromJsonText(std::string_view text);

class ChatTemplate {
 public:
  // The chat_template of a tokenizer_config.json (a string, or a list of
  // {name, template} entries of which "default" is used) and its special tokens.
  static Result<ChatTemplate> FromTokenizerConfig(const std::string& config_path);
  // A template from a file (or text); special tokens from `config_path` when
  // it is not empty.
  static Result<ChatTemplate> FromFile(const std::string& jinja_path,
                                       const std::string& config_path);
  static Result<ChatTemplate> FromText(std::string_view text, std::string name,
                                       const std::string& config_path);

  // Renders one conversation. `messages` must be a list of objects; `tools` is
  // None or a list. Errors carry no record location (callers add it).
  Result<Rendered> Apply(const Value& messages, const Value& tools,
                         bool add_generation_prompt) const;

  const Template& tmpl() const { return tmpl_; }
  const Dict& special_tokens() const { return special_tokens_; }
  const std::string& source() const { return source_; }

 private:
  // The one place a template's text is checked and parsed, with its special tokens.
  static Result<ChatTemplate> Compile(std::string_view text, std::string name, Dict special_tokens);

  Template tmpl_;
  Dict special_tokens_;
  std::string source_;
};

// The named special tokens transformers passes to templates (bos_token,
// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token and the
// model-specific ones in extra_special_tokens), read from tokenizer_config.json.
Result<Dict> SpecialTokensFromConfig(const std::string& config_path);

// Prepares messages as transformers does before rendering.
Result<Value> NormalizeMessages(const Value& messages);

}  // namespace ek::tmpl
