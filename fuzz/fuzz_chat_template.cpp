// Chat templates (the Jinja subset): parsing and rendering a conversation.
#include "fuzz_input.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const eaglet::Tokenizer tok = eaglet::Tokenizer::bytes();
  const std::string source(reinterpret_cast<const char*>(data), size);
  eaglet::fuzz::expect_only_errors([&] {
    const eaglet::ChatTemplate t(source);
    t.render({{"system", "Be brief."}, {"user", "Hi {{ there }}"}, {"assistant", "Hello!"}, {"user", "Bye"}}, true, tok);
  });
  return 0;
}
