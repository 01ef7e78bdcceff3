// Structured-output converters: JSON schemas, choices and regexes turned into GBNF, checked by
// running documents through the grammar matcher (valid ones accepted, invalid ones refused) and
// by the errors unsupported schemas raise (each naming the JSON path at fault).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrain/grammar.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using constrain::json_schema_to_gbnf;

// Whether the whole of `text` is a sentence of the GBNF grammar.
bool accepts(const std::string& gbnf, const std::string& text) {
  constrain::Matcher m(constrain::Grammar::parse(gbnf, "test grammar"));
  return m.accept(text) && m.complete();
}

std::string schema(const std::string& json_text, bool strict = true) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(json_text), strict);
}

void expect_language(const std::string& gbnf, const std::vector<std::string>& good,
                     const std::vector<std::string>& bad) {
  for (const auto& t : good) EXPECT_TRUE(accepts(gbnf, t)) << "should accept: " << t << "\n" << gbnf;
  for (const auto& t : bad) EXPECT_FALSE(accepts(gbnf, t)) << "should refuse: " << t << "\n" << gbnf;
}

std::string schema_error(const std::string& json_text) {
  return test::error_of([&] { schema(json_text); });
}

TEST(JsonSchema, AnyValueAndAnyObject) {
  expect_language(constrain::json_value_gbnf(),
                  {R"({"a":[1,2.5e-3,"x\n\u00e9\ud83d\ude00",true,null,{}]})", R"("s")", "-0.5", "0", "1E+9", "[ ]",
                   "\"\xc3\xa9\""},
                  {"{a:1}", "01", "[1,]", "\"\x01\"", "1.", ".5", "tru", "{\"a\" 1}", " 1", "\"\\ud83d\"", "\"\\x\""});
  expect_language(constrain::json_object_gbnf(), {R"({ "a" : 1 ,"b":[{}]})", "{}"}, {"[1]", "1", "\"{}\""});
}

// A tool without arguments declares `"properties": {}`: under strict that is the empty object
// only (it took any object, and a forced tool call wrote arguments nobody asked for).
TEST(JsonSchema, EmptyPropertiesUnderStrictTakeOnlyTheEmptyObject) {
  expect_language(schema(R"({"type": "object", "properties": {}})"), {"{}", "{ }"}, {"{\"a\": 1}"});
  expect_language(schema(R"({"type": "object", "properties": {}})", false), {"{}", "{\"a\": 1}"}, {});
  expect_language(schema(R"({"type": "object"})"), {"{}", "{\"a\": 1}"}, {});
}

// One space, or a line break and indentation: a model cannot fill its budget with blank lines
// (the small models did, 20 newlines in every place).
TEST(JsonSchema, WhitespaceIsBounded) {
  const std::string g = constrain::json_object_gbnf();
  EXPECT_TRUE(accepts(g, "{ }"));
  EXPECT_TRUE(accepts(g, "{\n\t\"a\": 1\n}"));
  EXPECT_TRUE(accepts(g, "{\n" + std::string(20, ' ') + "\"a\": 1}"));
  EXPECT_FALSE(accepts(g, "{\n" + std::string(21, ' ') + "\"a\": 1}"));
  EXPECT_FALSE(accepts(g, "{\n\n\"a\": 1}"));
  EXPECT_FALSE(accepts(g, "{  }"));
}

TEST(JsonSchema, PropertiesInOrderRequiredAndOptional) {
  const std::string g =
      schema(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
      "tag": {"type": "boolean"}}, "required": ["name", "tag"]})");
  expect_language(
      g,
      {R"({"name":"x","tag":true})", R"({"name":"x","age":3,"tag":false})",
       "{ \"name\" : \"x\" ,\n \"age\": 3, \"tag\": true }"},
      {"{}", R"({"name":"x"})", R"({"age":3,"name":"x","tag":true})", R"({"name":"x","tag":true,"extra":1})",
       R"({"name":1,"tag":true})", R"({"name":"x","age":3.5,"tag":true})", R"({"name":"x",,"tag":true})",
       R"({"name":"x","tag":true,})"});
  // All optional: any subset in order, including none.
  expect_language(schema(R"({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})"),
                  {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
                  {R"({"b":2,"a":1})", R"({,"b":2})", R"({"c":1})"});
}

TEST(JsonSchema, AdditionalProperties) {
  const std::string any_extra =
      schema(R"({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
      "additionalProperties": true})");
  expect_language(any_extra,
                  {R"({"name":"x","nam":1})", R"({"name":"x","names":[1],"b":{}})", R"({"name":"x","":null})"},
                  {R"({"name":"x","name":"y"})", R"({"nam":1,"name":"x"})", R"({"nam":1})"});
  expect_language(schema(R"({"properties": {"a": {"const": 1}}, "additionalProperties": {"type": "integer"}})"),
                  {R"({"a":1,"k":2})", R"({"k":2,"j":3})", "{}"},
                  {R"({"a":1,"k":"v"})", R"({"a":2})", R"({"a":1,"a":1})"});
  expect_language(schema(R"({"properties": {"a": {"type": "null"}}, "additionalProperties": false})"),
                  {"{}", R"({"a":null})"}, {R"({"b":null})"});
  // JSON Schema's own default (strict = false): extras allowed; strict: not where properties are declared.
  expect_language(schema(R"({"properties": {"a": {"type": "null"}}})", false), {R"({"a":null,"b":1})"}, {R"({"a":1})"});
  expect_language(schema(R"({"type": "object"})"), {R"({"b":1,"c":[]})", "{}"}, {"[]"});
  // A required name that no property declares is an extra property that must be there.
  expect_language(schema(R"({"type": "object", "required": ["id"], "additionalProperties": {"type": "integer"}})"),
                  {R"({"id":4})"}, {"{}", R"({"id":"x"})"});
}

TEST(JsonSchema, EnumConstAndTypeLists) {
  expect_language(schema(R"({"enum": ["red", "green", 3, null, "a\"b"]})"),
                  {"\"red\"", "\"green\"", "3", "null", R"("a\"b")"}, {"\"blue\"", "\"re\"", "3.0", "\"null\""});
  expect_language(schema(R"({"type": "string", "enum": ["x", 1]})"), {"\"x\""}, {"1"});
  expect_language(schema(R"({"const": {"a": [1, 2], "b": "\u00e9"}})"),
                  {R"({"a":[1,2],"b":"é"})", R"({ "a": [1, 2], "b": "é" })"},
                  {R"({"a":[2,1],"b":"é"})", R"({"b":"é","a":[1,2]})"});
  expect_language(schema(R"({"type": ["string", "null"], "maxLength": 2})"), {"null", "\"ab\""}, {"\"abc\"", "1"});
  expect_language(schema(R"({"type": ["number", "integer"]})"), {"1", "1.5"}, {"\"1\""});
  expect_language(schema(R"({"type": "boolean"})"), {"true", "false"}, {"null", "1"});
}

TEST(JsonSchema, Combinators) {
  expect_language(schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}], "description": "x"})"),
                  {"5", "\"a\""}, {"\"ab\"", "true"});
  expect_language(schema(R"({"oneOf": [{"const": "a"}, {"const": "b"}]})"), {"\"a\"", "\"b\""}, {"\"c\""});
  expect_language(schema(R"({"allOf": [{"$ref": "#/definitions/n"}], "definitions": {"n": {"type": "null"}}})"),
                  {"null"}, {"1"});
  expect_language(schema("true"), {"1", "{\"a\":[]}"}, {"x"});
  expect_language(schema("{}"), {"null", "\"s\""}, {""});
}

TEST(JsonSchema, RecursiveRefs) {
  const std::string tree = schema(R"({"$defs": {"node": {"type": "object", "properties": {
      "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value", "children"]}}, "$ref": "#/$defs/node"})");
  expect_language(
      tree,
      {R"({"value":1,"children":[]})",
       R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]},{"value":4,"children":[]}]})"},
      {R"({"value":1,"children":[{"value":2}]})", R"({"value":1,"children":[1]})"});
  // "#" is the root itself.
  expect_language(schema(R"({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]})"),
                  {"[1,[2,[]]]", "3"}, {"[\"a\"]"});
  test::expect_mentions(
      schema_error(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"})"),
      {"$.$defs.a.anyOf[0].$ref", "left recursion"});
  test::expect_mentions(schema_error(R"({"$ref": "#/$defs/missing"})"), {"$.$ref", "not defined"});
  test::expect_mentions(schema_error(R"({"$ref": "other.json#/x"})"), {"$.$ref", "only references"});
}

TEST(JsonSchema, Arrays) {
  expect_language(schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})"),
                  {"[1,2]", "[1, 2, 3]"}, {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"});
  expect_language(schema(R"({"type": "array", "items": {"type": "integer"}})"), {"[]", "[1]", "[1,2,3,4,5]"}, {"[1,]"});
  expect_language(schema(R"({"type": "array", "maxItems": 0})"), {"[]"}, {"[1]"});
  expect_language(schema(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}]})"),
                  {"[]", "[\"a\"]", "[\"a\",1]"}, {"[1]", "[\"a\",1,2]"});
  expect_language(
      schema(
          R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "boolean"}, "minItems": 1})"),
      {"[\"a\"]", "[\"a\",1,true,false]"}, {"[]", "[\"a\",true]", "[\"a\",1,2]"});
  expect_language(
      schema(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false, "minItems": 2})"),
      {"[\"a\",1]"}, {"[\"a\"]", "[\"a\",1,2]"});
  expect_language(schema(R"({"prefixItems": [{"type": "null"}, {"type": "null"}, {"type": "null"}], "maxItems": 2})"),
                  {"[]", "[null]", "[null,null]"}, {"[null,null,null]"});
  expect_language(schema(R"({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}})"), {"[\"a\",1,2]"},
                  {"[1]"});
}

TEST(JsonSchema, StringLengthsCountCharacters) {
  expect_language(schema(R"({"type": "string", "minLength": 2, "maxLength": 3})"),
                  {"\"ab\"", "\"abc\"", R"("a\u00e9b")", "\"\xc3\xa9\xc3\xa9\"", R"("\n\t")"},
                  {"\"a\"", "\"abcd\"", "\"a\nb\""});
  expect_language(schema(R"({"type": "string", "maxLength": 1})"),
                  {R"("\ud83d\ude00")", "\"\xf0\x9f\x98\x80\"", "\"\""}, {"\"ab\""});
}

TEST(JsonSchema, PatternsAndFormats) {
  expect_language(schema(R"({"type": "string", "pattern": "^[a-z]+\\d{2}$"})"), {"\"abc12\""},
                  {"\"abc1\"", "\"12\"", "\"abc123\""});
  // The pattern sees decoded text: a quote or a backslash in it is escaped in the JSON.
  expect_language(schema(R"({"pattern": "^a\"b\\\\c$"})"), {R"("a\"b\\c")"}, {"\"a\"b\\c\"", R"("a\"bc")"});
  expect_language(schema(R"({"pattern": "^x.y$"})"), {"\"x-y\"", R"("x\"y")", R"("x\ty")"}, {R"("x\ny")", "\"xy\""});
  expect_language(schema(R"({"type": "string", "format": "date"})"), {"\"2024-02-29\""},
                  {"\"2024-13-01\"", "\"2024-1-01\""});
  expect_language(schema(R"({"type": "string", "format": "time"})"), {"\"23:59:60Z\"", "\"08:30:00.25+02:00\""},
                  {"\"24:00:00Z\"", "\"08:30:00\""});
  expect_language(schema(R"({"type": "string", "format": "date-time"})"), {"\"2024-02-29T08:30:00Z\""},
                  {"\"2024-02-29 08:30:00Z\""});
  expect_language(schema(R"({"format": "uuid"})"), {"\"123e4567-e89b-12d3-a456-426614174000\""},
                  {"\"123e4567e89b12d3a456426614174000\""});
}

TEST(JsonSchema, IntegerRangesAreExact) {
  expect_language(schema(R"({"type": "integer", "minimum": 0})"), {"0", "7", "12", "1234567890123"},
                  {"-1", "01", "-0", "1.0"});
  expect_language(schema(R"({"type": "integer", "exclusiveMinimum": 0})"), {"1", "10"}, {"0", "-3"});
  expect_language(schema(R"({"type": "integer", "minimum": 1.5, "maximum": 3.5})"), {"2", "3"}, {"1", "4"});
  expect_language(schema(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})"), {"6"}, {"5"});
  // Every integer in a window, against ranges of several shapes.
  const std::vector<std::pair<std::string, std::pair<long, long>>> ranges = {
      {R"("minimum": -5, "maximum": 100)", {-5, 100}},
      {R"("minimum": 37, "maximum": 1234)", {37, 1234}},
      {R"("minimum": 1000)", {1000, 1L << 40}},
      {R"("maximum": -17)", {-(1L << 40), -17}},
      {R"("minimum": -1234, "maximum": -37)", {-1234, -37}},
      {R"("exclusiveMinimum": 99, "exclusiveMaximum": 1001)", {100, 1000}},
      {R"("minimum": 0, "maximum": 0)", {0, 0}}};
  for (const auto& [keywords, range] : ranges) {
    const std::string g = schema(R"({"type": "integer", )" + keywords + "}");
    for (long v = -1300; v <= 1300; ++v)
      EXPECT_EQ(accepts(g, std::to_string(v)), v >= range.first && v <= range.second) << keywords << ": " << v;
  }
  const std::string full =
      schema(R"({"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807})");
  expect_language(full, {"-9223372036854775808", "9223372036854775807", "0"},
                  {"9223372036854775808", "-9223372036854775809"});
}

// A schema as Pydantic writes one, and documents as models print them (compact, indented, byte by byte).
TEST(JsonSchema, PydanticStyleSchema) {
  const std::string g =
      schema(R"({"$defs": {"Pet": {"properties": {"kind": {"enum": ["cat", "dog"], "title": "Kind", "type": "string"},
      "name": {"title": "Name", "type": "string"}}, "required": ["kind", "name"], "title": "Pet", "type": "object"}},
      "properties": {"id": {"minimum": 1, "title": "Id", "type": "integer"},
      "email": {"anyOf": [{"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"}, {"type": "null"}], "default": null},
      "pets": {"items": {"$ref": "#/$defs/Pet"}, "maxItems": 4, "type": "array"},
      "scores": {"type": "array", "items": {"type": "number"}}, "born": {"type": "string", "format": "date"}},
      "required": ["id", "pets"], "title": "Owner", "type": "object"})");
  const auto doc =
      nlohmann::ordered_json::parse(R"({"id": 7, "email": "a.b@c.org", "pets": [{"kind": "cat", "name": "Tom \"T\""},
      {"kind": "dog", "name": "Rex\u00e9"}], "scores": [1.5, -2e3, 0], "born": "2001-09-30"})");
  expect_language(g, {doc.dump(), doc.dump(2), doc.dump(1, '\t'), R"({"id":1,"pets":[]})"},
                  {R"({"id":0,"pets":[]})", R"({"id":1,"email":"a@b@c","pets":[]})",
                   R"({"id":1,"pets":[{"kind":"cow","name":"x"}]})", R"({"id":1,"pets":[],"born":"2001-9-30"})"});
  constrain::Matcher m(constrain::Grammar::parse(g));
  for (char c : doc.dump(2)) ASSERT_TRUE(m.accept(std::string(1, c))) << c;
  EXPECT_TRUE(m.complete());
}

TEST(JsonSchema, UnsupportedKeywordsNameTheirPath) {
  test::expect_mentions(schema_error(R"({"properties": {"age": {"type": "integer", "multipleOf": 2}}})"),
                        {"$.properties.age.multipleOf", "not supported"});
  test::expect_mentions(schema_error(R"({"type": "array", "items": {"type": "string", "format": "email"}})"),
                        {"$.items.format", "'email' is not supported"});
  test::expect_mentions(schema_error(R"({"properties": {"x": {"type": "number", "minimum": 0}}})"),
                        {"$.properties.x.minimum", "integer"});
  test::expect_mentions(schema_error(R"({"type": "string", "minLength": "3"})"),
                        {"$.minLength", "non-negative integer"});
  test::expect_mentions(schema_error(R"({"type": "string", "minimum": 1})"), {"$.minimum", "numeric"});
  test::expect_mentions(schema_error(R"({"properties": {"first name": false}})"),
                        {"$.properties[\"first name\"]", "false"});
  test::expect_mentions(schema_error(R"({"allOf": [{}, {}]})"), {"$.allOf", "exactly one"});
  test::expect_mentions(schema_error(R"({"type": "array", "uniqueItems": true})"), {"$.uniqueItems"});
  test::expect_mentions(schema_error(R"({"type": "strin"})"), {"$.type", "strin"});
  test::expect_mentions(schema_error(R"({"anyOf": [{}], "type": "object"})"), {"$.type", "anyOf"});
  test::expect_mentions(schema_error(R"({"type": "string", "pattern": "(?=a)b"})"),
                        {"$.pattern", "lookaround", "offset"});
  test::expect_mentions(schema_error(R"({"type": "integer", "minimum": 5, "maximum": 4})"), {"$", "[5, 4]"});
  test::expect_mentions(schema_error(R"({"not": {}})"), {"$.not"});
  test::expect_mentions(schema_error(R"({"required": ["a"], "additionalProperties": false})"), {"$.required", "'a'"});
  test::expect_mentions(schema_error("3"), {"$", "object or a boolean"});
}

TEST(JsonSchema, ChoiceIsLiteral) {
  const std::string g = constrain::choice_gbnf({"yes", "no", "a \"q\"\\\n", "\xc3\xa9t\xc3\xa9"});
  expect_language(g, {"yes", "no", "a \"q\"\\\n", "\xc3\xa9t\xc3\xa9"}, {"ye", "yesno", "", "a \"q\"\\"});
  EXPECT_TRUE(accepts(constrain::choice_gbnf({"", "x"}), ""));
  test::expect_mentions(test::error_of([] { constrain::choice_gbnf({}); }), {"choice"});
}

TEST(RegexGbnf, MatchesWholeStrings) {
  auto re = [](const std::string& p) { return constrain::regex_to_gbnf(p, "regex"); };
  expect_language(re("^(ab|c)+d?$"), {"ab", "cabc", "abd"}, {"", "a", "abdd", "dab"});
  expect_language(re("[A-Za-z_][\\w-]{0,3}"), {"a", "_b-9", "Zzzz"}, {"9a", "abcde", "a b"});
  expect_language(re("\\d{3}-\\d{2,}"), {"123-45", "123-45678"}, {"12-45", "123-4"});
  expect_language(re("[^a-c\\]]x*?"), {"d", "dxx", "\xc3\xa9", "\n"}, {"a", "]", "bx"});
  expect_language(re("a.c"),
                  {"abc",
                   "a\xe2\x82\xac"
                   "c"},
                  {"a\nc", "ac"});
  expect_language(re("\\s\\S\\D\\W"), {" aa!", "\txz-"}, {"  a!", " a1!"});
  expect_language(re("(?:x|y)(?<n>z)\\.\\u00e9\\x41\\t"),
                  {"xz.\xc3\xa9"
                   "A\t"},
                  {"xz.eA\t"});
  expect_language(re("a{2}b{1,}c{,2}"), {"aab", "aabbbcc"}, {"ab", "aabccc"});
  expect_language(re("x{y}|"), {"x{y}", ""}, {"x"});
  expect_language(re("[-a]+|[a-]"), {"-a-", "a"}, {"b"});
}

TEST(RegexGbnf, RefusesWhatItCannotExpress) {
  auto err = [](const std::string& p) { return test::error_of([&] { constrain::regex_to_gbnf(p, "regex"); }); };
  test::expect_mentions(err("(a)\\1"), {"regex", "backreference", "offset 3"});
  test::expect_mentions(err("a(?!b)"), {"lookaround"});
  test::expect_mentions(err("a^b"), {"'^'"});
  test::expect_mentions(err("a$b"), {"'$'"});
  test::expect_mentions(err("\\bword"), {"anchor"});
  test::expect_mentions(err("(a*)*"), {"empty"});
  test::expect_mentions(err("*a"), {"nothing to repeat"});
  test::expect_mentions(err("[a-"), {"']'"});
  test::expect_mentions(err("(a"), {"')'"});
  test::expect_mentions(err("a)"), {"unmatched"});
  test::expect_mentions(err("(?i)a"), {"not supported"});
  test::expect_mentions(err("\\p{L}"), {"not supported"});
  test::expect_mentions(err("a++"), {"possessive"});
}

}  // namespace
}  // namespace eaglet
