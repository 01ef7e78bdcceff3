// tokenizer.json (vocabulary, merges, added tokens, normalizers, pre-tokenizers, decoders) and
// encoding/decoding with whatever tokenizer it describes.
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  eaglet::fuzz::expect_only_errors([&] {
    const eaglet::Tokenizer tok = eaglet::Tokenizer::from_json(j, "tokenizer.json");
    for (const char* text : {"Hello world!  <s>\n\tcaf\xC3\xA9 \xF0\x9F\xA6\x99 1234", "", "\xFF\xFE broken utf-8 \xC3"}) {
      const auto ids = tok.encode(text);
      tok.decode(ids);
      for (int id : ids)
        if (id < 0 || id >= tok.vocab_size()) std::abort();  // encode must only produce known ids
    }
  });
  return 0;
}
