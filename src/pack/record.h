// Turning one JSON line into the text a record contributes: a text field, or
// chat messages rendered with a fixed template (ChatML or Llama 3).
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "core/jsonl.h"
#include "core/status.h"

namespace ek::pack {

enum class ChatTemplate { kNone, kChatml, kLlama3 };

// "none", "chatml", "llama3"; anything else (e.g. a Jinja template path) is
// an error that says full Jinja templates are out of scope.
Result<ChatTemplate> ParseChatTemplate(std::string_view name);
std::string_view ChatTemplateName(ChatTemplate t);

struct RecordOptions {
  std::string text_field = "text";
  ChatTemplate chat = ChatTemplate::kNone;
  InvalidUtf8Policy invalid_utf8 = InvalidUtf8Policy::kError;
};

// Renders records. One per thread (holds a parser and buffers).
class RecordRenderer {
 public:
  explicit RecordRenderer(const RecordOptions& options) : opt_(options) {}
  // Sets *text to the record's text (valid UTF-8). Errors carry no location;
  // callers prefix "file:line". *replaced counts U+FFFD replacements.
  Status Render(std::string_view line, std::string* text, size_t* replaced);

 private:
  const RecordOptions& opt_;
  simdjson::ondemand::parser parser_;
  std::string padded_, fixed_;
};

// True for lines that hold only whitespace (skipped, not records).
bool IsBlankLine(std::string_view line);

}  // namespace ek::pack
