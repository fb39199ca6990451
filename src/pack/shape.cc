// Over 600 lines: one normalizer per record shape (messages, ShareGPT, Alpaca, TRL
// prompt/completion, text) beside the mapping parsers they share; split it by shape when a
// sixth shape comes.
#include "pack/shape.h"

#include <fmt/core.h>

#include <utility>
#include <vector>

#include "template/chat.h"

namespace ek::pack {

using tmpl::Dict;
using tmpl::List;
using tmpl::Value;

namespace {

struct KindName {
  ShapeKind kind;
  std::string_view name;
};
constexpr KindName kKindNames[] = {
    {ShapeKind::kAuto, "auto"},         {ShapeKind::kText, "text"},
    {ShapeKind::kMessages, "messages"}, {ShapeKind::kShareGpt, "sharegpt"},
    {ShapeKind::kAlpaca, "alpaca"},     {ShapeKind::kPromptCompletion, "prompt-completion"},
};

std::string JoinQuoted(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// The roles a normalized conversation has; kFunctionCall is ShareGPT's
// function_call turn, which becomes an assistant message with tool_calls.
enum class Role { kUser, kAssistant, kSystem, kTool, kFunctionCall };

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kSystem:
      return "system";
    case Role::kTool:
      return "tool";
    case Role::kFunctionCall:
      return "assistant";
  }
  return "user";
}

// A record's role names, for one shape, after the --tags overrides.
struct Tags {
  std::string role, content;
  std::vector<std::pair<std::string, Role>> roles;

  const Role* Find(std::string_view name) const {
    for (const auto& [n, r] : roles) {
      if (n == name) return &r;
    }
    return nullptr;
  }
  std::string Known() const {
    std::string out;
    for (const auto& [n, r] : roles) out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", n);
    return out;
  }
};

std::string TagOr(const Shape& s, const std::string& key, std::string_view def) {
  auto it = s.tags.find(key);
  return it == s.tags.end() ? std::string(def) : it->second;
}

// LLaMA-Factory's defaults: the OpenAI names for `messages`, ShareGPT's for
// `conversations` (observation and tool both name a tool's answer).
Tags TagsFor(const Shape& s, bool sharegpt) {
  Tags t;
  t.role = TagOr(s, "role_tag", sharegpt ? "from" : "role");
  t.content = TagOr(s, "content_tag", sharegpt ? "value" : "content");
  auto add = [&](const char* key, std::string_view def, Role r) {
    t.roles.emplace_back(TagOr(s, key, def), r);
  };
  add("user_tag", sharegpt ? "human" : "user", Role::kUser);
  add("assistant_tag", sharegpt ? "gpt" : "assistant", Role::kAssistant);
  add("system_tag", "system", Role::kSystem);
  if (sharegpt) {
    add("observation_tag", "observation", Role::kTool);
    if (!s.tags.count("observation_tag")) t.roles.emplace_back("tool", Role::kTool);
    add("function_tag", "function_call", Role::kFunctionCall);
  } else {
    add("observation_tag", "tool", Role::kTool);
    if (s.tags.count("function_tag")) add("function_tag", "", Role::kFunctionCall);
  }
  return t;
}

// The field a column of shape `kind` is read from: --columns, else the
// shape's default ("" when the shape has none).
std::string ColumnOr(const Shape& s, const std::string& key, std::string_view def) {
  auto it = s.columns.find(key);
  return it == s.columns.end() ? std::string(def) : it->second;
}

std::string_view DefaultColumn(ShapeKind kind, std::string_view key) {
  struct D {
    ShapeKind kind;
    std::string_view key, field;
  };
  static constexpr D kDefaults[] = {
      {ShapeKind::kMessages, "messages", "messages"},
      {ShapeKind::kMessages, "tools", "tools"},
      {ShapeKind::kShareGpt, "messages", "conversations"},
      {ShapeKind::kShareGpt, "system", "system"},
      {ShapeKind::kShareGpt, "tools", "tools"},
      {ShapeKind::kAlpaca, "prompt", "instruction"},
      {ShapeKind::kAlpaca, "query", "input"},
      {ShapeKind::kAlpaca, "response", "output"},
      {ShapeKind::kAlpaca, "system", "system"},
      {ShapeKind::kAlpaca, "history", "history"},
      {ShapeKind::kPromptCompletion, "prompt", "prompt"},
      {ShapeKind::kPromptCompletion, "response", "completion"},
  };
  for (const auto& d : kDefaults) {
    if (d.kind == kind && d.key == key) return d.field;
  }
  return "";
}

class Normalizer {
 public:
  Normalizer(const Shape& shape, std::string_view text_field, simdjson::dom::element record)
      : shape_(shape), text_field_(text_field), record_(record) {}

  Status Run(NormalizedRecord* out);

 private:
  std::string Column(ShapeKind kind, std::string_view key) const {
    return ColumnOr(shape_, std::string(key),
                    key == "text" ? text_field_ : DefaultColumn(kind, key));
  }
  bool Has(const std::string& field) const {
    simdjson::dom::element e;
    return !field.empty() && record_.at_key(field).get(e) == simdjson::SUCCESS;
  }
  // The field's value; Undefined when absent (or `field` is empty).
  Result<Value> Field(const std::string& field) const {
    simdjson::dom::element e;
    if (field.empty() || record_.at_key(field).get(e) != simdjson::SUCCESS) return Value();
    return tmpl::ValueFromJson(e);
  }
  Result<ShapeKind> Detect();
  std::string FieldsItHas() const;
  Status Missing(ShapeKind kind, const std::string& field) const {
    return InvalidArgumentError(fmt::format(
        "record has no \"{}\" field, which the {} shape needs (it has {}); name the field with "
        "--columns or choose another --shape (docs/data_shapes.md)",
        field, ShapeKindName(kind), FieldsItHas()));
  }

  Status Conversation(ShapeKind kind, const Value& list, const std::string& field, const Tags& tags,
                      List* out) const;
  Status Message(const Value& m, const std::string& where, const Tags& tags, List* out) const;
  Status Content(const Value& c, const std::string& where, Value* out) const;
  Status ToolCalls(const Value& calls, const std::string& where, Value* out) const;
  Status Tools(ShapeKind kind, Value* out) const;
  Status System(ShapeKind kind, List* out) const;
  Result<std::string> OptString(const std::string& field) const;

  Status Text(NormalizedRecord* out) const;
  Status Messages(ShapeKind kind, NormalizedRecord* out) const;
  Status Alpaca(NormalizedRecord* out) const;
  Status PromptCompletion(NormalizedRecord* out) const;

  const Shape& shape_;
  std::string text_field_;
  simdjson::dom::element record_;
  std::string messages_field_;  // auto: a ShareGPT list found under the messages column
};

std::string Normalizer::FieldsItHas() const {
  std::string out;
  simdjson::dom::object obj;
  if (record_.get_object().get(obj)) return "no fields";
  size_t n = 0;
  for (auto field : obj) {
    if (n++ == 12) {
      out += ", ...";
      break;
    }
    out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", std::string_view(field.key));
  }
  return out.empty() ? "no fields" : "fields " + out;
}

Result<ShapeKind> Normalizer::Detect() {
  // A record with messages is a conversation even when it also has a text
  // field. A `messages` list whose first message uses ShareGPT's names (from/
  // value) is ShareGPT, as Hugging Face datasets often store it.
  const std::string messages = Column(ShapeKind::kMessages, "messages");
  if (Has(messages)) {
    simdjson::dom::array list;
    bool sharegpt_names = false;
    if (!shape_.tags.count("role_tag") && record_.at_key(messages).get_array().get(list) == 0) {
      for (simdjson::dom::element first : list) {
        sharegpt_names =
            first.is_object() && first.at_key("role").error() && !first.at_key("from").error();
        break;
      }
    }
    if (sharegpt_names) {
      messages_field_ = messages;
      return ShapeKind::kShareGpt;
    }
    return ShapeKind::kMessages;
  }
  if (Has(Column(ShapeKind::kShareGpt, "messages"))) return ShapeKind::kShareGpt;
  if (Has(Column(ShapeKind::kPromptCompletion, "prompt")) &&
      Has(Column(ShapeKind::kPromptCompletion, "response")))
    return ShapeKind::kPromptCompletion;
  if (Has(Column(ShapeKind::kAlpaca, "prompt")) && Has(Column(ShapeKind::kAlpaca, "response")))
    return ShapeKind::kAlpaca;
  if (Has(Column(ShapeKind::kText, "text"))) return ShapeKind::kText;
  return InvalidArgumentError(fmt::format(
      "record matches no shape (it has {}); the shapes accepted: text (\"{}\"), messages "
      "(\"{}\"), sharegpt (\"{}\"), alpaca (\"{}\" and \"{}\"), prompt-completion (\"{}\" and "
      "\"{}\"); map other field names with --columns (e.g. --columns text=body) or choose one "
      "with --shape (docs/data_shapes.md)",
      FieldsItHas(), Column(ShapeKind::kText, "text"), messages,
      Column(ShapeKind::kShareGpt, "messages"), Column(ShapeKind::kAlpaca, "prompt"),
      Column(ShapeKind::kAlpaca, "response"), Column(ShapeKind::kPromptCompletion, "prompt"),
      Column(ShapeKind::kPromptCompletion, "response")));
}

Status Normalizer::Run(NormalizedRecord* out) {
  out->chat = false;
  out->text.clear();
  out->completion_start = std::string::npos;
  out->prompt_messages = std::string::npos;
  out->messages = Value();
  out->tools = Value::None();
  ShapeKind kind = shape_.kind;
  if (kind == ShapeKind::kAuto) {
    EK_ASSIGN_OR_RETURN(kind, Detect());
  }
  switch (kind) {
    case ShapeKind::kText:
      return Text(out);
    case ShapeKind::kMessages:
    case ShapeKind::kShareGpt:
      return Messages(kind, out);
    case ShapeKind::kAlpaca:
      return Alpaca(out);
    case ShapeKind::kPromptCompletion:
      return PromptCompletion(out);
    case ShapeKind::kAuto:
      break;
  }
  return InternalError("shape: unreachable");
}

Status Normalizer::Text(NormalizedRecord* out) const {
  const std::string field = Column(ShapeKind::kText, "text");
  simdjson::dom::element e;
  if (record_.at_key(field).get(e)) return Missing(ShapeKind::kText, field);
  std::string_view v;
  if (e.get_string().get(v))
    return InvalidArgumentError(fmt::format("\"{}\" is not a string", field));
  out->text.assign(v);
  return Status::Ok();
}

Status Normalizer::Content(const Value& c, const std::string& where, Value* out) const {
  if (c.is_string() || c.is_none()) {
    *out = c;
    return Status::Ok();
  }
  if (!c.is_list()) {
    return InvalidArgumentError(fmt::format(
        "{}.content is not a string (nor a list of text parts) but {}", where, c.TypeName()));
  }
  // OpenAI's content parts: the text parts joined in order, nothing between.
  std::string joined;
  for (size_t j = 0; j < c.list().size(); ++j) {
    const Value& part = c.list()[j];
    const Value* type = part.is_dict() ? part.dict().Find("type") : nullptr;
    const Value* text = part.is_dict() ? part.dict().Find("text") : nullptr;
    if (!type || !type->is_string()) {
      return InvalidArgumentError(fmt::format(
          "{}.content[{}] is not a content part (an object with a \"type\")", where, j));
    }
    if (type->str() != "text") {
      return InvalidArgumentError(fmt::format(
          "{}.content[{}] is a part of type \"{}\"; only text parts can be packed (drop the "
          "record's other parts, or skip such records with --skip-bad)",
          where, j, type->str()));
    }
    if (!text || !text->is_string())
      return InvalidArgumentError(fmt::format("{}.content[{}].text is not a string", where, j));
    joined += text->str();
  }
  *out = Value::String(std::move(joined));
  return Status::Ok();
}

// A tool call's arguments as an object: transformers' templates expect a
// dict (a JSON string would be rendered as a quoted string).
Status NormalizeArguments(Value* holder, const std::string& where) {
  Value* args = holder->is_dict() ? holder->mutable_dict().Find("arguments") : nullptr;
  if (!args || !args->is_string()) return Status::Ok();
  auto parsed = tmpl::ValueFromJsonText(args->str());
  if (!parsed.ok()) {
    return InvalidArgumentError(fmt::format(
        "{}.arguments is a string that is not JSON ({}); write the arguments as an object or a "
        "JSON string of one",
        where, parsed.status().message()));
  }
  *args = std::move(*parsed);
  return Status::Ok();
}

// A deep-enough copy of a dict: its items, so that normalizing does not touch
// the value it came from (dicts are shared by reference).
Value CopyDict(const Value& v) {
  Dict d = v.dict();
  return Value::MakeDict(std::move(d));
}

Status Normalizer::ToolCalls(const Value& calls, const std::string& where, Value* out) const {
  if (!calls.is_list()) return InvalidArgumentError(fmt::format("{} is not an array", where));
  List list;
  for (size_t j = 0; j < calls.list().size(); ++j) {
    const Value& call = calls.list()[j];
    std::string at = fmt::format("{}[{}]", where, j);
    if (!call.is_dict()) return InvalidArgumentError(fmt::format("{} is not an object", at));
    Value copy = CopyDict(call);
    if (Value* fn = copy.mutable_dict().Find("function"); fn && fn->is_dict()) {
      *fn = CopyDict(*fn);
      EK_RETURN_IF_ERROR(NormalizeArguments(fn, at + ".function"));
    } else {
      EK_RETURN_IF_ERROR(NormalizeArguments(&copy, at));
    }
    list.push_back(std::move(copy));
  }
  *out = Value::MakeList(std::move(list));
  return Status::Ok();
}

Status Normalizer::Message(const Value& m, const std::string& where, const Tags& tags,
                           List* out) const {
  if (!m.is_dict()) return InvalidArgumentError(fmt::format("{} is not an object", where));
  const Value* role = m.dict().Find(tags.role);
  if (!role) return InvalidArgumentError(fmt::format("{} has no \"{}\"", where, tags.role));
  if (!role->is_string())
    return InvalidArgumentError(fmt::format("{}.{} is not a string", where, tags.role));
  const Role* r = tags.Find(role->str());
  if (!r) {
    return InvalidArgumentError(fmt::format(
        "{} has the unknown role \"{}\"; the roles known are {}; map a record's own role names "
        "with --tags (e.g. --tags user_tag=human,assistant_tag=gpt) or choose the shape with "
        "--shape sharegpt (docs/data_shapes.md)",
        where, role->str(), tags.Known()));
  }
  Dict d;
  d.Set("role", Value::String(std::string(RoleName(*r))));
  const Value* content = m.dict().Find(tags.content);
  if (*r == Role::kFunctionCall) {
    // LLaMA-Factory's function_call turn: a JSON {"name", "arguments"} (or a
    // list of them) that the assistant calls.
    Value calls;
    if (content && content->is_string()) {
      auto parsed = tmpl::ValueFromJsonText(content->str());
      if (!parsed.ok()) {
        return InvalidArgumentError(
            fmt::format("{}.{} (a function call) is not JSON ({}); write it as {{\"name\": ..., "
                        "\"arguments\": {{...}}}}",
                        where, tags.content, parsed.status().message()));
      }
      calls = std::move(*parsed);
    } else if (content) {
      calls = *content;
    } else {
      return InvalidArgumentError(fmt::format("{} has no \"{}\"", where, tags.content));
    }
    List wrapped;
    for (const Value& c : calls.is_list() ? calls.list() : List{calls}) {
      const Value* name = c.is_dict() ? c.dict().Find("name") : nullptr;
      if (!name || !name->is_string()) {
        return InvalidArgumentError(fmt::format(
            "{}.{} (a function call) has no \"name\" string; write it as {{\"name\": ..., "
            "\"arguments\": {{...}}}}",
            where, tags.content));
      }
      Dict call;
      call.Set("type", Value::String("function"));
      call.Set("function", c);
      wrapped.push_back(Value::MakeDict(std::move(call)));
    }
    d.Set("content", Value::String(""));
    Value normalized;
    EK_RETURN_IF_ERROR(
        ToolCalls(Value::MakeList(std::move(wrapped)), where + ".tool_calls", &normalized));
    d.Set("tool_calls", std::move(normalized));
    out->push_back(Value::MakeDict(std::move(d)));
    return Status::Ok();
  }
  const Value* calls = m.dict().Find("tool_calls");
  if (!content && (!calls || calls->is_none())) {
    return InvalidArgumentError(fmt::format("{} has no \"{}\"", where, tags.content));
  }
  if (content) {
    Value c;
    EK_RETURN_IF_ERROR(Content(*content, where, &c));
    d.Set("content", std::move(c));
  }
  for (const auto& [k, v] : m.dict().items) {
    if (k == tags.role || k == tags.content || k == "role" || k == "content") continue;
    if (k == "tool_calls" && !v.is_none()) {
      Value normalized;
      EK_RETURN_IF_ERROR(ToolCalls(v, where + ".tool_calls", &normalized));
      d.Set(k, std::move(normalized));
    } else {
      d.Set(k, v);
    }
  }
  out->push_back(Value::MakeDict(std::move(d)));
  return Status::Ok();
}

Status Normalizer::Conversation(ShapeKind kind, const Value& list, const std::string& field,
                                const Tags& tags, List* out) const {
  if (!list.is_list()) {
    return InvalidArgumentError(fmt::format("\"{}\" is not an array (the {} shape's messages)",
                                            field, ShapeKindName(kind)));
  }
  for (size_t i = 0; i < list.list().size(); ++i) {
    EK_RETURN_IF_ERROR(Message(list.list()[i], fmt::format("{}[{}]", field, i), tags, out));
  }
  return Status::Ok();
}

Status Normalizer::Tools(ShapeKind kind, Value* out) const {
  const std::string field = Column(kind, "tools");
  EK_ASSIGN_OR_RETURN(Value tools, Field(field));
  if (tools.is_undefined() || tools.is_none()) return Status::Ok();
  if (tools.is_string()) {
    // ShareGPT keeps its tools as a JSON string of the list.
    if (tools.str().find_first_not_of(" \t\r\n") == std::string::npos) return Status::Ok();
    auto parsed = tmpl::ValueFromJsonText(tools.str());
    if (!parsed.ok()) {
      return InvalidArgumentError(fmt::format("\"{}\" is a string that is not JSON ({})", field,
                                              parsed.status().message()));
    }
    tools = std::move(*parsed);
  }
  if (!tools.is_list()) {
    return InvalidArgumentError(fmt::format(
        "\"{}\" is not an array (or a JSON string of one) but {}", field, tools.TypeName()));
  }
  *out = std::move(tools);
  return Status::Ok();
}

Result<std::string> Normalizer::OptString(const std::string& field) const {
  EK_ASSIGN_OR_RETURN(Value v, Field(field));
  if (v.is_undefined() || v.is_none()) return std::string();
  if (!v.is_string()) return InvalidArgumentError(fmt::format("\"{}\" is not a string", field));
  return v.str();
}

Status Normalizer::System(ShapeKind kind, List* out) const {
  // The messages shape has no system column unless one is named.
  const std::string field = kind == ShapeKind::kMessages && !shape_.columns.count("system")
                                ? std::string()
                                : Column(kind, "system");
  EK_ASSIGN_OR_RETURN(std::string system, OptString(field));
  if (system.empty()) return Status::Ok();
  Dict d;
  d.Set("role", Value::String("system"));
  d.Set("content", Value::String(std::move(system)));
  out->push_back(Value::MakeDict(std::move(d)));
  return Status::Ok();
}

Status Normalizer::Messages(ShapeKind kind, NormalizedRecord* out) const {
  const std::string field = messages_field_.empty() ? Column(kind, "messages") : messages_field_;
  EK_ASSIGN_OR_RETURN(Value list, Field(field));
  if (list.is_undefined()) return Missing(kind, field);
  List msgs;
  EK_RETURN_IF_ERROR(System(kind, &msgs));
  EK_RETURN_IF_ERROR(
      Conversation(kind, list, field, TagsFor(shape_, kind == ShapeKind::kShareGpt), &msgs));
  EK_RETURN_IF_ERROR(Tools(kind, &out->tools));
  out->chat = true;
  out->messages = Value::MakeList(std::move(msgs));
  return Status::Ok();
}

Value TextMessage(std::string_view role, std::string content) {
  Dict d;
  d.Set("role", Value::String(std::string(role)));
  d.Set("content", Value::String(std::move(content)));
  return Value::MakeDict(std::move(d));
}

Status Normalizer::Alpaca(NormalizedRecord* out) const {
  const std::string prompt = Column(ShapeKind::kAlpaca, "prompt");
  const std::string query = Column(ShapeKind::kAlpaca, "query");
  const std::string response = Column(ShapeKind::kAlpaca, "response");
  const std::string history = Column(ShapeKind::kAlpaca, "history");
  if (!Has(prompt)) return Missing(ShapeKind::kAlpaca, prompt);
  if (!Has(response)) return Missing(ShapeKind::kAlpaca, response);
  EK_ASSIGN_OR_RETURN(std::string instruction, OptString(prompt));
  EK_ASSIGN_OR_RETURN(std::string input, OptString(query));
  EK_ASSIGN_OR_RETURN(std::string output, OptString(response));
  List msgs;
  EK_RETURN_IF_ERROR(System(ShapeKind::kAlpaca, &msgs));
  EK_ASSIGN_OR_RETURN(Value past, Field(history));
  if (!past.is_undefined() && !past.is_none()) {
    if (!past.is_list())
      return InvalidArgumentError(
          fmt::format("\"{}\" is not an array of [user, assistant] pairs", history));
    for (size_t i = 0; i < past.list().size(); ++i) {
      const Value& turn = past.list()[i];
      if (!turn.is_list() || turn.list().size() != 2 || !turn.list()[0].is_string() ||
          !turn.list()[1].is_string()) {
        return InvalidArgumentError(
            fmt::format("\"{}\"[{}] is not a [user, assistant] pair of strings", history, i));
      }
      msgs.push_back(TextMessage("user", turn.list()[0].str()));
      msgs.push_back(TextMessage("assistant", turn.list()[1].str()));
    }
  }
  // LLaMA-Factory: the instruction and a non-empty input joined with "\n".
  if (!input.empty()) instruction += "\n" + input;
  msgs.push_back(TextMessage("user", std::move(instruction)));
  msgs.push_back(TextMessage("assistant", std::move(output)));
  out->chat = true;
  out->messages = Value::MakeList(std::move(msgs));
  return Status::Ok();
}

Status Normalizer::PromptCompletion(NormalizedRecord* out) const {
  const std::string prompt = Column(ShapeKind::kPromptCompletion, "prompt");
  const std::string completion = Column(ShapeKind::kPromptCompletion, "response");
  EK_ASSIGN_OR_RETURN(Value p, Field(prompt));
  EK_ASSIGN_OR_RETURN(Value c, Field(completion));
  if (p.is_undefined()) return Missing(ShapeKind::kPromptCompletion, prompt);
  if (c.is_undefined()) return Missing(ShapeKind::kPromptCompletion, completion);
  if (p.is_string() && c.is_string()) {
    out->text = p.str() + c.str();
    out->completion_start = p.str().size();
    return Status::Ok();
  }
  if (!p.is_list() || !c.is_list()) {
    return InvalidArgumentError(fmt::format(
        "\"{}\" and \"{}\" must both be strings (plain text) or both message lists "
        "(conversational), as TRL's prompt-completion datasets are; this record has {} and {}",
        prompt, completion, p.TypeName(), c.TypeName()));
  }
  const Tags tags = TagsFor(shape_, false);
  List msgs;
  EK_RETURN_IF_ERROR(Conversation(ShapeKind::kPromptCompletion, p, prompt, tags, &msgs));
  out->prompt_messages = msgs.size();
  EK_RETURN_IF_ERROR(Conversation(ShapeKind::kPromptCompletion, c, completion, tags, &msgs));
  out->chat = true;
  out->messages = Value::MakeList(std::move(msgs));
  return Status::Ok();
}

}  // namespace

Result<ShapeKind> ParseShapeKind(std::string_view name) {
  if (name.empty()) return ShapeKind::kAuto;
  std::vector<std::string_view> names;
  for (const auto& k : kKindNames) {
    if (k.name == name) return k.kind;
    names.push_back(k.name);
  }
  return InvalidArgumentError(
      fmt::format("shape '{}': expected one of {}", name, JoinQuoted(names)));
}

std::string_view ShapeKindName(ShapeKind kind) {
  for (const auto& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "auto";
}

const std::vector<std::string_view>& ColumnKeys() {
  static const std::vector<std::string_view> keys{"messages", "system",   "tools",   "prompt",
                                                  "query",    "response", "history", "text"};
  return keys;
}

const std::vector<std::string_view>& TagKeys() {
  static const std::vector<std::string_view> keys{
      "role_tag",        "content_tag",  "user_tag",  "assistant_tag",
      "observation_tag", "function_tag", "system_tag"};
  return keys;
}

Status ParseMap(std::string_view spec, std::string_view what,
                const std::vector<std::string_view>& keys,
                std::map<std::string, std::string>* out) {
  out->clear();
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string_view item =
        spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? spec.size() : comma + 1;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size()) {
      return InvalidArgumentError(
          fmt::format("{} '{}': wants key=value pairs separated by commas, e.g. {}=NAME", what,
                      item, keys.empty() ? "key" : keys.front()));
    }
    std::string key(item.substr(0, eq));
    bool known = false;
    for (auto k : keys) known = known || k == key;
    if (!known) {
      return InvalidArgumentError(
          fmt::format("{}: unknown key \"{}\"; the keys are {}", what, key, JoinQuoted(keys)));
    }
    if (out->count(key))
      return InvalidArgumentError(fmt::format("{}: key \"{}\" is given twice", what, key));
    (*out)[key] = std::string(item.substr(eq + 1));
  }
  return Status::Ok();
}

Status ValidateShape(const Shape& shape) {
  auto check = [](const std::map<std::string, std::string>& m, std::string_view what,
                  const std::vector<std::string_view>& keys) -> Status {
    for (const auto& [k, v] : m) {
      bool known = false;
      for (auto key : keys) known = known || key == k;
      if (!known) {
        return InvalidArgumentError(
            fmt::format("{}: unknown key \"{}\"; the keys are {}", what, k, JoinQuoted(keys)));
      }
      if (v.empty()) return InvalidArgumentError(fmt::format("{}: \"{}\" is empty", what, k));
    }
    return Status::Ok();
  };
  EK_RETURN_IF_ERROR(check(shape.columns, "columns", ColumnKeys()));
  return check(shape.tags, "tags", TagKeys());
}

Result<Shape> ParseShape(std::string_view kind, std::string_view columns, std::string_view tags) {
  Shape s;
  EK_ASSIGN_OR_RETURN(s.kind, ParseShapeKind(kind));
  EK_RETURN_IF_ERROR(ParseMap(columns, "columns", ColumnKeys(), &s.columns));
  EK_RETURN_IF_ERROR(ParseMap(tags, "tags", TagKeys(), &s.tags));
  EK_RETURN_IF_ERROR(ValidateShape(s));
  return s;
}

Status NormalizeRecord(const Shape& shape, std::string_view text_field,
                       simdjson::dom::element record, NormalizedRecord* out) {
  return Normalizer(shape, text_field, record).Run(out);
}

}  // namespace ek::pack
