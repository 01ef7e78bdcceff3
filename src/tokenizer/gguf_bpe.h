// llama.cpp GGUF vocabularies with the byte-level BPE model ("gpt2"). GGUF stores the tokens and
// merges but not the pre-tokenizer: llama.cpp picks its split regexes by the `tokenizer.ggml.pre`
// name. This turns such a vocabulary into the equivalent tokenizer.json (a sequence of isolating
// regex splits, then byte-level mapping), so one BPE implementation serves both formats.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace eaglet {

// The split regexes llama.cpp applies, in order, for a `tokenizer.ggml.pre` name; throws naming
// `where` for names it does not know.
std::vector<std::string> gguf_pretokenizer_regexes(const std::string& pre, const std::string& where);

// tokenizer.json equivalent of GGUF metadata whose tokenizer.ggml.model is "gpt2".
nlohmann::json gguf_bpe_tokenizer_json(const nlohmann::json& meta, const std::string& where);

}  // namespace eaglet
