// eaglet's Jinja subset against real Jinja2 (python3-jinja2, with Hugging Face's settings) on
// the Llama 3 and Qwen3 chat templates and on constructs those templates use.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"
#include "support/minimax_fixture.h"
#include "support/test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {
namespace {

bool jinja2_available() {
  static const bool ok = test::run_command("/usr/bin/python3 -c 'import jinja2' 2>/dev/null").exit_code == 0;
  return ok;
}

void expect_same_as_jinja2(const std::string& tmpl, const nlohmann::json& ctx) {
  test::TempDir d;
  test::write_text(d.file("t.jinja"), tmpl);
  test::write_text(d.file("c.json"), ctx.dump());
  auto ref = test::run_command("/usr/bin/python3 " + test::source_dir() + "/tests/reference/render_template.py " +
                               d.file("t.jinja") + " " + d.file("c.json"));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  try {
    EXPECT_EQ(ChatTemplate(tmpl).render(ctx), ref.output) << "context: " << ctx.dump();
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\ntemplate: " << tmpl;
  }
}

std::vector<nlohmann::json> conversations() {
  using nlohmann::json;
  return {
      {{"messages", json::array({{{"role", "user"}, {"content", "Hi there!"}}})}, {"add_generation_prompt", true}},
      {{"messages", json::array({{{"role", "system"}, {"content", "  Be brief.  "}},
                                 {{"role", "user"}, {"content", "What is 2+2?"}},
                                 {{"role", "assistant"}, {"content", "<think>\nadd\n</think>\n\n4"}},
                                 {{"role", "user"}, {"content", "And 3+3?\n"}}})},
       {"add_generation_prompt", true}},
      {{"messages", json::array({{{"role", "user"}, {"content", "x"}}, {{"role", "assistant"}, {"content", "y"}}})},
       {"add_generation_prompt", false}},
      {{"messages", json::array({{{"role", "user"}, {"content", "think?"}}})}, {"add_generation_prompt", true},
       {"enable_thinking", false}},
  };
}

TEST(ChatTemplate, Llama3AndQwen3MatchJinja2) {
  EAGLET_REQUIRE_SHARED();
  if (!jinja2_available()) GTEST_SKIP() << "needs /usr/bin/python3 with jinja2 (apt: python3-jinja2)";
  for (const char* f : {"llama3_tokenizer_config.json", "qwen3_tokenizer_config.json"}) {
    auto cfg = nlohmann::json::parse(read_text_file(test::shared_dir() + "/tokenizers/hf/" + f));
    for (auto ctx : conversations()) {
      ctx["bos_token"] = "<|begin_of_text|>";
      expect_same_as_jinja2(cfg["chat_template"].get<std::string>(), ctx);
    }
  }
}

// The chat templates of the models users serve, as their repositories publish them (copied into
// tests/data/chat_templates from llama.cpp's models/templates collection): every conversation
// renders exactly as Jinja2 renders it, or fails where Jinja2 fails (a template that refuses a
// system message, say).
TEST(ChatTemplate, PublishedTemplatesMatchJinja2) {
  if (!jinja2_available()) GTEST_SKIP() << "needs /usr/bin/python3 with jinja2 (apt: python3-jinja2)";
  using nlohmann::json;
  const std::string dir = test::source_dir() + "/tests/data/chat_templates";
  std::vector<json> convs = conversations();
  convs.push_back({{"messages", json::array({{{"role", "system"}, {"content", "You are terse."}},
                                             {{"role", "user"}, {"content", "List {\"a\": 1} and ünïcode"}}})},
                   {"add_generation_prompt", true}, {"enable_thinking", true}});
  int rendered = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string src = read_text_file(entry.path().string());
    for (json ctx : convs) {
      ctx["bos_token"] = "<s>";
      ctx["eos_token"] = "</s>";
      test::TempDir d;
      test::write_text(d.file("c.json"), ctx.dump());
      auto ref = test::run_command("/usr/bin/python3 " + test::source_dir() + "/tests/reference/render_template.py " +
                                   entry.path().string() + " " + d.file("c.json"));
      std::string got, error;
      try {
        got = ChatTemplate(src).render(ctx);
      } catch (const Error& e) {
        error = e.what();
      }
      const std::string what = entry.path().filename().string() + " with " + ctx.dump();
      if (ref.exit_code == 3) {
        EXPECT_FALSE(error.empty()) << what << ": Jinja2 refused (" << ref.output << "), eaglet rendered:\n" << got;
      } else {
        ASSERT_EQ(ref.exit_code, 0) << what << "\n" << ref.output;
        EXPECT_EQ(got, ref.output) << what << (error.empty() ? "" : "\neaglet: " + error);
        ++rendered;
      }
    }
  }
  EXPECT_GE(rendered, 50);
}

TEST(ChatTemplate, ExpressionsAndStatementsMatchJinja2) {
  if (!jinja2_available()) GTEST_SKIP() << "needs /usr/bin/python3 with jinja2 (apt: python3-jinja2)";
  nlohmann::json ctx = {{"xs", {3, 1, 2}}, {"s", "  Hello, World  "}, {"d", {{"b", "two"}, {"a", 1}}}, {"flag", false},
                         {"ms", {{{"role", "user"}, {"content", "u1"}}, {{"role", "assistant"}, {"content", "a1"}},
                                 {{"role", "user"}, {"content", "u2"}}}}};
  for (std::string t : {
           "{{ xs|length }} {{ xs[0] + xs[-1] }} {{ xs[::-1] }} {{ xs[1:] }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 * 3 - 1 }}",
           "{{ s|trim }}|{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.split(',')[1] }}|{{ s.upper() }}",
           "{% for x in xs %}{{ loop.index }}:{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}",
           "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d|tojson }}",
           "{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}",
           "{% if flag is false %}F{% elif flag %}T{% else %}?{% endif %}{{ 'y' if d.a == 1 else 'n' }}",
           "{{ missing is defined }} {{ d.c is none }} {{ 'ell' in s }} {{ 4 not in xs }} {{ s is string }}",
           "  {%- for x in xs -%}\n  [{{ x }}]\n  {%- endfor %}\n{% if true %}\n  indented\n{% endif %}\nend",
           "{{ \"a\" ~ 1 ~ 'b' }} {{ xs|join('-') }} {{ (1 + 2) * 3 }} {{ -xs[0] }}{# comment #}",
           // Python's floor division and modulo (the sign follows the divisor).
           "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 // -2 }} {{ -7.5 % 2 }} {{ 7.5 // -2 }} {{ -6 % 3 }}",
           // Macros with defaults and keyword arguments, calling each other.
           "{% macro tag(name, body='', close=true) %}<{{ name }}>{{ body }}{% if close %}</{{ name }}>{% endif %}{% endmacro %}"
           "{% macro twice(x) %}{{ tag('b', x) }}{{ tag('i', body=x, close=false) }}{% endmacro %}{{ twice('hi') }}|{{ tag('p') }}",
           // Filters real templates use, with tests as arguments and keyword arguments.
           "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}|"
           "{{ ms|rejectattr('role', 'equalto', 'user')|list|length }}|{{ ms|map(attribute='role')|unique|list }}|"
           "{{ xs|select('odd')|list }} {{ xs|reject('divisibleby', 3)|list }} {{ xs|sort }} {{ xs|sort(reverse=true) }}|"
           "{{ xs|map('string')|join }} {{ xs|sum }} {{ xs|min }} {{ xs|max }} {{ s|lower|title }} {{ 'abc'|capitalize }}",
           "{% set o = {'z': 1, 'a': 2} %}{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %} {{ o|tojson }} {{ o|tojson(indent=2) }} "
           "{% for k, v in o.items() %}{{ k }}{% endfor %} {{ o|list }}",
           "{{ {'z': 1, 'a': [1, {'k': none}], 'm': {}}|tojson(indent=4) }} {{ []|tojson(indent=2) }}",
           "{{ 'line1\nline2\n\nline4'|indent(2) }}|{{ 'a\nb'|indent(4, first=true) }}|{{ 3 is divisibleby(3) }} "
           "{{ xs[0] is sameas 3 }} {{ 'a' is in ['a', 'b'] }} {{ flag is boolean }} {{ 2 is even }}",
           "{% if strftime_now is defined and raise_exception is defined %}fns{% endif %}{{ missing|default('x', true) }}",
           "{{ \"}}\" }}{{ '{%' }}{{ '}}' ~ \"{{\" }}",
       })
    expect_same_as_jinja2(t, ctx);
  // Dicts keep insertion order, as Python's do: a template-made dict keeps its literal order.
  expect_same_as_jinja2("{% set o = {'z': 1, 'a': 2, 'm': 3} %}{{ o|tojson }} {% for k in o %}{{ k }}{% endfor %} "
                        "{{ o.keys()|list }} {{ o }} {% for k, v in o|dictsort %}{{ k }}{% endfor %}", ctx);
}

TEST(ChatTemplate, MiniMaxFormatMatchesJinja2AndTheSpec) {
  if (!jinja2_available() || !test::python_numpy_available())
    GTEST_SKIP() << "needs /usr/bin/python3 with jinja2 and numpy (apt: python3-jinja2 python3-numpy)";
  test::TempDir d;
  test::write_synthetic_minimax(d.path(), "m3", "bf16");
  auto tmpl = ChatTemplate::from_tokenizer_config(nlohmann::json::parse(read_text_file(d.file("tokenizer_config.json"))));
  ASSERT_TRUE(tmpl);
  using nlohmann::json;
  const json convo = {{"bos_token", "]~!b["},
                      {"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                {{"role", "user"}, {"content", "2+2?"}},
                                                {{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "add"}},
                                                {{"role", "tool"}, {"content", "{}"}}})},
                      {"add_generation_prompt", true}};
  EXPECT_EQ(tmpl->render(convo),
            "]~!b[]~b]system\nBe brief.[e~[\n]~b]user\n2+2?[e~[\n]~b]ai\n<mm:think>add</mm:think>4[e~[\n"
            "]~b]tool\n<response>{}</response>[e~[\n]~b]ai\n");
  const std::string src = json::parse(read_text_file(d.file("tokenizer_config.json")))["chat_template"];
  expect_same_as_jinja2(src, convo);
  for (auto [key, value] : {std::pair{"enable_thinking", false}, {"enable_thinking", true}, {"add_generation_prompt", false}}) {
    json ctx = convo;
    ctx[key] = value;
    expect_same_as_jinja2(src, ctx);
  }
  // The template may also come as chat_template.jinja beside the tokenizer (newer releases).
  json cfg = json::parse(read_text_file(d.file("tokenizer_config.json")));
  cfg.erase("chat_template");
  test::write_text(d.file("tokenizer_config.json"), cfg.dump());
  test::write_text(d.file("chat_template.jinja"), src);
  const Tokenizer tok = Tokenizer::from_dir(d.path());
  auto from_file = ChatTemplate::from_tokenizer_config(tok.config());
  ASSERT_TRUE(from_file);
  EXPECT_EQ(from_file->render(convo), tmpl->render(convo));
}

TEST(ChatTemplate, SyntaxErrorsAreClear) {
  EXPECT_THROW(ChatTemplate("{% for x in xs %}no end"), Error);
  EXPECT_THROW(ChatTemplate("{{ 'unterminated }}"), Error);
  EXPECT_THROW(ChatTemplate("{% macro m( %}{% endmacro %}"), Error);
  EXPECT_THROW(ChatTemplate("{% macro m() %}never closed"), Error);
  EXPECT_THROW(ChatTemplate("{% call m() %}{% endcall %}"), Error);  // call blocks: not in the subset
  EXPECT_THROW(ChatTemplate("{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}").render(nlohmann::json::object()), Error);
  EXPECT_THROW(ChatTemplate("{{ raise_exception('bad role') }}").render(nlohmann::json::object()), Error);
}

// Any template renders in bounded time and memory or fails with a clear error (templates come
// with model files; the fuzz harness found the first of these as a stack overflow).
TEST(ChatTemplate, HostileTemplatesFailCleanly) {
  auto error_of = [](const std::string& src) -> std::string {
    try {
      ChatTemplate(src).render(nlohmann::json{{"messages", nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}})}});
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  // A namespace holding itself: a reference cycle that printing followed until the stack ran out.
  EXPECT_NE(error_of("{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns.n }}").find("itself"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(n=0) %}{% set ns.n = [1, [ns]] %}").find("itself"), std::string::npos);
  EXPECT_EQ(error_of("{% set ns = namespace(n=0) %}{% set ns.n = ns.n + 1 %}{{ ns.n }}"), "<no error>");
  // Sizes and work.
  EXPECT_NE(error_of("{% for i in range(1000000000000) %}{% endfor %}").find("limit"), std::string::npos);
  EXPECT_NE(error_of("{{ 'ab' * 100000000 }}").find("limit"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("limit"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(100) %}{% endfor %}"
                     "{% endfor %}{% endfor %}").find("steps"), std::string::npos);
  // A slice with huge bounds walks the string, not the bounds (it looped ~1e19 times).
  EXPECT_EQ(ChatTemplate("{{ 'abc'[-9000000000000000000:9000000000000000000:3] }}").render(nlohmann::json::object()), "a");
  // Integer overflow is an error, not undefined behaviour (nor an uncaught std::out_of_range).
  EXPECT_NE(error_of("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("{{ 1" + std::string(400, '0') + ".5 }}").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ -9223372036854775807 - 2 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ (100000000000.0 * 100000000000.0 * 100000000000.0) | int }}").find("integer"), std::string::npos);
  EXPECT_EQ(ChatTemplate("{{ 'abcdef'[1:9223372036854775807:9223372036854775807] }}").render(nlohmann::json::object()), "b");
  // Nesting deep enough to overflow the stack while parsing or rendering.
  EXPECT_NE(error_of("{{ " + std::string(2000, '(') + "1" + std::string(2000, ')') + " }}").find("nesting"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(2000, '-') + "1 }}").find("nesting"), std::string::npos);
  std::string blocks;
  for (int i = 0; i < 2000; ++i) blocks += "{% if true %}";
  EXPECT_NE(error_of(blocks).find("nesting"), std::string::npos);
  std::string sum = "{{ 1";
  for (int i = 0; i < 20000; ++i) sum += " + 1";
  EXPECT_NE(error_of(sum + " }}").find("tokens"), std::string::npos);
}

}  // namespace
}  // namespace eaglet
