// Turning one JSON record into the text it contributes: its shape (text,
// messages, ShareGPT, Alpaca, prompt/completion: pack/shape.h) normalized to
// plain text or a conversation, the text unchanged, the conversation (and its
// optional `tools`) rendered with a chat template: the model's own Jinja template (rendered as
// transformers' apply_chat_template does, src/template), or the fixed ChatML / Llama 3 layouts. A
// corpus may mix both kinds of record. With loss masks on, a chat record also yields the byte
// ranges of the text the assistant generates.
//
// Nothing lost in silence: a rendered conversation must hold each message's
// content (trimmed; empty content is exempt), the name of each tool the record
// gave and of each tool call, and must not be empty. A template that ignores
// some of it (Llama 3's ignores tools and tool_calls; Qwen3's renders nothing
// for roles it does not know) makes the record an error naming the message,
// its role and what went missing, unless allow_template_drops.
#pragma once

#include <simdjson.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/jsonl.h"
#include "core/status.h"
#include "pack/shape.h"
#include "template/chat.h"

namespace ek::pack {

enum class ChatMode {
  kNone,    // no chat records: a record with "messages" is an error
  kAuto,    // the chat_template of tokenizer_config.json beside tokenizer.json
  kChatml,  // <|im_start|>role\ncontent<|im_end|>\n
  kLlama3,  // <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  kJinja,   // a .jinja file
};

struct ChatChoice {
  ChatMode mode = ChatMode::kAuto;
  std::string file;  // kJinja: the template file
};

// "auto" (or empty), "none", "chatml", "llama3"; anything else names a Jinja
// template file.
Result<ChatChoice> ParseChatTemplate(std::string_view name);
std::string_view ChatModeName(ChatMode mode);

enum class LossMask { kNone, kAssistant };
// "none" (every token trains), "assistant" (chat records: only what the assistant generates).
Result<LossMask> ParseLossMask(std::string_view name);
std::string_view LossMaskName(LossMask m);

struct RecordOptions {
  std::string text_field = "text";
  ChatMode chat = ChatMode::kAuto;
  // kAuto and kJinja: the template; null in kAuto when there is none, and
  // then `no_template` says why (the error a chat record gets).
  std::shared_ptr<const tmpl::ChatTemplate> jinja;
  std::string no_template;
  bool spans = false;  // compute assistant spans (for --loss-mask assistant)
  InvalidUtf8Policy invalid_utf8 = InvalidUtf8Policy::kError;
  Shape shape;  // the records' shape and field/role names (pack/shape.h)
  // A conversation whose rendering lost part of it (a message's content, a
  // tool, a tool call) or is empty is an error, unless this is set: then it
  // is packed as rendered and RenderedRecord::dropped_parts counts the loss.
  bool allow_template_drops = false;
};

struct RenderedRecord {
  std::string text;   // valid UTF-8
  bool chat = false;  // rendered from messages (else: the text field)
  // `text` is strings of the record as parsed (the text field, or prompt and completion):
  // simdjson's parse checked their UTF-8, so the tokenizer need not check it again.
  bool parsed_strings = false;
  // Chat records with `spans` on: sorted, disjoint byte ranges of `text` that
  // the assistant generates. From the template's {% generation %} blocks when
  // it has them (transformers' return_assistant_tokens_mask), else by
  // rendering growing prefixes of the conversation (TRL's prompt/completion
  // rule); the built-in layouts mark each assistant content and its
  // end-of-turn token.
  std::vector<std::pair<size_t, size_t>> spans;
  // A plain-text record with a prompt (TRL's prompt/completion strings), with
  // `spans` on: spans holds the completion, the only part that trains.
  bool completion_only = false;
  // With allow_template_drops: the parts of the conversation missing from
  // `text` (0: nothing lost).
  size_t dropped_parts = 0;
};

// Renders records. One per thread (holds parsers and buffers).
class RecordRenderer {
 public:
  explicit RecordRenderer(const RecordOptions& options) : opt_(options) {}
  // Errors carry no location; callers prefix "file:line". *replaced counts
  // U+FFFD replacements (--invalid-utf8 replace).
  Status Render(std::string_view line, RenderedRecord* out, size_t* replaced);

 private:
  Status RenderFixed(const tmpl::Value& messages, RenderedRecord* out);
  Status RenderJinja(RenderedRecord* out);
  Status CheckDrops(RenderedRecord* out) const;

  const RecordOptions& opt_;
  simdjson::dom::parser dom_;
  std::string padded_, fixed_;
  NormalizedRecord norm_;
};

// Assistant spans by TRL's prefix rule: for each assistant message i, the
// rendering of messages[:i] with the generation prompt must be a prefix of the
// rendering of messages[:i+1], which must be a prefix of the whole
// conversation's rendering; the span is what message i adds. A template that
// breaks the rule (Qwen3's drops earlier turns' reasoning) is an error naming
// the message and suggesting a template with {% generation %} blocks.
Status PrefixSpans(const tmpl::ChatTemplate& chat, const tmpl::Value& messages,
                   const tmpl::Value& tools, const std::string& full,
                   std::vector<std::pair<size_t, size_t>>* spans);

// True for lines that hold only whitespace (skipped, not records).
bool IsBlankLine(std::string_view line);

}  // namespace ek::pack
