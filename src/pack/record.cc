#include "pack/record.h"

#include <fmt/core.h>

#include "core/json_check.h"
#include "core/json_out.h"
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
  out->text.clear();
  out->spans.clear();
  out->chat = false;
  out->completion_only = false;
  out->parsed_strings = false;
  out->dropped_parts = 0;
  simdjson::dom::element root;
  // simdjson's parse checks the UTF-8 of the whole line and refuses every lone surrogate
  // escape (a high one not followed by a low one, a low one first: STRING_ERROR), the two
  // things SanitizeJsonLine looks for, so a line that parses needs no check of its own
  // (RecordTest.BadRecordsSayWhy holds simdjson to that); any other line takes the checked
  // path, whose errors (the byte of the bad UTF-8 first) are those a line has always had.
  // (A search of every line for "\\u" first, to send those lines to the checked path, was
  // 0.5-0.9% of a one-core pack.)
  auto parse = [this, &root](std::string_view json) {
    padded_.assign(json);
    padded_.resize(json.size() + simdjson::SIMDJSON_PADDING, ' ');
    auto e = dom_.parse(padded_.data(), json.size(), false).get(root);
    return !e && !root.is_object() ? simdjson::INCORRECT_TYPE : e;
  };
  simdjson::error_code err = parse(line);
  if (err) {
    EK_RETURN_IF_ERROR(SanitizeJsonLine(&line, opt_.invalid_utf8, &fixed_, replaced));
    err = parse(line);
  }
  if (err) {
    std::string where = LocateJsonError(line);
    if (where.empty() && err == simdjson::INCORRECT_TYPE) where = "a record is a JSON object";
    return InvalidArgumentError(
        "malformed JSON: " + (where.empty() ? std::string(simdjson::error_message(err)) : where));
  }
  EK_RETURN_IF_ERROR(NormalizeRecord(opt_.shape, opt_.text_field, root, &norm_));
  if (!norm_.chat) {
    out->text.swap(norm_.text);
    out->parsed_strings = true;
    if (norm_.completion_start != std::string::npos && opt_.spans) {
      out->completion_only = true;
      if (norm_.completion_start < out->text.size())
        out->spans.emplace_back(norm_.completion_start, out->text.size());
    }
    return Status::Ok();
  }
  if (opt_.chat == ChatMode::kNone)
    return InvalidArgumentError("record is a conversation but --chat-template is none");
  out->chat = true;
  if (opt_.chat == ChatMode::kChatml || opt_.chat == ChatMode::kLlama3) {
    EK_RETURN_IF_ERROR(RenderFixed(norm_.messages, out));
  } else {
    EK_RETURN_IF_ERROR(RenderJinja(out));
  }
  return CheckDrops(out);
}

Status RecordRenderer::RenderJinja(RenderedRecord* out) {
  if (!opt_.jinja) return InvalidArgumentError(opt_.no_template);
  const tmpl::Value& messages = norm_.messages;
  const tmpl::Value& tools = norm_.tools;
  auto rendered = opt_.jinja->Apply(messages, tools, false);
  if (!rendered.ok()) return rendered.status();
  out->text = std::move(rendered->text);
  if (!opt_.spans) return Status::Ok();
  if (opt_.jinja->tmpl().has_generation()) {
    out->spans = std::move(rendered->generation);
    return Status::Ok();
  }
  if (norm_.prompt_messages != std::string::npos) {
    // TRL's conversational prompt/completion: what follows the prompt
    // rendered with the generation prompt is the completion.
    const tmpl::List& all = messages.list();
    auto prompt = opt_.jinja->Apply(
        tmpl::Value::MakeList(
            tmpl::List(all.begin(), all.begin() + static_cast<ptrdiff_t>(norm_.prompt_messages))),
        tools, true);
    if (!prompt.ok()) return prompt.status().WithContext("rendering the prompt");
    if (out->text.compare(0, prompt->text.size(), prompt->text) != 0) {
      return InvalidArgumentError(fmt::format(
          "chat template {} is not prefix-preserving: the prompt rendered with the generation "
          "prompt is not a prefix of the whole conversation, so the completion's tokens cannot be "
          "found; use a template with {{% generation %}} blocks (--chat-template FILE.jinja) or "
          "--loss-mask none",
          opt_.jinja->tmpl().name()));
    }
    if (prompt->text.size() < out->text.size())
      out->spans.emplace_back(prompt->text.size(), out->text.size());
    return Status::Ok();
  }
  return PrefixSpans(*opt_.jinja, messages, tools, out->text, &out->spans);
}

Status RecordRenderer::RenderFixed(const tmpl::Value& messages, RenderedRecord* out) {
  std::string* text = &out->text;
  const bool llama3 = opt_.chat == ChatMode::kLlama3;
  if (llama3) text->append("<|begin_of_text|>");
  const tmpl::List& all = messages.list();
  for (size_t i = 0; i < all.size(); ++i) {
    // The normalizer made every message a dict with a string role.
    const tmpl::Dict& msg = all[i].dict();
    const std::string& role = msg.Find("role")->str();
    const tmpl::Value* c = msg.Find("content");
    std::string_view content;
    if (c && c->is_string()) {
      content = c->str();
    } else if (c && !c->is_none()) {
      return InvalidArgumentError(fmt::format("messages[{}].content is not a string", i));
    }
    size_t start;
    if (!llama3) {
      text->append("<|im_start|>").append(role).append("\n");
      start = text->size();
      text->append(content).append("<|im_end|>");
      if (opt_.spans && role == "assistant") out->spans.emplace_back(start, text->size());
      text->append("\n");
    } else {
      text->append("<|start_header_id|>").append(role).append("<|end_header_id|>\n\n");
      start = text->size();
      text->append(Trim(content)).append("<|eot_id|>");
      if (opt_.spans && role == "assistant") out->spans.emplace_back(start, text->size());
    }
  }
  return Status::Ok();
}

namespace {

// `s` as json.dumps(s, ensure_ascii=False) writes it, without the quotes: how
// a template's |tojson renders a string (core's JSON string escape is the same).
std::string JsonEscaped(std::string_view s) {
  std::string out = JsonString(s);
  return out.substr(1, out.size() - 2);
}

// Whether `text` holds `piece` as written or as |tojson writes it. Templates
// keep the messages' order, so the search starts at *from (where the previous
// piece ended) and moves it on; anywhere else in the text counts too.
bool Holds(std::string_view text, std::string_view piece, size_t* from) {
  if (size_t at = text.find(piece, *from); at != std::string_view::npos) {
    *from = at + piece.size();
    return true;
  }
  if (text.find(piece) != std::string_view::npos) return true;
  std::string escaped = JsonEscaped(piece);
  return escaped != piece && text.find(escaped) != std::string_view::npos;
}

// Whether `text` holds a message's content. A reasoning model's template re-spaces the
// thinking it keeps (Qwen3 writes "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n" +
// answer.lstrip("\n")), so the content is looked for piece by piece between its <think> and
// </think> tags, each piece trimmed, in order: thinking a template leaves out (Qwen3's of
// the turns before the last question) is still missing.
bool HoldsContent(std::string_view text, std::string_view content, size_t* from) {
  size_t at = 0;
  while (at <= content.size()) {
    size_t tag = content.find("<think>", at), close = content.find("</think>", at);
    size_t end = std::min(tag, close);
    if (end == std::string_view::npos) end = content.size();
    std::string_view piece = Trim(content.substr(at, end - at));
    if (!piece.empty() && !Holds(text, piece, from)) return false;
    if (end == content.size()) break;
    at = end +
         (end == tag ? std::string_view("<think>").size() : std::string_view("</think>").size());
  }
  return true;
}

// A tool's or tool call's function name: {"function": {"name"}} or {"name"}.
const tmpl::Value* FunctionName(const tmpl::Value& v) {
  if (!v.is_dict()) return nullptr;
  const tmpl::Value* fn = v.dict().Find("function");
  const tmpl::Value* name = fn && fn->is_dict() ? fn->dict().Find("name") : v.dict().Find("name");
  return name && name->is_string() && !name->str().empty() ? name : nullptr;
}

std::string Excerpt(std::string_view s) {
  if (s.size() <= 40) return std::string(s);
  size_t n = 40;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

}  // namespace

Status RecordRenderer::CheckDrops(RenderedRecord* out) const {
  const std::string_view text = out->text;
  std::vector<std::string> lost;
  const tmpl::List& all = norm_.messages.list();
  size_t from = 0, names_from = 0;
  if (text.empty()) lost.push_back("the conversation rendered to empty text");
  if (norm_.tools.is_list()) {
    const tmpl::List& tools = norm_.tools.list();
    for (size_t j = 0; j < tools.size(); ++j) {
      const tmpl::Value* name = FunctionName(tools[j]);
      if (name && !Holds(text, name->str(), &names_from))
        lost.push_back(
            fmt::format("its tools[{}] \"{}\" is not in the rendered text", j, name->str()));
    }
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const tmpl::Dict& msg = all[i].dict();
    const std::string& role = msg.Find("role")->str();
    const tmpl::Value* content = msg.Find("content");
    if (content && content->is_string()) {
      std::string_view c = Trim(content->str());
      if (!c.empty() && !HoldsContent(text, c, &from)) {
        lost.push_back(
            fmt::format("message {} ({}): its content \"{}\" is not in the rendered text", i, role,
                        Excerpt(c)));
      }
    }
    const tmpl::Value* calls = msg.Find("tool_calls");
    if (calls && calls->is_list()) {
      for (size_t j = 0; j < calls->list().size(); ++j) {
        const tmpl::Value* name = FunctionName(calls->list()[j]);
        if (name && !Holds(text, name->str(), &names_from)) {
          lost.push_back(
              fmt::format("message {} ({}): its tool_calls[{}] \"{}\" is not in the rendered text",
                          i, role, j, name->str()));
        }
      }
    }
  }
  if (lost.empty()) return Status::Ok();
  if (opt_.allow_template_drops) {
    out->dropped_parts = lost.size();
    return Status::Ok();
  }
  std::string by;
  if (opt_.chat == ChatMode::kChatml || opt_.chat == ChatMode::kLlama3) {
    by = fmt::format(
        "the fixed {} layout dropped it (it renders only roles and string contents, "
        "no tools or tool calls)",
        ChatModeName(opt_.chat));
  } else {
    by = fmt::format("the chat template {} dropped it", opt_.jinja->tmpl().name());
  }
  return InvalidArgumentError(fmt::format(
      "{}: {}{}; use a chat template that renders it (--chat-template FILE.jinja), or pass "
      "--allow-template-drops to pack such records as rendered (the manifest counts them under "
      "template_drops)",
      lost.front(), by,
      lost.size() > 1
          ? fmt::format(" (and {} more part(s) of the record are missing)", lost.size() - 1)
          : std::string()));
}

}  // namespace ek::pack
