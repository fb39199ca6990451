#include "template/chat.h"

#include <fmt/core.h>

#include <string_view>
#include <unordered_map>

#include "core/file.h"
#include "core/json_check.h"
#include "core/utf8.h"

namespace ek::tmpl {

Result<Value> ValueFromJson(simdjson::dom::element e) {
  using T = simdjson::dom::element_type;
  switch (e.type()) {
    case T::NULL_VALUE:
      return Value::None();
    case T::BOOL:
      return Value::Bool(bool(e.get_bool()));
    case T::INT64:
      return Value::Int(int64_t(e.get_int64()));
    case T::UINT64:
      return UnsupportedError("unsupported: an integer above 2^63-1 in a record");
    case T::DOUBLE:
      return Value::Float(double(e.get_double()));
    case T::STRING:
      return Value::String(std::string(std::string_view(e.get_string())));
    case T::ARRAY: {
      List l;
      for (auto x : e.get_array()) {
        EK_ASSIGN_OR_RETURN(Value v, ValueFromJson(x));
        l.push_back(std::move(v));
      }
      return Value::MakeList(std::move(l));
    }
    case T::OBJECT: {
      // A repeated key keeps its first place and takes the last value, as Python's
      // json.loads. Dict::Set finds a key by a scan, so a large object's keys are found
      // through a hash map here: Gemma 3's tokenizer_config.json (added_tokens_decoder,
      // 6,000 keys) took ~100 ms of every pack's start through Set alone.
      Dict d;
      simdjson::dom::object object = e.get_object();
      std::unordered_map<std::string_view, size_t> place;
      const bool large = object.size() > 16;
      if (large) place.reserve(object.size());
      for (auto field : object) {
        EK_ASSIGN_OR_RETURN(Value v, ValueFromJson(field.value));
        if (!large) {
          d.Set(std::string(field.key), std::move(v));
        } else if (auto [it, fresh] = place.emplace(field.key, d.items.size()); fresh) {
          d.items.emplace_back(std::string(field.key), std::move(v));
        } else {
          d.items[it->second].second = std::move(v);
        }
      }
      return Value::MakeDict(std::move(d));
    }
  }
  return InvalidArgumentError("unknown JSON value");
}

Result<Value> ValueFromJsonText(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (auto err = parser.parse(padded).get(root); err) {
    std::string where = LocateJsonError(text);
    return InvalidArgumentError(
        "malformed JSON: " + (where.empty() ? std::string(simdjson::error_message(err)) : where));
  }
  return ValueFromJson(root);
}

namespace {

// Integer literals too large for 64 bits (tokenizer_config.json files written
// by Python carry model_max_length = 1000000000000000019884624838656, which
// json.loads reads as an int and simdjson refuses) rewritten as floats. Only
// the special tokens and the template are read from a config, so the value
// does not matter; the file must still load.
std::string WidenBigIntegers(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[i + 1];
        i += 2;
        continue;
      }
      if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      ++i;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i + (c == '-' ? 1 : 0);
      while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
      bool is_int = j >= text.size() || (text[j] != '.' && text[j] != 'e' && text[j] != 'E');
      out.append(text.substr(i, j - i));
      if (is_int && j - i > 18) out += ".0";
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

Result<Value> ReadConfig(const std::string& path) {
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto v = ValueFromJsonText(text);
  if (!v.ok()) {
    auto widened = ValueFromJsonText(WidenBigIntegers(text));
    if (widened.ok()) v = std::move(widened);
  }
  if (!v.ok()) return v.status().WithContext(path);
  if (!v->is_dict()) return InvalidArgumentError(fmt::format("{}: not a JSON object", path));
  return v;
}

// A token in a tokenizer_config.json: a string or an AddedToken object.
std::optional<std::string> TokenText(const Value& v) {
  if (v.is_string()) return v.str();
  if (v.is_dict()) {
    if (const Value* c = v.dict().Find("content"); c && c->is_string()) return c->str();
  }
  return std::nullopt;
}

// The special tokens of a parsed tokenizer_config.json (a dict).
Dict SpecialTokensOf(const Value& cfg) {
  Dict out;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                           "cls_token", "mask_token"}) {
    if (const Value* v = cfg.dict().Find(name)) {
      if (auto t = TokenText(*v)) out.Set(name, Value::String(*t));
    }
  }
  if (const Value* extra = cfg.dict().Find("extra_special_tokens"); extra && extra->is_dict()) {
    for (const auto& [k, v] : extra->dict().items) {
      if (auto t = TokenText(v)) out.Set(k, Value::String(*t));
    }
  }
  return out;
}

}  // namespace

Result<Dict> SpecialTokensFromConfig(const std::string& config_path) {
  EK_ASSIGN_OR_RETURN(Value cfg, ReadConfig(config_path));
  return SpecialTokensOf(cfg);
}

Result<ChatTemplate> ChatTemplate::Compile(std::string_view text, std::string name,
                                           Dict special_tokens) {
  if (size_t bad = FirstInvalidUtf8(text); bad != std::string_view::npos) {
    return InvalidArgumentError(fmt::format("{}: invalid UTF-8 at byte {}", name, bad));
  }
  ChatTemplate t;
  EK_ASSIGN_OR_RETURN(t.tmpl_, Template::Parse(text, std::move(name)));
  t.source_ = std::string(text);
  t.special_tokens_ = std::move(special_tokens);
  return t;
}

Result<ChatTemplate> ChatTemplate::FromText(std::string_view text, std::string name,
                                            const std::string& config_path) {
  EK_ASSIGN_OR_RETURN(ChatTemplate t, Compile(text, std::move(name), Dict()));
  if (!config_path.empty()) {
    EK_ASSIGN_OR_RETURN(t.special_tokens_, SpecialTokensFromConfig(config_path));
  }
  return t;
}

Result<ChatTemplate> ChatTemplate::FromFile(const std::string& jinja_path,
                                            const std::string& config_path) {
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(jinja_path));
  return FromText(text, jinja_path, config_path);
}

Result<ChatTemplate> ChatTemplate::FromTokenizerConfig(const std::string& config_path) {
  EK_ASSIGN_OR_RETURN(Value cfg, ReadConfig(config_path));
  const Value* t = cfg.dict().Find("chat_template");
  if (!t || t->is_none()) {
    return NotFoundError(
        fmt::format("{} has no chat_template; pass --chat-template FILE.jinja (or chatml, llama3)",
                    config_path));
  }
  // The config read once: its template and its special tokens.
  if (t->is_string())
    return Compile(t->str(), config_path + ":chat_template", SpecialTokensOf(cfg));
  if (t->is_list()) {
    for (const Value& entry : t->list()) {
      if (!entry.is_dict()) continue;
      const Value* name = entry.dict().Find("name");
      const Value* text = entry.dict().Find("template");
      if (name && name->is_string() && name->str() == "default" && text && text->is_string()) {
        return Compile(text->str(), config_path + ":chat_template[default]", SpecialTokensOf(cfg));
      }
    }
    return NotFoundError(
        fmt::format("{}: chat_template lists no template named \"default\"", config_path));
  }
  return InvalidArgumentError(
      fmt::format("{}: chat_template is neither a string nor a list", config_path));
}

Result<Value> NormalizeMessages(const Value& messages) {
  if (!messages.is_list()) return InvalidArgumentError("\"messages\" is not an array");
  List out;
  out.reserve(messages.list().size());
  for (size_t i = 0; i < messages.list().size(); ++i) {
    const Value& m = messages.list()[i];
    if (!m.is_dict()) return InvalidArgumentError(fmt::format("messages[{}] is not an object", i));
    Dict d;
    const Value* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      const Value* r = m.dict().Find(key);
      if (r && !r->is_none()) {
        reasoning = r;
        break;
      }
    }
    if (reasoning) d.Set("thinking", *reasoning);
    for (const auto& [k, v] : m.dict().items) {
      if (!v.is_none()) d.Set(k, v);
    }
    if (reasoning) d.Set("reasoning_content", *reasoning);
    out.push_back(Value::MakeDict(std::move(d)));
  }
  return Value::MakeList(std::move(out));
}

Result<Rendered> ChatTemplate::Apply(const Value& messages, const Value& tools,
                                     bool add_generation_prompt) const {
  EK_ASSIGN_OR_RETURN(Value msgs, NormalizeMessages(messages));
  Dict vars;
  vars.items.reserve(special_tokens_.items.size() + 4);
  vars.Set("messages", std::move(msgs));
  vars.Set("tools", tools.is_undefined() ? Value::None() : tools);
  vars.Set("documents", Value::None());
  vars.Set("add_generation_prompt", Value::Bool(add_generation_prompt));
  for (const auto& [k, v] : special_tokens_.items) vars.Set(k, v);
  return tmpl_.Render(vars);
}

}  // namespace ek::tmpl
