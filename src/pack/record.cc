#include "pack/record.h"

#include <fmt/core.h>

#include "core/json_check.h"
#include "tokenize/unicode.h"

namespace ek::pack {

Result<ChatTemplate> ParseChatTemplate(std::string_view name) {
  if (name.empty() || name == "none") return ChatTemplate::kNone;
  if (name == "chatml") return ChatTemplate::kChatml;
  if (name == "llama3") return ChatTemplate::kLlama3;
  return UnsupportedError(fmt::format(
      "--chat-template '{}': only the built-in templates 'chatml' and 'llama3' are supported; "
      "full Jinja chat templates are out of scope",
      name));
}

std::string_view ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kNone: return "none";
    case ChatTemplate::kChatml: return "chatml";
    case ChatTemplate::kLlama3: return "llama3";
  }
  return "none";
}

bool IsBlankLine(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

namespace {

// Jinja's trim (Python str.strip()): Unicode white space and the separators
// \x1c-\x1f that Python also counts as space.
std::string_view Trim(std::string_view s) {
  auto space_at = [&](size_t i, size_t* len) {
    uint32_t cp;
    *len = tokenize::DecodeUtf8(reinterpret_cast<const unsigned char*>(s.data()) + i, &cp);
    return tokenize::IsWhiteSpace(cp) || (cp >= 0x1C && cp <= 0x1F);
  };
  size_t b = 0, len;
  while (b < s.size() && space_at(b, &len)) b += len;
  size_t e = s.size();
  while (e > b) {
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (!space_at(k, &len)) break;
    e = k;
  }
  return s.substr(b, e - b);
}

}  // namespace

Status RecordRenderer::Render(std::string_view line, std::string* text, size_t* replaced) {
  EK_RETURN_IF_ERROR(SanitizeJsonLine(&line, opt_.invalid_utf8, &fixed_, replaced));
  padded_.assign(line);
  padded_.resize(line.size() + simdjson::SIMDJSON_PADDING, ' ');
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  auto err = parser_.iterate(padded_.data(), line.size(), padded_.size()).get(doc);
  if (!err) err = doc.get_object().get(obj);
  auto malformed = [&](simdjson::error_code e) {
    std::string where = LocateJsonError(line);
    return InvalidArgumentError("malformed JSON: " + (where.empty() ? std::string(simdjson::error_message(e)) : where));
  };
  if (err) return malformed(err);
  text->clear();
  if (opt_.chat == ChatTemplate::kNone) {
    auto field = obj.find_field_unordered(opt_.text_field);
    if (field.error() == simdjson::NO_SUCH_FIELD) {
      return InvalidArgumentError(fmt::format("record has no \"{}\" field", opt_.text_field));
    }
    std::string_view v;
    if (auto e = field.get_string().get(v); e) {
      if (e == simdjson::INCORRECT_TYPE) return InvalidArgumentError(fmt::format("\"{}\" is not a string", opt_.text_field));
      return malformed(e);
    }
    text->assign(v);
    return Status::Ok();
  }
  auto field = obj.find_field_unordered("messages");
  if (field.error() == simdjson::NO_SUCH_FIELD) return InvalidArgumentError("record has no \"messages\" field");
  simdjson::ondemand::array messages;
  if (auto e = field.get_array().get(messages); e) {
    if (e == simdjson::INCORRECT_TYPE) return InvalidArgumentError("\"messages\" is not an array");
    return malformed(e);
  }
  if (opt_.chat == ChatTemplate::kLlama3) text->append("<|begin_of_text|>");
  size_t i = 0;
  for (auto m : messages) {
    simdjson::ondemand::object msg;
    if (m.get_object().get(msg)) return InvalidArgumentError(fmt::format("messages[{}] is not an object", i));
    std::string_view role, content;
    auto r = msg.find_field_unordered("role");
    if (r.error() == simdjson::NO_SUCH_FIELD) return InvalidArgumentError(fmt::format("messages[{}] has no \"role\"", i));
    if (r.get_string().get(role)) return InvalidArgumentError(fmt::format("messages[{}].role is not a string", i));
    std::string role_copy(role);  // the next field lookup may reuse the buffer
    auto c = msg.find_field_unordered("content");
    if (c.error() == simdjson::NO_SUCH_FIELD) return InvalidArgumentError(fmt::format("messages[{}] has no \"content\"", i));
    if (c.get_string().get(content)) return InvalidArgumentError(fmt::format("messages[{}].content is not a string", i));
    if (opt_.chat == ChatTemplate::kChatml) {
      text->append("<|im_start|>").append(role_copy).append("\n").append(content).append("<|im_end|>\n");
    } else {
      text->append("<|start_header_id|>").append(role_copy).append("<|end_header_id|>\n\n")
          .append(Trim(content)).append("<|eot_id|>");
    }
    ++i;
  }
  return Status::Ok();
}

}  // namespace ek::pack
