// Structured-output constraints as GBNF for grammar.h: JSON schemas (response_format json_schema,
// vLLM's guided_json / structured_outputs.json), any JSON object (response_format json_object),
// any JSON value, and a choice among literal strings (vLLM's `choice`).
//
// The JSON grammars accept compact JSON, or between tokens one space or a line break with up to
// 20 spaces or tabs of indentation (llama.cpp's rule: pretty-printed JSON fits, and a weak model
// cannot spend its tokens on blank lines); the root value has none before or after it. Strings in general take every JSON escape; a string under `pattern`
// or `format`, enum and const values and property names take only the escapes a JSON writer
// uses (\" \\ \/ \b \f \n \r \t, \u00XX for control characters).
//
// Schemas (draft 2020-12 with the draft 4-7 spellings of the same keywords):
// - type (one or a list), enum, const, anyOf, oneOf (as anyOf: an output matching several
//   branches is not refused, as in vLLM/xgrammar), allOf with one subschema, $ref to
//   "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed, each definition one rule);
// - objects: properties (in the schema's order: required ones must appear, optional ones may be
//   left out), required, additionalProperties (false, true or a schema; other property names
//   come after the declared ones). strict (the default, as vLLM's xgrammar does): an object
//   schema that declares properties or required ones and says nothing of additionalProperties
//   takes no others (`"properties": {}`, a tool without arguments, takes only {}), and prefixItems without items take no more items; strict = false follows
//   JSON Schema (both allowed). An object schema that declares nothing takes any object.
// - arrays: items, prefixItems (or draft 4's items list with additionalItems), minItems,
//   maxItems, uniqueItems false;
// - strings: minLength, maxLength, pattern (the whole string must match), format date, time,
//   date-time, uuid;
// - integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact ranges within int64);
// - annotations (title, description, $schema, $id, $comment, examples, default, deprecated,
//   readOnly, writeOnly) and $defs/definitions are ignored.
// Without `type`, the type follows from the keywords (properties -> object, ...); no keyword at
// all accepts any value. Anything else (bounds on non-integer numbers, other formats, not, if,
// patternProperties, unknown keywords, keywords of the wrong JSON type) throws eaglet::Error
// whose message starts with the JSON path of the offending place, e.g.
// "$.properties.age.minimum: ...". Property order: nlohmann::json keeps object keys sorted, so
// pass an ordered_json (parsed from the request text) to keep the schema's own order.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace eaglet::constrain {

// GBNF (start rule `root`) for the JSON texts valid against `schema`.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, bool strict = true);
std::string json_schema_to_gbnf(const nlohmann::json& schema, bool strict = true);

// GBNF for any JSON value / any JSON object.
std::string json_value_gbnf();
std::string json_object_gbnf();

// GBNF for exactly one of `choices` (at least one), each taken literally.
std::string choice_gbnf(const std::vector<std::string>& choices);

}  // namespace eaglet::constrain
