// GGUF files: the metadata, the tensor directory (shapes, types, offsets checked against the
// file) and the tokenizers built from the metadata (SentencePiece and byte-level BPE vocabularies).
#include "fuzz_input.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static eaglet::fuzz::MemFile file;
  file.set(data, size);
  eaglet::fuzz::expect_only_errors([&] {
    const eaglet::GgufFile gguf(file.path());
    for (const auto& t : gguf.tensors())  // every tensor's bytes must lie inside the file
      if (t.nbytes) (void)t.data[t.nbytes - 1];
  });
  eaglet::fuzz::expect_only_errors([&] {
    const nlohmann::json meta = eaglet::read_gguf_metadata(file.path());
    const eaglet::Tokenizer tok = eaglet::Tokenizer::from_gguf_metadata(meta, file.path());
    const auto ids = tok.encode("Hello world! <s> caf\xC3\xA9 \xF0\x9F\xA6\x99 123");
    tok.decode(ids);
  });
  return 0;
}
