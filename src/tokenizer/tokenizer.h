// Hugging Face `tokenizer.json` tokenizers (BPE: byte-level as in GPT-2 / Llama 3 / Qwen, and
// SentencePiece-style with byte fallback as in Llama 2), tiktoken rank files, llama.cpp GGUF
// vocabularies, and a plain byte tokenizer for the built-in model. Tokenizer runs the pipeline
// (added tokens, normalizers, pre-tokenizers, decoding); the family's TokenModel (token_model.h)
// turns each piece into ids; each format's loader is its own file (tokenizer_hf.cpp,
// tokenizer_tiktoken.cpp, tokenizer_gguf.cpp). Vocabulary entries are kept as the raw bytes they
// decode to, so decoding is a concatenation and streaming only has to hold back incomplete UTF-8.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/utf8.h"

namespace eaglet {

class RegexSplitter;
class TokenModel;

class Tokenizer {
 public:
  // `dir` holds tokenizer.json and optionally tokenizer_config.json (BOS/EOS, add_bos_token).
  static Tokenizer from_dir(const std::string& dir);
  static Tokenizer from_json(const nlohmann::json& tokenizer_json, const std::string& where,
                             const nlohmann::json& tokenizer_config = nlohmann::json::object());
  // A tiktoken `.tiktoken` rank file with its split pattern and special tokens.
  static Tokenizer from_tiktoken(const std::string& ranks_path, const std::string& pattern,
                                 const std::vector<std::pair<std::string, int>>& specials);
  // A llama.cpp GGUF vocabulary with the SentencePiece ("llama") model: merges by token score.
  static Tokenizer from_gguf(const std::string& path);
  // The same from metadata already read (`path` names it in errors).
  static Tokenizer from_gguf_metadata(const nlohmann::json& meta, const std::string& path);
  // <unk>=0, <s>=1, </s>=2, then bytes 0x00..0xFF as ids 3..258 (the built-in model's vocabulary).
  static Tokenizer bytes();

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `add_bos`: -1 follows the tokenizer's config, 0/1 force it. Special tokens written in the
  // text are recognised when `parse_special` is set. Encoding linear in the text; it may stop
  // early once the result is longer than `max_tokens` (which is all a caller that rejects
  // longer prompts needs to know).
  std::vector<int> encode(std::string_view text, int add_bos = -1, bool parse_special = true,
                          size_t max_tokens = SIZE_MAX) const;
  std::string decode(const std::vector<int>& ids, bool skip_special = true) const;

  int vocab_size() const { return int(id_to_bytes_.size()); }
  int bos_id() const { return bos_id_; }
  const std::vector<int>& eos_ids() const { return eos_ids_; }
  bool adds_bos() const { return add_bos_; }
  bool is_special(int id) const { return id >= 0 && id < int(is_special_.size()) && is_special_[size_t(id)]; }
  const std::string& token_bytes(int id) const;
  // A lower bound on the tokens a text of `bytes` bytes encodes to (whatever the text), so a
  // prompt far too long for the context is refused before any tokenization work.
  size_t min_tokens(size_t bytes) const { return bytes / (max_token_bytes_ * max_shrink_); }
  // Id of a token given as its text (vocabulary entry or added token); -1 when absent.
  int token_id(const std::string& text) const;
  // Whether decoding removes one leading space from the start of a sequence (SentencePiece).
  bool strips_leading_space() const { return strip_leading_space_; }
  const nlohmann::json& config() const { return config_; }

 private:
  friend class HfTokenizerReader;
  Tokenizer();
  static Tokenizer build_gguf_bpe(const nlohmann::json& meta, const std::string& path);
  static Tokenizer build_gguf_spm(const nlohmann::json& meta, const std::string& path);
  // A normalizer or pre-tokenizer step (the pipeline around the model).
  struct Step {
    enum Kind { Prepend, Replace, Normalize, SplitRegex, ByteLevel, Metaspace } kind;
    std::string a, b;          // Prepend: a; Replace: a -> b; Normalize: form; Metaspace: replacement, scheme
    bool flag = false;         // ByteLevel: add_prefix_space; Metaspace: split
    std::shared_ptr<RegexSplitter> regex;
  };
  void encode_segment(std::string_view segment, bool first, size_t max_tokens, std::vector<int>* out) const;
  std::vector<std::string> pre_tokenize(std::string text, bool first) const;
  void add_added_token(const std::string& content, int id, bool special);
  void finish_load();

  std::unique_ptr<const TokenModel> model_;  // piece -> ids (one implementation per family)
  std::vector<Step> normalizers_, pre_tokenizers_;
  std::vector<std::string> id_to_bytes_;     // what each id decodes to
  bool strip_leading_space_ = false;
  AddedTokenMatcher added_;
  size_t max_token_bytes_ = 1;  // the longest token (vocabulary entry or added token)
  size_t max_shrink_ = 1;       // how many times shorter normalization can make a text
  std::vector<bool> is_special_;
  int bos_id_ = -1;
  std::vector<int> eos_ids_;
  bool add_bos_ = false;
  nlohmann::json config_;
};

// Turns a token stream into text without ever emitting half a UTF-8 character; the text
// concatenated over all calls equals Tokenizer::decode of the whole stream.
class StreamDecoder {
 public:
  // `continues_text`: the tokens continue text already decoded (a completion after its prompt),
  // so a SentencePiece-style leading space is a real space, not the start-of-text one the
  // decoder strips (decode(prompt + out) minus decode(prompt), as vLLM's detokenizer does).
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = true, bool continues_text = false)
      : tok_(tok), skip_special_(skip_special), started_(continues_text) {}
  std::string push(int id);
  std::string flush();  // whatever is held back (invalid UTF-8 at the end comes out as is)

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  bool started_ = false;
  std::string pending_;
};


}  // namespace eaglet
