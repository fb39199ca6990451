// Renders a JSONL file of conversations with a chat template, many times, and
// prints how long rendering alone took: records are parsed and their messages
// prepared (ChatTemplate's NormalizeMessages) before the clock starts, as
// bench_template.py prepares them for jinja2. One thread, like jinja2.
//
//   template_bench RECORDS.jsonl (--template X.jinja | --tokenizer-config C) [--config C]
//                  [--add-generation-prompt] [--seconds S]
// Prints one JSON object: {"records", "renders", "seconds", "bytes", "errors", "ns_per_render"}.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/file.h"
#include "template/chat.h"

namespace {

int Fail(const std::string& m) {
  std::fprintf(stderr, "template_bench: %s\n", m.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using ek::tmpl::Value;
  std::string records, tmpl_path, config;
  bool agp = false;
  double min_seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--template") {
      tmpl_path = next();
    } else if (a == "--tokenizer-config" || a == "--config") {
      config = next();
    } else if (a == "--add-generation-prompt") {
      agp = true;
    } else if (a == "--seconds") {
      min_seconds = std::stod(next());
    } else if (!a.empty() && a[0] != '-') {
      records = a;
    } else {
      return Fail("unknown argument " + a);
    }
  }
  if (records.empty() || (tmpl_path.empty() && config.empty())) {
    return Fail(
        "usage: template_bench RECORDS.jsonl (--template X.jinja | --tokenizer-config C) "
        "[--add-generation-prompt] [--seconds S]");
  }
  auto chat = tmpl_path.empty() ? ek::tmpl::ChatTemplate::FromTokenizerConfig(config)
                                : ek::tmpl::ChatTemplate::FromFile(tmpl_path, config);
  if (!chat.ok()) return Fail(chat.status().message());
  auto data = ek::ReadFile(records);
  if (!data.ok()) return Fail(data.status().message());

  // The render context of every record, prepared before timing.
  std::vector<ek::tmpl::Dict> contexts;
  size_t pos = 0;
  while (pos < data->size()) {
    size_t nl = data->find('\n', pos);
    if (nl == std::string::npos) nl = data->size();
    std::string_view line(data->data() + pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    auto rec = ek::tmpl::ValueFromJsonText(line);
    if (!rec.ok() || !rec->is_dict()) return Fail("bad record: " + std::string(line.substr(0, 80)));
    const Value* msgs = rec->dict().Find("messages");
    const Value* tools = rec->dict().Find("tools");
    if (!msgs) return Fail("a record has no messages");
    auto norm = ek::tmpl::NormalizeMessages(*msgs);
    if (!norm.ok()) return Fail(norm.status().message());
    ek::tmpl::Dict vars;
    vars.Set("messages", *norm);
    vars.Set("tools", tools ? *tools : Value::None());
    vars.Set("documents", Value::None());
    vars.Set("add_generation_prompt", Value::Bool(agp));
    for (const auto& [k, v] : chat->special_tokens().items) vars.Set(k, v);
    contexts.push_back(std::move(vars));
  }
  if (contexts.empty()) return Fail("no records");

  const ek::tmpl::Template& t = chat->tmpl();
  size_t renders = 0, bytes = 0, errors = 0;
  auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    for (const auto& vars : contexts) {
      auto r = t.Render(vars);
      if (r.ok()) {
        bytes += r->text.size();
      } else {
        ++errors;
      }
      ++renders;
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < min_seconds);
  std::printf(
      "{\"records\": %zu, \"renders\": %zu, \"seconds\": %.6f, \"bytes\": %zu, \"errors\": %zu, "
      "\"ns_per_render\": %.1f}\n",
      contexts.size(), renders, elapsed, bytes, errors,
      elapsed * 1e9 / static_cast<double>(renders));
  return 0;
}
