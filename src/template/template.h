// A chat template: Jinja source compiled once, rendered many times, exactly as
// transformers renders it (jinja2's ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks, loop controls and the {% generation %} tag; its
// tojson, raise_exception, strftime_now, dict and namespace). What the engine
// covers and how it is built: docs/template.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "template/ast.h"
#include "template/value.h"

namespace ek::tmpl {

struct Rendered {
  std::string text;
  // The byte ranges of `text` that {% generation %} blocks produced, in order:
  // what transformers records for return_assistant_tokens_mask (it counts
  // characters; these are the same ranges in bytes).
  std::vector<std::pair<size_t, size_t>> generation;
};

class Template {
 public:
  // Parses and checks the whole template: a syntax error, or a statement,
  // filter, test or global the engine does not implement, is an error naming
  // it and the template line ("NAME:LINE: ..."), before anything renders.
  static Result<Template> Parse(std::string_view source, std::string name);

  // Renders with `vars` as the context. Names not in it resolve to the globals
  // transformers provides. A Template is immutable: Render is thread-safe.
  Result<Rendered> Render(const Dict& vars) const;

  bool has_generation() const { return has_generation_; }
  const std::string& name() const { return *name_; }

 private:
  std::shared_ptr<const Body> body_;
  std::shared_ptr<const std::string> name_;
  bool has_generation_ = false;
};

}  // namespace ek::tmpl
