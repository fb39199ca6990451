// Parses a chat template (Jinja, the subset Hugging Face chat templates use;
// docs/template.md) into statements. Errors name the template and the line;
// an unsupported construct says "unsupported: ...".
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "template/ast.h"

namespace ek::tmpl {

Result<Body> ParseTemplate(std::string_view source, const std::string& name);

}  // namespace ek::tmpl
