// Structural tags (vLLM's / xgrammar's `structural_tag`) and the grammar composition under them:
// rules renamed apart, free text up to markers (an Aho-Corasick automaton), and every format
// checked by running texts through the matcher (admitted ones accepted, others refused); errors
// name the JSON path at fault.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "constrain/compose.h"
#include "constrain/grammar.h"
#include "constrain/structural_tag.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using ojson = nlohmann::ordered_json;
using constrain::structural_tag_to_gbnf;

bool accepts(const std::string& gbnf, const std::string& text) {
  constrain::Matcher m(constrain::Grammar::parse(gbnf, "test grammar"));
  return m.accept(text) && m.complete();
}

void expect_language(const std::string& gbnf, const std::vector<std::string>& good, const std::vector<std::string>& bad) {
  for (const auto& t : good) EXPECT_TRUE(accepts(gbnf, t)) << "should accept: " << t << "\n" << gbnf;
  for (const auto& t : bad) EXPECT_FALSE(accepts(gbnf, t)) << "should refuse: " << t << "\n" << gbnf;
}

std::string tag_gbnf(const std::string& json_text) { return structural_tag_to_gbnf(ojson::parse(json_text)); }
std::string tag_error(const std::string& json_text) { return test::error_of([&] { tag_gbnf(json_text); }); }

TEST(GrammarCompose, PrefixedRulesKeepLiteralsClassesAndBounds) {
  const std::string g = "root ::= item (\",\" item){0,3} # item list\nitem ::= [a-z_-]+ \"root item\"\n";
  const std::string p = constrain::prefix_rules(g, "x-");
  EXPECT_EQ(p, "x-root ::= x-item (\",\" x-item){0,3} # item list\nx-item ::= [a-z_-]+ \"root item\"\n");
  expect_language(p + "root ::= x-root\n", {"abroot item", "a-root item,b_root item"}, {"root item", "ab", "ab root item"});
}

// Text that is not a whole grammar (an unclosed bound or literal) still comes back, renamed as far
// as it goes: it must never loop (the grammar's own parser reports the error).
TEST(GrammarCompose, PrefixingUnfinishedTextEnds) {
  EXPECT_EQ(constrain::prefix_rules("root ::= a{2", "x-"), "x-root ::= x-a{2");
  EXPECT_EQ(constrain::prefix_rules("root ::= \"ab", "x-"), "x-root ::= \"ab");
}

// The automaton against the plain definition, on random texts over the markers' letters: the
// text is accepted exactly when it is (free text without a marker) (marker continuation), or
// ends without one when that is allowed.
TEST(GrammarCompose, FreeTextStopsAtTheFirstMarker) {
  const std::vector<constrain::TextMarker> markers = {{"abab", "\"!\""}, {"ba", std::nullopt}, {"bb", "\"?\""}, {"aab", ""}};
  for (bool may_end : {false, true}) {
    const std::string g = constrain::free_text_gbnf("t", markers, may_end, "test") + "root ::= t\n";
    const auto grammar = constrain::Grammar::parse(g, "test");
    // The reference: scan for the first position where a marker ends (the longest if several).
    auto expected = [&](const std::string& s) {
      for (size_t end = 1; end <= s.size(); ++end) {
        const constrain::TextMarker* hit = nullptr;
        for (const auto& m : markers)
          if (m.text.size() <= end && s.compare(end - m.text.size(), m.text.size(), m.text) == 0 &&
              (!hit || m.text.size() > hit->text.size()))
            hit = &m;
        if (!hit) continue;
        if (!hit->then) return false;
        const std::string rest = s.substr(end);
        return *hit->then == "" ? rest.empty() : *hit->then == "\"!\"" ? rest == "!" : rest == "?";
      }
      return may_end;
    };
    std::mt19937 rng(11);
    for (int trial = 0; trial < 3000; ++trial) {
      std::string s;
      for (int n = int(rng() % 9); n > 0; --n) s += "ab!?c"[rng() % 5];
      constrain::Matcher m(grammar);
      EXPECT_EQ(m.accept(s) && m.complete(), expected(s)) << "'" << s << "' may_end " << may_end;
    }
  }
}

TEST(StructuralTag, TriggeredToolCallsInFreeText) {
  const std::string g = tag_gbnf(R"({"type": "structural_tag", "format": {"type": "triggered_tags",
    "triggers": ["<function="],
    "tags": [{"type": "tag", "begin": "<function=get_weather>", "end": "</function>",
              "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
             {"type": "tag", "begin": "<function=now>", "end": "</function>",
              "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {}}}}]}})");
  expect_language(g,
                  {"", "Just text, no call.", "Let me look. <function=get_weather>{\"city\": \"Lima\"}</function> Done.",
                   "<function=now>{}</function><function=get_weather>{\"city\":\"x\"}</function>", "a <functio"},
                  {"<function=get_weather>{\"town\": \"Lima\"}</function>", "<function=other>{}</function>",
                   "<function=now>{}", "<function=now>{} </function>", "<function=now>{\"a\": 1}</function>"});
}

TEST(StructuralTag, AtLeastOneAndStopAfterFirst) {
  const std::string base = R"({"format": {"type": "triggered_tags", "triggers": ["<t"], "tags": [
    {"begin": "<t1>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</t>"},
    {"begin": "<t2>", "content": {"type": "const_string", "value": "two"}, "end": ["</t>", "</t2>"]}])";
  expect_language(tag_gbnf(base + R"(, "at_least_one": true}})"), {"<t1>42</t>", "<t2>two</t2> then text <t1>1</t>"},
                  {"", "text <t1>42</t>", "<t1></t>"});
  expect_language(tag_gbnf(base + R"(, "stop_after_first": true}})"), {"", "text", "text <t1>42</t>"},
                  {"<t1>4</t> more", "<t1>4</t><t2>two</t>"});
  expect_language(tag_gbnf(base + R"(, "at_least_one": true, "stop_after_first": true}})"), {"<t2>two</t>"},
                  {"", "x<t2>two</t>", "<t2>two</t>x"});
}

TEST(StructuralTag, FreeTextInsideATagStopsAtItsEnd) {
  // Reasoning, then a JSON answer: the thinking cannot contain </think> before its end.
  const std::string g = tag_gbnf(R"({"format": {"type": "sequence", "elements": [
    {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "excludes": ["<tool"]}, "end": "</think>"},
    {"type": "const_string", "value": "\n"},
    {"type": "json_schema", "json_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}]}})");
  expect_language(g, {"<think>so n is 3</think>\n{\"n\": 3}", "<think></think>\n{\"n\":-1}", "<think>a</b></think>\n{\"n\": 0}"},
                  {"<think>x</think>y</think>\n{\"n\": 3}", "<think>use <tool></think>\n{\"n\": 3}", "<think>x</think>\n{}"});
}

TEST(StructuralTag, CompositionsAndSeparatedTags) {
  expect_language(tag_gbnf(R"({"format": {"type": "or", "elements": [{"type": "const_string", "value": "yes"},
                    {"type": "repeat", "min": 2, "max": 3, "content": {"type": "const_string", "value": "ab"}}]}})"),
                  {"yes", "abab", "ababab"}, {"ab", "abababab", "yesab"});
  expect_language(tag_gbnf(R"({"format": {"type": "sequence", "elements": [{"type": "optional", "content": {"type": "const_string", "value": "-"}},
                    {"type": "plus", "content": {"type": "regex", "pattern": "[0-9]"}}, {"type": "star", "content": {"type": "grammar", "grammar": "root ::= \"!\""}}]}})"),
                  {"1", "-12!!", "7!"}, {"-", "!", "1-"});
  const std::string items = R"({"format": {"type": "tags_with_separator", "separator": ",", "tags": [
    {"begin": "<i>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</i>"}])";
  expect_language(tag_gbnf(items + "}}"), {"", "<i>1</i>", "<i>1</i>,<i>2</i>"}, {"<i>1</i>,", "<i>1</i> <i>2</i>", "x"});
  expect_language(tag_gbnf(items + R"(, "at_least_one": true, "stop_after_first": true}})"), {"<i>5</i>"}, {"", "<i>1</i>,<i>2</i>"});
}

TEST(StructuralTag, TheOlderShapeIsTriggeredSchemas) {
  // vLLM's StructuralTagResponseFormat before xgrammar's `format`.
  const std::string g = tag_gbnf(R"({"type": "structural_tag", "triggers": ["<function="], "structures": [
    {"begin": "<function=add>", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, "end": "</function>"}]})");
  expect_language(g, {"sum: <function=add>{\"a\": 1}</function>", "none"}, {"<function=add>{\"a\": \"1\"}</function>"});
}

TEST(StructuralTag, ErrorsNameTheirPath) {
  struct Case {
    std::string json;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {R"({"format": {"type": "token", "token": "<|call|>"}})", {"$.format.type", "token"}},
      {R"({"format": {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "x"}]}})",
       {"$.format.elements[0]", "nothing to end it"}},
      {R"({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [{"begin": "<g>", "content": {"type": "any_text"}, "end": "</g>"}]}})",
       {"$.format.tags[0].begin", "none of the triggers"}},
      {R"({"format": {"type": "tag", "begin": "<a>", "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": "x"}}}}, "end": "</a>"}})",
       {"$.format.content.json_schema", "$.properties.n.minimum"}},
      {R"({"format": {"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}})", {"$.format.style", "qwen_xml"}},
      {R"({"format": {"type": "any_text", "max_tokens": 5}})", {"$.format.max_tokens"}},
      {R"({"format": {"type": "const_string", "value": "a", "extra": 1}})", {"$.format.extra"}},
      {R"({"format": {"type": "repeat", "min": 3, "max": 2, "content": {"type": "const_string", "value": "a"}}})", {"$.format.max"}},
      {R"({"format": {"type": "grammar", "grammar": "root ::= undefined"}})", {"$.format.grammar", "undefined"}},
      {R"({"format": {"type": "regex", "pattern": "(a"}})", {"$.format.pattern"}},
      {R"({"format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": ""}})", {"$.format.content", "empty"}},
      {R"({"structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}]})", {"$", "triggers"}},
      {R"({"type": "json_schema", "format": {}})", {"$.type"}},
      {R"({"formats": {}})", {"$", "format"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    const std::string e = tag_error(c.json);
    for (const auto& p : c.parts) EXPECT_NE(e.find(p), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace eaglet
