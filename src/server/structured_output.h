// The structured-output fields of a request, as one grammar for the sampler: OpenAI's
// `response_format` (json_object; json_schema with `strict`; vLLM's structural_tag), vLLM's
// `structured_outputs` {json, regex, choice, grammar, json_object, structural_tag} and its older
// `guided_json` / `guided_regex` / `guided_choice` / `guided_grammar`, and llama-server's
// `grammar` (GBNF) and `json_schema`.
// At most one may be given. Anything unsupported or invalid is a 400 naming the field (and, in a
// schema, the JSON path inside it), never ignored.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "constrain/grammar.h"

namespace eaglet {

// The body's structured-output field names (the request parser lets them through).
const std::set<std::string>& structured_output_fields();

// A constraint as GBNF and the request field that asked for it (errors name that field).
struct GrammarAsk {
  std::string param, gbnf;
};

// The constraint the body asks for, none for none (or response_format text). `ordered`: the
// same body keeping its objects' key order, so a schema's properties are generated in the order
// it lists them (OpenAI's structured outputs keep that order); null: `body`'s (keys sorted).
// Throws ApiError (openai_protocol.h).
std::optional<GrammarAsk> structured_output(const nlohmann::json& body, const nlohmann::ordered_json* ordered = nullptr);

// The grammar of `ask`, starting at rule `start`; requests asking for the same one share it (and
// so its cached token masks). Throws ApiError naming ask.param.
std::shared_ptr<const constrain::Grammar> compile_grammar(const GrammarAsk& ask, const std::string& start = "root");

}  // namespace eaglet
