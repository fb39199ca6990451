// evenkeel template: render conversations with a chat template exactly as
// transformers' apply_chat_template(tokenize=False) does; check a template.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/file.h"
#include "core/json_out.h"
#include "core/jsonl.h"
#include "core/utf8.h"
#include "template/chat.h"

namespace ek::cli {

namespace {

struct Source {
  std::string tmpl;    // FILE.jinja, or "" for the config's own template
  std::string config;  // tokenizer_config.json
};

Result<tmpl::ChatTemplate> Load(const Source& s) {
  if (!s.tmpl.empty()) return tmpl::ChatTemplate::FromFile(s.tmpl, s.config);
  // RunTemplate refuses neither before Load (a usage error).
  return tmpl::ChatTemplate::FromTokenizerConfig(s.config);
}

// The generation spans as [[begin, end], ...] in characters (code points), as transformers reports
// them.
void WriteSpans(JsonWriter& w, const std::string& text,
                const std::vector<std::pair<size_t, size_t>>& spans) {
  w.BeginArray();
  for (const auto& [start, stop] : spans) {
    size_t b = tmpl::CodePoints(std::string_view(text).substr(0, start));
    size_t e = b + tmpl::CodePoints(std::string_view(text).substr(start, stop - start));
    w.BeginArray().Uint(b).Uint(e).EndArray();
  }
  w.EndArray();
}

int Render(const Source& src, const std::string& input, bool add_generation_prompt,
           bool keep_going) {
  auto chat = Load(src);
  if (!chat.ok()) return ReportError(chat.status());
  std::string data;
  if (input.empty() || input == "-") {
    data.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    auto d = ReadFile(input);
    if (!d.ok()) return ReportError(d.status());
    data = std::move(*d);
  }
  // A std::string: the conditional yields a temporary, which a string_view would outlive.
  const std::string name = input.empty() || input == "-" ? std::string("<stdin>") : input;
  std::string out;
  LineSplitter lines(data);
  for (TextLine next; lines.Next(&next);) {
    const std::string_view line = next.text;
    const uint64_t line_no = next.number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto fail = [&](const Status& st) {
      return Status(st.code(), fmt::format("{}:{}: {}", name, line_no, st.message()));
    };
    Status st;
    Result<tmpl::Rendered> r = Status(StatusCode::kInternal, "unset");
    if (size_t bad = FirstInvalidUtf8(line); bad != std::string_view::npos) {
      st = InvalidArgumentError(fmt::format("invalid UTF-8 at byte {} of the line", bad));
    } else if (auto rec = tmpl::ValueFromJsonText(line); !rec.ok()) {
      st = rec.status();
    } else if (!rec->is_dict()) {
      st = InvalidArgumentError("a record is not a JSON object");
    } else {
      const tmpl::Value* msgs = rec->dict().Find("messages");
      const tmpl::Value* tools = rec->dict().Find("tools");
      if (!msgs) {
        st = InvalidArgumentError("record has no \"messages\"");
      } else {
        r = chat->Apply(*msgs, tools ? *tools : tmpl::Value::None(), add_generation_prompt);
        if (!r.ok()) st = r.status();
      }
    }
    if (!st.ok()) {
      if (!keep_going) return ReportError(fail(st));
      JsonWriter w;
      out += w.BeginObject().Key("error").Str(st.message()).EndObject().Line();
    } else {
      JsonWriter w;
      w.BeginObject().Key("text").Str(r->text).Key("generation");
      WriteSpans(w, r->text, r->generation);
      out += w.EndObject().Line();
    }
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : ReportError(IoError("writing stdout failed"));
}

}  // namespace

int RunTemplate(int argc, char** argv) {
  CLI::App app{
      "Render chat conversations with a model's chat template, exactly as transformers' "
      "apply_chat_template(tokenize=False) renders them (docs/template.md).",
      "evenkeel template"};
  app.require_subcommand(1);
  Source src;
  std::string input;
  bool add_generation_prompt = false, keep_going = false;
  auto* render = app.add_subcommand("render",
                                    "JSON lines of {\"messages\": [...], \"tools\": [...]} in; "
                                    "{\"text\", \"generation\"} lines out");
  render->add_option("input", input, "JSONL file (default: stdin)");
  render->add_option("--template", src.tmpl, "a .jinja chat template file");
  render->add_option(
      "--tokenizer-config", src.config,
      "tokenizer_config.json: its chat_template (when no --template) and special tokens");
  render->add_flag("--add-generation-prompt", add_generation_prompt,
                   "end with the assistant header");
  render->add_flag("--keep-going", keep_going,
                   "write {\"error\": ...} for a record that fails, and go on");
  auto* check =
      app.add_subcommand("check", "parse a template and say whether evenkeel can render it");
  check->add_option("--template", src.tmpl, "a .jinja chat template file");
  check->add_option("--tokenizer-config", src.config, "tokenizer_config.json");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  // Neither source is required alone, but one is: a usage error, not bad input.
  if (src.tmpl.empty() && src.config.empty()) {
    const char* sub = check->parsed() ? "check" : "render";
    return UsageError(
        fmt::format("template {0}: give --template FILE.jinja or --tokenizer-config FILE "
                    "(see evenkeel template {0} --help)",
                    sub));
  }
  if (check->parsed()) {
    auto chat = Load(src);
    if (!chat.ok()) return ReportError(chat.status());
    std::printf("%s: ok%s\n", chat->tmpl().name().c_str(),
                chat->tmpl().has_generation()
                    ? " ({% generation %} blocks: assistant spans come from them)"
                    : "");
    return 0;
  }
  return Render(src, input, add_generation_prompt, keep_going);
}

}  // namespace ek::cli
