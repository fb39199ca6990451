#include "template/template.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <thread>

#include "template/chat.h"

namespace ek::tmpl {
namespace {

// Renders `src` with `vars`; parse and render errors come back as text.
std::string R(std::string_view src, const Dict& vars = {}) {
  auto t = Template::Parse(src, "t");
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->Render(vars);
  if (!r.ok()) return "RENDER ERROR: " + r.status().message();
  return r->text;
}

// Renders with `json` (an object) as the context.
std::string RJ(std::string_view src, std::string_view json) {
  auto v = ValueFromJsonText(json);
  if (!v.ok()) return "JSON ERROR";
  return R(src, v->dict());
}

// JSON objects as Python's json.loads makes them: a repeated key keeps its first place
// and takes the last value, in small objects and in large ones (found through a hash map).
TEST(Json, RepeatedKeysKeepTheirPlaceAndTakeTheLastValue) {
  for (int n : {3, 40, 2000}) {
    std::string json = "{";
    for (int i = 0; i < n; ++i) json += fmt::format("\"k{}\": {}, ", i, i);
    json += "\"k1\": \"again\", \"k0\": \"last\"}";
    auto v = ValueFromJsonText(json);
    ASSERT_TRUE(v.ok()) << n;
    const Dict& d = v->dict();
    ASSERT_EQ(d.items.size(), static_cast<size_t>(n)) << n;
    EXPECT_EQ(d.items[0].first, "k0");
    EXPECT_EQ(d.items[0].second.str(), "last");
    EXPECT_EQ(d.items[1].second.str(), "again");
    EXPECT_EQ(d.items[static_cast<size_t>(n) - 1].first, fmt::format("k{}", n - 1));
    EXPECT_EQ(d.Find(fmt::format("k{}", n - 1))->integer(), n - 1);
  }
}

TEST(Template, Basics) {
  EXPECT_EQ(R("hello {{ 1 + 2 }}"), "hello 3");
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ none ~ true }}"), "a1NoneTrue");
  EXPECT_EQ(R("{# comment #}x"), "x");
  EXPECT_EQ(R("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(Whitespace, TrimBlocksAndLstripBlocks) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the indentation before it.
  EXPECT_EQ(R("{% if true %}\nyes\n{% endif %}\n"), "yes\n");
  EXPECT_EQ(R("  {% if true %}\n    x\n  {% endif %}\nz"), "    x\nz");
  // Not after {{ }}: expressions keep what follows.
  EXPECT_EQ(R("{{ 1 }}\n{{ 2 }}"), "1\n2");
  // "-" strips all whitespace on that side, "+" keeps it.
  EXPECT_EQ(R("a  {%- if true -%}  \n b {%- endif %}"), "ab");
  EXPECT_EQ(R("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(R("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(R("a\n  {# c #}\nb"), "a\nb");
  // One trailing newline of the template is dropped (keep_trailing_newline=False).
  EXPECT_EQ(R("x\n"), "x");
  EXPECT_EQ(R("x\n\n"), "x\n");
  EXPECT_EQ(R("a\r\nb"), "a\nb");
}

TEST(Scoping, LoopsDoNotLeakSetButNamespacesDo) {
  EXPECT_EQ(
      R("{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"),
      "1231");
  EXPECT_EQ(R("{% set ns = namespace(x=0) %}{% for i in range(4) %}{% set ns.x = ns.x + i %}{% "
              "endfor %}{{ ns.x }}"),
            "6");
  // `if` does not open a scope.
  EXPECT_EQ(R("{% if true %}{% set y = 2 %}{% endif %}{{ y }}"), "2");
  EXPECT_EQ(R("{% set ns = namespace(a=1) %}{{ ns }}"), "<Namespace {'a': 1}>");
  EXPECT_NE(R("{% set ns = namespace(_x=1) %}").find("underscore"), std::string::npos);
}

TEST(Scoping, Macros) {
  EXPECT_EQ(R("{% macro g(n, p='!') %}Hi {{ n }}{{ p }}{% endmacro %}{{ g('a') }}{{ g('b', '?') "
              "}}{{ g(p='.', n='c') }}"),
            "Hi a!Hi b?Hi c.");
  // A macro sees the variables of where it was defined, at call time.
  EXPECT_EQ(R("{% macro f() %}{{ y }}{% endmacro %}{% set y = 5 %}{{ f() }}"), "5");
  EXPECT_EQ(
      R("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}"),
      "321");
  EXPECT_NE(R("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}").find("t:1:"), std::string::npos);
}

TEST(Loops, LoopVariableElseBreakContinueFilter) {
  EXPECT_EQ(
      R("{% for x in [5, 6, 7] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
        "{{ loop.length }}{{ loop.revindex }};{% endfor %}"),
      "10TrueFalse33;21FalseFalse32;32FalseTrue31;");
  EXPECT_EQ(R("{% for x in [1, 2] %}{{ loop.previtem }}|{{ loop.nextitem }};{% endfor %}"),
            "|2;1|;");
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% "
              "break %}{% endif %}"
              "{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(R("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"),
            "2/2 4/2 ");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}"),
            "a=1 b=2 ");
  EXPECT_EQ(R("{% for m in [1, 2, 3] %}{{ loop.cycle('o', 'e') }}{% endfor %}"), "oeo");
}

TEST(Filters, Strings) {
  EXPECT_EQ(R("{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ '\u00a0y\u2028'|trim }}"), "x|a|y");
  EXPECT_EQ(R("{{ 'hello'|replace('l', 'L') }}{{ 'hello'|replace('l', 'L', 1) }}"), "heLLoheLlo");
  EXPECT_EQ(R("{{ 'ab'|upper }}{{ 'AB'|lower }}{{ 'hello world'|title }}{{ 'hELLO'|capitalize }}"),
            "ABabHello WorldHello");
  EXPECT_EQ(R("{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(R("{{ 'abc'|center(7) }}|{{ 'a b c'|wordcount }}|{{ 'abc'|length }}|{{ '😀é'|length }}"),
            "  abc  |3|3|2");
  EXPECT_EQ(R("{{ '<a>&\"'|e }}"), "&lt;a&gt;&amp;&#34;");
}

TEST(Filters, Sequences) {
  EXPECT_EQ(R("{{ [3, 1, 2]|sort }}{{ [3, 1, 2]|sort(reverse=true) }}{{ ['b', 'A', 'a']|sort }}"),
            "[1, 2, 3][3, 2, 1]['A', 'a', 'b']");
  EXPECT_EQ(R("{{ [1, 2, 3]|join(', ') }}|{{ [1, 2]|first }}{{ [1, 2]|last }}|{{ [1, 5, 2]|max "
              "}}{{ [4, 2]|min }}"
              "|{{ [1, 2.5]|sum }}"),
            "1, 2, 3|12|52|3.5");
  EXPECT_EQ(R("{{ [{'a': 1}, {'a': 2, 'b': 1}]|selectattr('b')|list }}{{ [{'a': 1}, {'a': "
              "2}]|map(attribute='a')|list }}"),
            "[{'a': 2, 'b': 1}][1, 2]");
  EXPECT_EQ(R("{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3, 4]|reject('even')|list }}{{ [1, "
              "1, 2]|unique|list }}"),
            "[1, 3][1, 3][1, 2]");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|dictsort }}{{ {'b': 1}|items|list }}"),
            "[('a', 2), ('b', 1)][('b', 1)]");
  EXPECT_EQ(R("{{ x|default('d') }}{{ ''|default('e', true) }}{{ 0|default(5) }}"), "de0");
  EXPECT_EQ(R("{{ '42'|int + 1 }}{{ 'x'|int }}{{ '4.5'|float }}{{ 2.5|round }}{{ 3.5|round }}{{ "
              "-3|abs }}"),
            "4304.52.04.03");
}

TEST(Filters, Tojson) {
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1.0, none, true, 'é\"\n']}|tojson }}"),
            "{\"b\": 1, \"a\": [1.0, null, true, \"é\\\"\\n\"]}");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|tojson(indent=2, sort_keys=true) }}"),
            "{\n  \"a\": 2,\n  \"b\": 1\n}");
  EXPECT_EQ(R("{{ '😀é'|tojson(ensure_ascii=true) }}"), "\"\\ud83d\\ude00\\u00e9\"");
  EXPECT_EQ(R("{{ [1e16, 1e-05, 0.1, 123456789.0]|tojson }}"), "[1e+16, 1e-05, 0.1, 123456789.0]");
  EXPECT_EQ(R("{{ {'a': 1}|tojson(separators=(',', ':')) }}"), "{\"a\":1}");
  EXPECT_EQ(R("{{ (1, 2)|tojson }}"), "[1, 2]");
  EXPECT_NE(R("{{ {'a': 1}.items()|tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(Expressions, SlicingAndIndexing) {
  EXPECT_EQ(
      R("{{ [1, 2, 3, 4][1:] }}{{ [1, 2, 3][::-1] }}{{ [1, 2, 3, 4][::2] }}{{ [1, 2, 3][-2:] }}"),
      "[2, 3, 4][3, 2, 1][1, 3][2, 3]");
  EXPECT_EQ(
      R("{{ 'héllo😀'[1:3] }}|{{ 'héllo😀'[-1] }}|{{ 'abc'[::-1] }}|{{ 'abc'[5] }}|{{ [1][5] }}"),
      "él|😀|cba||");
  EXPECT_EQ(R("{{ (1, 2, 3)[1:] }}{{ range(10)[2:5]|list }}"), "(2, 3)[2, 3, 4]");
  EXPECT_EQ(RJ("{{ m.a.b }}{{ m['a']['b'] }}{{ m.l.0 }}", R"({"m": {"a": {"b": 7}, "l": [9]}})"),
            "779");
}

TEST(Expressions, Arithmetic) {
  EXPECT_EQ(R("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }} "
              "{{ 1e16 }} {{ 3.0 }}"),
            "3.5 3 -4 2 1024 0.30000000000000004 1e+16 3.0");
  EXPECT_EQ(R("{{ [1] + [2] }}{{ 'ab' * 2 }}{{ (1,) * 2 }}{{ 1 < 2 < 3 }}{{ 1 == 1.0 }}{{ 'a' in "
              "'cat' }}"),
            "[1, 2]abab(1, 1)TrueTrueTrue");
  EXPECT_EQ(R("{{ 1 and 2 }}{{ 0 or 'x' }}{{ 1 if 0 else 2 }}{{ not none }}"), "2x2True");
  EXPECT_NE(R("{{ 'a' + 1 }}").find("unsupported operand"), std::string::npos);
  EXPECT_NE(R("{{ 1 // 0 }}").find("division"), std::string::npos);
}

TEST(Methods, PythonStr) {
  EXPECT_EQ(R("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a,b,c'.rsplit(',', 1) }}{{ "
              "'a\u2028b'.splitlines() }}"),
            "['a', 'b', '', 'c']['a', 'b']['a,b', 'c']['a', 'b']");
  EXPECT_EQ(R("{{ ' x '.strip() }}{{ 'xyx'.strip('x') }}{{ 'ab'.startswith('a') }}{{ "
              "'ab'.endswith(('x', 'b')) }}"),
            "xyTrueTrue");
  EXPECT_EQ(R("{{ 'hello'.find('l') }}{{ 'hello'.rfind('l') }}{{ 'hello'.count('l') }}{{ "
              "'-'.join(['a', 'b']) }}"),
            "232a-b");
  EXPECT_EQ(R("{{ 'a,b'.partition(',') }}{{ 'x'.zfill(3) }}{{ 'abc'.removeprefix('a') }}{{ 'Ab "
              "Cd'.istitle() }}"),
            "('a', ',', 'b')00xbcTrue");
  // Full case mappings: ß -> SS, ﬁ -> FI, İ -> i̇ (two code points).
  EXPECT_EQ(R("{{ 'straße'.upper() }}{{ 'ﬁ'.upper() }}{{ 'İ'.lower()|length }}{{ 'ß'|title }}"),
            "STRASSEFI2SS");
  // Σ's lower case depends on its context (final sigma): refused, not guessed.
  EXPECT_NE(R("{{ 'ΣΑΣ'.lower() }}").find("unsupported"), std::string::npos);
  EXPECT_NE(R("{{ '{}'.format(1) }}").find("t:1: unsupported: the str method format()"),
            std::string::npos);
}

TEST(Methods, DictAndList) {
  EXPECT_EQ(R("{% set d = {'b': 1, 'a': 2} %}{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 9) }}{{ "
              "d.keys() }}"
              "{{ d.values() }}{{ d.items() }}{{ 'a' in d }}"),
            "2None9dict_keys(['b', 'a'])dict_values([1, 2])dict_items([('b', 1), ('a', 2)])True");
  EXPECT_EQ(R("{{ [1, 2, 2].index(2) }}{{ [1, 2, 2].count(2) }}{{ {'items': 5}.items is defined "
              "}}{{ {'k': 5}['k'] }}"),
            "12True5");
  // The sandbox refuses methods that modify; reading one gives Undefined.
  EXPECT_NE(R("{% set l = [1] %}{{ l.append(2) }}").find("sandbox"), std::string::npos);
  EXPECT_EQ(R("{{ [1].append }}|{{ {'a': 1}.pop }}|"), "||");
}

TEST(Values, TuplesViewsRangesGenerators) {
  EXPECT_EQ(R("{{ (1, 2) }}{{ (1,) }}{{ () }}{{ (1, 2) == [1, 2] }}{{ (1, 2) == (1, 2) }}"),
            "(1, 2)(1,)()FalseTrue");
  // A generator is always true, has no len(), prints as an address (refused) and is consumed once.
  EXPECT_EQ(R("{% if [none]|select %}true{% endif %}"), "true");
  EXPECT_NE(R("{{ [1]|select|length }}").find("has no len()"), std::string::npos);
  EXPECT_NE(R("{{ [1]|map('abs') }}").find("t:1: unsupported: printing a generator"),
            std::string::npos);
  EXPECT_EQ(R("{% set g = [1, 2, 3]|select('odd') %}{{ g|join }}|{{ g|join }}|"), "13||");
  EXPECT_EQ(R("{% set g = [1, 2, 3]|select('odd') %}{{ g|first }}{{ g|list }}"), "1[3]");
  EXPECT_EQ(R("{{ [1, 2]|reverse|list }}{{ 'abc'|reverse }}"), "[2, 1]cba");
  EXPECT_NE(R("{{ range(3) }}").find("unsupported: printing a range"), std::string::npos);
  EXPECT_EQ(R("{{ range(3)|list }}{{ range(3)|length }}{{ range(1, 10, 4)|list }}"),
            "[0, 1, 2]3[1, 5, 9]");
  EXPECT_EQ(R("{{ {'a': 1}.items()[0] }}|{{ ([1]|map('abs'))[0] }}|"), "||");
}

TEST(Tests, Builtins) {
  EXPECT_EQ(R("{{ 'x' is string }}{{ 1 is number }}{{ {} is mapping }}{{ [] is iterable }}{{ 1 is "
              "integer }}"
              "{{ 1.0 is float }}{{ none is none }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ x is "
              "undefined }}"),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(
      R("{{ 1 is sameas 1 }}{{ [] is sameas [] }}{{ {}.keys() is sequence }}{{ [1] is sequence }}"),
      "TrueFalseFalseTrue");
  EXPECT_EQ(R("{{ 'a' is in ['a'] }}{{ 2 is gt 1 }}{{ 'user' is eq 'user' }}"), "TrueTrueTrue");
}

TEST(Globals, TransformersOnes) {
  EXPECT_EQ(R("{{ dict(a=1, b=2) }}{{ dict([('x', 1)]) }}{{ namespace(a=1).a }}"),
            "{'a': 1, 'b': 2}{'x': 1}1");
  EXPECT_EQ(R("{{ strftime_now('%Y')|length }}"), "4");
  std::string err = R("line1\n{{ raise_exception('boom') }}");
  EXPECT_NE(err.find("t:2:"), std::string::npos) << err;
  EXPECT_NE(err.find("boom"), std::string::npos) << err;
}

TEST(Errors, NameTheLine) {
  EXPECT_NE(R("a\nb\n{{ x.y }}").find("t:3: 'x' is undefined"), std::string::npos);
  EXPECT_NE(R("\n\n{% include 'x' %}").find("t:3: unsupported: the 'include' statement"),
            std::string::npos);
  EXPECT_NE(R("\n{{ x|nosuchfilter }}").find("t:2: unsupported: the filter 'nosuchfilter'"),
            std::string::npos);
  EXPECT_NE(
      R("{% if x is nosuchtest %}{% endif %}").find("t:1: unsupported: the test 'nosuchtest'"),
      std::string::npos);
  EXPECT_NE(
      R("{% for x in y recursive %}{% endfor %}").find("t:1: unsupported: recursive for loops"),
      std::string::npos);
  EXPECT_NE(R("{% if x %}").find("missing 'endif'"), std::string::npos);
  EXPECT_NE(R("{{ 'a' % 1 }}").find("printf-style"), std::string::npos);
  EXPECT_EQ(R("{{ none.x }}"), "");  // jinja2: an attribute of None is Undefined, printed as ""
}

TEST(Generation, SpansAreByteRangesOfTheOutput) {
  auto t = Template::Parse(
      "a{% generation %}bé{% endgeneration %}c{% generation %}{% endgeneration %}", "t");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->has_generation());
  auto r = t->Render({});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "abéc");
  ASSERT_EQ(r->generation.size(), 2u);
  EXPECT_EQ(r->generation[0], (std::pair<size_t, size_t>(1, 4)));
  EXPECT_EQ(r->generation[1], (std::pair<size_t, size_t>(5, 5)));
}

TEST(Borrowing, ValuesOutliveReassignedNamespaceAttributes) {
  // x keeps the list after ns.l is replaced (copies of owned values, not borrows).
  EXPECT_EQ(
      R("{% set ns = namespace(l=[1, 2]) %}{% set x = ns.l %}{% set ns.l = [] %}{{ x }}{{ ns.l }}"),
      "[1, 2][]");
  EXPECT_EQ(RJ("{% set ns = namespace(m=none) %}{% for m in msgs %}{% set ns.m = m %}{% endfor "
               "%}{{ ns.m.c }}",
               R"({"msgs": [{"c": "a"}, {"c": "b"}]})"),
            "b");
  EXPECT_EQ(R("{% set t = {'a': [1, 2]}.items()|list %}{{ t[0][1][1] }}"), "2");
}

TEST(Chat, ApplyNormalizesMessagesAndIsThreadSafe) {
  auto chat = ChatTemplate::FromText(
      "{% for m in messages %}{{ m.role }}:{{ m.content }}|{{ m.reasoning_content }}|{{ m.thinking "
      "}};{% endfor %}"
      "{{ m is defined }}{{ add_generation_prompt }}",
      "chat", "");
  ASSERT_TRUE(chat.ok()) << chat.status().message();
  auto msgs = ValueFromJsonText(
      R"([{"role": "user", "content": "hi", "tool_calls": null}, {"role": "assistant", "content": "a", "reasoning": "r"}])");
  ASSERT_TRUE(msgs.ok());
  std::vector<std::string> outs(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < outs.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) {
        auto r = chat->Apply(*msgs, Value::None(), true);
        outs[i] = r.ok() ? r->text : r.status().message();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& o : outs) EXPECT_EQ(o, "user:hi||;assistant:a|r|r;FalseTrue");
}

}  // namespace
}  // namespace ek::tmpl
