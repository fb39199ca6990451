// Record shapes: the layouts fine-tuning corpora keep their records in, and
// their normalization into the one form the renderer renders: a conversation
// (`messages` of {role, content[, tool_calls]} and optional `tools`, as
// transformers' apply_chat_template takes them) or plain text.
//
//   text               {"text": "..."}
//   messages           OpenAI / Hugging Face: {"messages": [{"role", "content"}], "tools"}
//   sharegpt           {"conversations": [{"from", "value"}], "system", "tools"}
//   alpaca             {"instruction", "input", "output", "system", "history"}
//   prompt-completion  TRL: {"prompt", "completion"}, both strings or both message lists
//
// Field and role names are mappable as LLaMA-Factory's dataset_info.json does
// (`columns` and `tags`; axolotl's field_messages / message_property_mappings
// are the same two maps). The normalizations follow LLaMA-Factory's converters
// (src/llamafactory/data/converter.py: an Alpaca input joined to the
// instruction with "\n", ShareGPT's function_call value a JSON {name,
// arguments}) and transformers' chat-template documentation (a tool call's
// `arguments` is an object, not a JSON string). docs/data_shapes.md.
#pragma once

#include <simdjson.h>

#include <map>
#include <string>
#include <string_view>

#include "core/status.h"
#include "template/value.h"

namespace ek::pack {

enum class ShapeKind { kAuto, kText, kMessages, kShareGpt, kAlpaca, kPromptCompletion };

// "auto", "text", "messages", "sharegpt", "alpaca", "prompt-completion".
Result<ShapeKind> ParseShapeKind(std::string_view name);
std::string_view ShapeKindName(ShapeKind kind);

// The shape of a pack's records and the names they use. A key absent from a
// map takes the shape's default (docs/data_shapes.md lists them).
struct Shape {
  ShapeKind kind = ShapeKind::kAuto;
  // LLaMA-Factory's `columns`: messages, system, tools, prompt, query,
  // response, history, text -> the record's field name.
  std::map<std::string, std::string> columns;
  // LLaMA-Factory's `tags`: role_tag, content_tag (a message's field names) and
  // user_tag, assistant_tag, observation_tag, function_tag, system_tag (the
  // role names a record uses for each role).
  std::map<std::string, std::string> tags;
};

// "key=value,key=value" into *out; a key outside `keys` is an InvalidArgument
// error naming it, `what` (e.g. "--columns") and the keys accepted. An empty
// spec leaves *out empty.
Status ParseMap(std::string_view spec, std::string_view what,
                const std::vector<std::string_view>& keys, std::map<std::string, std::string>* out);
// The keys ParseMap accepts for columns and for tags.
const std::vector<std::string_view>& ColumnKeys();
const std::vector<std::string_view>& TagKeys();

// A Shape from its three parts as the command line (or a run file) spells
// them: kind, "messages=conversations,system=sys", "role_tag=from,...".
Result<Shape> ParseShape(std::string_view kind, std::string_view columns, std::string_view tags);
// Checks a Shape built field by field (the run file's table): the keys of
// both maps, and no empty names.
Status ValidateShape(const Shape& shape);

// A record in the renderer's form.
struct NormalizedRecord {
  bool chat = false;
  // !chat: the record's text. With `completion_start` != npos (TRL's
  // prompt/completion strings) the prompt is text[0, completion_start) and
  // only the rest is what the model learns to generate.
  std::string text;
  size_t completion_start = std::string::npos;
  // chat: the conversation and its tools (None when it has none).
  tmpl::Value messages, tools;
  // Conversational prompt/completion: the number of leading messages that are
  // the prompt (npos otherwise).
  size_t prompt_messages = std::string::npos;
};

// Normalizes one parsed record. `text_field` is the text column's name unless
// shape.columns names one. Errors carry no location (the packer adds
// file:line) and name the field, message index or role at fault.
Status NormalizeRecord(const Shape& shape, std::string_view text_field,
                       simdjson::dom::element record, NormalizedRecord* out);

}  // namespace ek::pack
