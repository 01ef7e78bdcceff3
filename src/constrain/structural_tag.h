// Structural tags (xgrammar's format, taken by vLLM as `response_format` {"type":
// "structural_tag", ...} and `structured_outputs.structural_tag`) as GBNF: free text mixed with
// constrained regions, e.g. prose with tool calls `<function=NAME>{...}</function>` whose
// arguments follow each tool's schema.
//
// Two shapes of the object:
// - {"format": FORMAT} (xgrammar >= 0.1.25), FORMAT one of
//     const_string {value}; json_schema {json_schema[, style "json"]}; grammar {grammar} (GBNF);
//     regex {pattern}; any_text {excludes}; sequence {elements}; or {elements};
//     optional / plus / star {content}; repeat {min, max (-1: unbounded), content};
//     tag {begin, content, end (a string or a list of them)};
//     triggered_tags {triggers, tags, at_least_one, stop_after_first, excludes};
//     tags_with_separator {tags, separator, at_least_one, stop_after_first};
// - {"structures": [{begin, schema, end}], "triggers": [...]} (the older one): triggered_tags
//   over tags whose content is the schema.
// Free text (any_text, the text between triggered tags) never contains an `excludes` string, and
// runs until what ends it: the enclosing tag's end, a trigger (which must then open one of the
// tags), or the end of the output where the format ends the output. A format that would leave
// free text with nothing to end it (any_text followed by more formats) is refused, as are the
// token-level formats, `dispatch`, XML styles, `any_order`, token and character budgets and
// unknown keys: eaglet::Error whose message starts with the JSON path ("$.format.tags[1].begin: ...").
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace eaglet::constrain {

// GBNF (start rule `root`) for the texts `tag` admits (its "type" key, if present, must say
// "structural_tag").
std::string structural_tag_to_gbnf(const nlohmann::ordered_json& tag);

}  // namespace eaglet::constrain
