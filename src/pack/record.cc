#include "pack/record.h"

#include <fmt/core.h>

#include "core/json_check.h"
#include "tokenize/unicode.h"

namespace ek::pack {

Result<ChatChoice> ParseChatTemplate(std::string_view name) {
  ChatChoice c;
  if (name.empty() || name == "auto") return c;
  if (name == "none")
    c.mode = ChatMode::kNone;
  else if (name == "chatml")
    c.mode = ChatMode::kChatml;
  else if (name == "llama3")
    c.mode = ChatMode::kLlama3;
  else {
    c.mode = ChatMode::kJinja;
    c.file = std::string(name);
  }
  return c;
}

std::string_view ChatModeName(ChatMode mode) {
  switch (mode) {
    case ChatMode::kNone:
      return "none";
    case ChatMode::kAuto:
      return "auto";
    case ChatMode::kChatml:
      return "chatml";
    case ChatMode::kLlama3:
      return "llama3";
    case ChatMode::kJinja:
      return "jinja";
  }
  return "none";
}

Result<LossMask> ParseLossMask(std::string_view name) {
  if (name.empty() || name == "none") return LossMask::kNone;
  if (name == "assistant") return LossMask::kAssistant;
  return InvalidArgumentError(fmt::format("--loss-mask '{}': expected none or assistant", name));
}

std::string_view LossMaskName(LossMask m) {
  return m == LossMask::kAssistant ? "assistant" : "none";
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

Status PrefixSpans(const tmpl::ChatTemplate& chat, const tmpl::Value& messages,
                   const tmpl::Value& tools, const std::string& full,
                   std::vector<std::pair<size_t, size_t>>* spans) {
  using tmpl::Value;
  const tmpl::List& all = messages.list();
  auto broken = [&](size_t i, std::string_view what) {
    return InvalidArgumentError(fmt::format(
        "chat template {} is not prefix-preserving at messages[{}] ({}), so the assistant's tokens "
        "cannot be "
        "found by rendering growing prefixes; use a template with {{% generation %}} blocks "
        "(--chat-template FILE.jinja, e.g. TRL's training templates) or --loss-mask none",
        chat.tmpl().name(), i, what));
  };
  for (size_t i = 0; i < all.size(); ++i) {
    const Value& m = all[i];
    if (!m.is_dict()) continue;
    const Value* role = m.dict().Find("role");
    if (!role || !role->is_string() || role->str() != "assistant") continue;
    auto prompt = chat.Apply(
        Value::MakeList(tmpl::List(all.begin(), all.begin() + static_cast<ptrdiff_t>(i))), tools,
        true);
    if (!prompt.ok()) return prompt.status().WithContext(fmt::format("rendering messages[:{}]", i));
    auto upto = chat.Apply(
        Value::MakeList(tmpl::List(all.begin(), all.begin() + static_cast<ptrdiff_t>(i) + 1)),
        tools, false);
    if (!upto.ok()) return upto.status().WithContext(fmt::format("rendering messages[:{}]", i + 1));
    const std::string& p = prompt->text;
    const std::string& f = upto->text;
    if (f.compare(0, p.size(), p) != 0) {
      return broken(
          i,
          fmt::format("messages[:{}] with the generation prompt is not a prefix of messages[:{}]",
                      i, i + 1));
    }
    if (full.compare(0, f.size(), f) != 0) {
      return broken(i,
                    fmt::format("messages[:{}] is not a prefix of the whole conversation", i + 1));
    }
    if (!spans->empty() && p.size() < spans->back().second) {
      return broken(
          i, fmt::format(
                 "messages[:{}] with the generation prompt ends inside the previous assistant turn",
                 i));
    }
    if (f.size() > p.size()) spans->emplace_back(p.size(), f.size());
  }
  return Status::Ok();
}

Status RecordRenderer::Render(std::string_view line, RenderedRecord* out, size_t* replaced) {
  EK_RETURN_IF_ERROR(SanitizeJsonLine(&line, opt_.invalid_utf8, &fixed_, replaced));
  padded_.assign(line);
  padded_.resize(line.size() + simdjson::SIMDJSON_PADDING, ' ');
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  auto err = parser_.iterate(padded_.data(), line.size(), padded_.size()).get(doc);
  if (!err) err = doc.get_object().get(obj);
  auto malformed = [&](simdjson::error_code e) {
    std::string where = LocateJsonError(line);
    return InvalidArgumentError("malformed JSON: " +
                                (where.empty() ? std::string(simdjson::error_message(e)) : where));
  };
  if (err) return malformed(err);
  out->text.clear();
  out->spans.clear();
  out->chat = false;
  // A record with "messages" is a conversation (even when it also has a text
  // field); any other record contributes its text field unchanged.
  auto field = obj.find_field_unordered("messages");
  if (field.error() == simdjson::SUCCESS) {
    if (opt_.chat == ChatMode::kNone) {
      return InvalidArgumentError("record has \"messages\" but --chat-template is none");
    }
    out->chat = true;
    if (opt_.chat == ChatMode::kChatml || opt_.chat == ChatMode::kLlama3) {
      simdjson::ondemand::array messages;
      if (auto e = field.get_array().get(messages); e) {
        if (e == simdjson::INCORRECT_TYPE)
          return InvalidArgumentError("\"messages\" is not an array");
        return malformed(e);
      }
      return RenderFixed(messages, out);
    }
    return RenderJinja(out, line);
  }
  if (field.error() != simdjson::NO_SUCH_FIELD) return malformed(field.error());
  auto text = obj.find_field_unordered(opt_.text_field);
  if (text.error() == simdjson::NO_SUCH_FIELD) {
    return InvalidArgumentError(
        fmt::format("record has no \"{}\" field and no \"messages\"", opt_.text_field));
  }
  std::string_view v;
  if (auto e = text.get_string().get(v); e) {
    if (e == simdjson::INCORRECT_TYPE)
      return InvalidArgumentError(fmt::format("\"{}\" is not a string", opt_.text_field));
    return malformed(e);
  }
  out->text.assign(v);
  return Status::Ok();
}

Status RecordRenderer::RenderJinja(RenderedRecord* out, std::string_view line) {
  if (!opt_.jinja) return InvalidArgumentError(opt_.no_template);
  simdjson::dom::element root;
  if (auto e = dom_.parse(padded_.data(), line.size(), false).get(root); e) {
    std::string where = LocateJsonError(line);
    return InvalidArgumentError("malformed JSON: " +
                                (where.empty() ? std::string(simdjson::error_message(e)) : where));
  }
  simdjson::dom::element messages_json, tools_json;
  if (root["messages"].get(messages_json) != simdjson::SUCCESS || !messages_json.is_array())
    return InvalidArgumentError("\"messages\" is not an array");
  EK_ASSIGN_OR_RETURN(tmpl::Value messages, tmpl::ValueFromJson(messages_json));
  tmpl::Value tools = tmpl::Value::None();
  if (!root["tools"].get(tools_json) && !tools_json.is_null()) {
    if (!tools_json.is_array()) return InvalidArgumentError("\"tools\" is not an array");
    EK_ASSIGN_OR_RETURN(tools, tmpl::ValueFromJson(tools_json));
  }
  auto rendered = opt_.jinja->Apply(messages, tools, false);
  if (!rendered.ok()) return rendered.status();
  out->text = std::move(rendered->text);
  if (!opt_.spans) return Status::Ok();
  if (opt_.jinja->tmpl().has_generation()) {
    out->spans = std::move(rendered->generation);
    return Status::Ok();
  }
  return PrefixSpans(*opt_.jinja, messages, tools, out->text, &out->spans);
}

Status RecordRenderer::RenderFixed(simdjson::ondemand::array messages, RenderedRecord* out) {
  std::string* text = &out->text;
  const bool llama3 = opt_.chat == ChatMode::kLlama3;
  if (llama3) text->append("<|begin_of_text|>");
  size_t i = 0;
  for (auto m : messages) {
    simdjson::ondemand::object msg;
    if (m.get_object().get(msg))
      return InvalidArgumentError(fmt::format("messages[{}] is not an object", i));
    std::string_view role, content;
    auto r = msg.find_field_unordered("role");
    if (r.error() == simdjson::NO_SUCH_FIELD)
      return InvalidArgumentError(fmt::format("messages[{}] has no \"role\"", i));
    if (r.get_string().get(role))
      return InvalidArgumentError(fmt::format("messages[{}].role is not a string", i));
    std::string role_copy(role);  // the next field lookup may reuse the buffer
    auto c = msg.find_field_unordered("content");
    if (c.error() == simdjson::NO_SUCH_FIELD)
      return InvalidArgumentError(fmt::format("messages[{}] has no \"content\"", i));
    if (c.get_string().get(content))
      return InvalidArgumentError(fmt::format("messages[{}].content is not a string", i));
    size_t start;
    if (!llama3) {
      text->append("<|im_start|>").append(role_copy).append("\n");
      start = text->size();
      text->append(content).append("<|im_end|>");
      if (opt_.spans && role_copy == "assistant") out->spans.emplace_back(start, text->size());
      text->append("\n");
    } else {
      text->append("<|start_header_id|>").append(role_copy).append("<|end_header_id|>\n\n");
      start = text->size();
      text->append(Trim(content)).append("<|eot_id|>");
      if (opt_.spans && role_copy == "assistant") out->spans.emplace_back(start, text->size());
    }
    ++i;
  }
  return Status::Ok();
}

}  // namespace ek::pack
