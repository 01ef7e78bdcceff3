// Structured-output constraints from requests: a GBNF grammar, a JSON schema, a regular
// expression or a structural tag (the first byte says which), compiled, then a matcher fed the input's own bytes and
// a token mask over the byte vocabulary computed at each step.
#include <nlohmann/json.hpp>

#include "constrain/grammar.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "constrain/structural_tag.h"
#include "constrain/token_mask.h"
#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eaglet::constrain;
  static const TokenTrie trie(eaglet::Tokenizer::bytes());
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  eaglet::fuzz::expect_only_errors([&] {
    std::string gbnf = text;
    if (data[0] % 4 == 1 || data[0] % 4 == 3) {
      const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
      if (j.is_discarded()) return;
      gbnf = data[0] % 4 == 1 ? json_schema_to_gbnf(j) : structural_tag_to_gbnf(j);
    } else if (data[0] % 4 == 2) {
      gbnf = regex_to_gbnf(text, "regex");
    }
    Matcher m(Grammar::parse(gbnf));
    for (size_t i = 0; i < text.size() && i < 64; ++i) {
      (void)trie.allowed(m);
      if (!m.accept(std::string_view(text).substr(i, 1))) break;
    }
  });
  return 0;
}
