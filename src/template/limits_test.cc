// Hostile templates (found by fuzz/fuzz_template and by hand against it) are
// errors that name the problem, never a crash, a hang or exhausted memory.
// The inputs themselves are replayed by the harness: fuzz/regressions/template/.
#include <gtest/gtest.h>

#include <string>

#include "template/template.h"

namespace ek::tmpl {
namespace {

std::string Render(const std::string& src) {
  auto t = Template::Parse(src, "t");
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->Render({});
  if (!r.ok()) return "RENDER ERROR: " + r.status().message();
  return r->text;
}

std::string Repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(TemplateLimits, DeepNestingIsAParseErrorNotAStackOverflow) {
  const std::string kDeep = "t:1: nested deeper than 256 levels";
  EXPECT_EQ(Render("{{ " + Repeat("(", 10000) + "1" + Repeat(")", 10000) + " }}"),
            "PARSE ERROR: " + kDeep);
  EXPECT_EQ(Render("{{ " + Repeat("[", 10000) + Repeat("]", 10000) + " }}"),
            "PARSE ERROR: " + kDeep);
  EXPECT_EQ(Render("{{ " + Repeat("not ", 10000) + "1 }}"), "PARSE ERROR: " + kDeep);
  EXPECT_EQ(Render("{{ " + Repeat("-", 10000) + "1 }}"), "PARSE ERROR: " + kDeep);
  EXPECT_EQ(Render("{{ " + Repeat("1+", 10000) + "1 }}"), "PARSE ERROR: " + kDeep);
  EXPECT_EQ(Render("{{ x" + Repeat("|trim", 10000) + " }}"), "PARSE ERROR: " + kDeep);
  EXPECT_EQ(Render(Repeat("{% if 1 %}", 3000) + Repeat("{% endif %}", 3000)),
            "PARSE ERROR: " + kDeep);
  // What real templates nest stays well inside the bound.
  EXPECT_EQ(Render("{{ " + Repeat("(", 50) + "1" + Repeat(")", 50) + " }}"), "1");
  EXPECT_EQ(Render("{{ " + Repeat("1+", 200) + "1 }}"), "201");
}

TEST(TemplateLimits, IntegerEdgesAreErrorsNotUndefinedBehaviour) {
  EXPECT_EQ(Render("{{ (-9223372036854775807 - 1) | abs }}"),
            "RENDER ERROR: t:1: integer overflow");
  EXPECT_EQ(
      Render(
          "{{ range(-9223372036854775807-1, 9223372036854775807, 4611686018427387904) | list }}"),
      "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]");
  EXPECT_EQ(Render("{{ 1 ** 9223372036854775807 }} {{ (-2) ** 63 }} {{ 3 ** 39 }} {{ 0 ** 0 }}"),
            "1 -9223372036854775808 4052555153018976267 1");
}

TEST(TemplateLimits, HugeStringsAreErrors) {
  for (const char* src :
       {"{{ 'a' | center(100000000000) }}", "{{ 'a'.rjust(100000000000) }}",
        "{{ ('a' * 1048576) * 1048576 }}", "{{ ('a' * 1000) | replace('a', 'a' * 1000000) }}",
        "{% set ns = namespace(s='x' * 1048576) %}{% for i in range(8) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
        // fuzz_template found this: each tojson doubles the escapes
        "{% set ns = namespace(s='x') %}{% for i in range(60) %}"
        "{% set ns.s = ns.s|tojson %}{% endfor %}{{ ns.s|length }}",
        "{% set ns = namespace(s='\\u00e9' * 4194304) %}{{ ns.s|tojson(ensure_ascii=true)|length "
        "}}"}) {
    std::string r = Render(src);
    EXPECT_TRUE(r.starts_with("RENDER ERROR: t:1: ") && r.find("too large") != std::string::npos)
        << src << "\n"
        << r;
  }
}

TEST(TemplateLimits, LoopIterationsPerRenderAreBounded) {
  EXPECT_EQ(
      Render("{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}"),
      "RENDER ERROR: t:1: more than 1000000 loop iterations in one render");
  EXPECT_EQ(
      Render("{% for a in range(1000) %}{% for b in range(99) %}{% endfor %}{% endfor %}done"),
      "done");
}

TEST(TemplateLimits, NamespacesHoldNoCyclesAndNoDeepNesting) {
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.self = ns %}"),
            "RENDER ERROR: t:1: a namespace attribute cannot hold a namespace or loop");
  EXPECT_EQ(
      Render("{% set ns = namespace(l=[]) %}{% set n2 = namespace(a=ns) %}{% set ns.l = [n2] %}"),
      "RENDER ERROR: t:1: a namespace attribute cannot hold a namespace or loop");
  EXPECT_EQ(Render("{% set ns = namespace(l=[]) %}{% for i in range(99999) %}{% set ns.l = [ns.l] "
                   "%}{% endfor %}"),
            "RENDER ERROR: t:1: a value nested deeper than 512 levels");
  EXPECT_EQ(Render("{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% set ns.l = ns.l + [i] "
                   "%}{% endfor %}"
                   "{{ ns.l }}"),
            "[0, 1, 2]");
}

}  // namespace
}  // namespace ek::tmpl
