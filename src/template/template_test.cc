#include "template/template.h"

#include <gtest/gtest.h>

namespace ek::tmpl {
namespace {

std::string R(std::string_view src, const Dict& vars = {}) {
  auto t = Template::Parse(src, "t");
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->Render(vars);
  if (!r.ok()) return "RENDER ERROR: " + r.status().message();
  return r->text;
}

TEST(Template, Basics) {
  EXPECT_EQ(R("hello {{ 1 + 2 }}"), "hello 3");
}

}  // namespace
}  // namespace ek::tmpl
