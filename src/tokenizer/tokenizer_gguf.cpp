// llama.cpp GGUF vocabularies: "llama" (SentencePiece, merges by token score) read here, "gpt2"
// (byte-level BPE) through its tokenizer.json equivalent (gguf_bpe.h).
#include "core/error.h"
#include "io/gguf.h"
#include "io/json_config.h"
#include "tokenizer/gguf_bpe.h"
#include "tokenizer/token_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_text.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
// A special-token id from GGUF metadata: absent is -1; present, it must name a token.
int gguf_special_id(const json& meta, const char* key, size_t n_tokens, const std::string& path) {
  if (!meta.contains(key)) return -1;
  int64_t id;
  if (!json_int64(meta[key], &id) || id < 0 || uint64_t(id) >= n_tokens)
    fail("{}: {} = {} is not a token id in [0, {})", path, key, json_brief(meta[key]), n_tokens);
  return int(id);
}
}  // namespace

Tokenizer Tokenizer::from_gguf(const std::string& path) { return from_gguf_metadata(read_gguf_metadata(path), path); }

Tokenizer Tokenizer::from_gguf_metadata(const json& meta, const std::string& path) {
  try {
    const std::string model = meta.value("tokenizer.ggml.model", "");
    if (model == "gpt2") return build_gguf_bpe(meta, path);
    if (model != "llama")
      fail("{}: GGUF tokenizer model '{}' is not supported ('llama' SentencePiece, 'gpt2' byte-level BPE)", path, model);
    return build_gguf_spm(meta, path);
  } catch (const json::exception& e) {  // a value of the wrong type somewhere in the metadata
    fail("{}: malformed tokenizer metadata: {}", path, e.what());
  }
}

namespace {
size_t gguf_token_count(const json& meta) {
  const char* key = "tokenizer.ggml.tokens";
  return meta.contains(key) && meta[key].is_array() ? meta[key].size() : 0;
}
}  // namespace

// GGUF keeps BOS/EOS and add_bos beside the vocabulary, not in a tokenizer_config.json.
Tokenizer Tokenizer::build_gguf_bpe(const json& meta, const std::string& path) {
  const size_t n_tokens = gguf_token_count(meta);
  Tokenizer t = from_json(gguf_bpe_tokenizer_json(meta, path), path, json::object());
  t.bos_id_ = gguf_special_id(meta, "tokenizer.ggml.bos_token_id", n_tokens, path);
  t.eos_ids_.clear();
  if (const int eos = gguf_special_id(meta, "tokenizer.ggml.eos_token_id", n_tokens, path); eos >= 0) t.eos_ids_.push_back(eos);
  t.add_bos_ = meta.value("tokenizer.ggml.add_bos_token", false);
  return t;
}

// Token types: 1 normal, 2 unknown, 3 control, 6 byte (<0xXX>). Spaces are U+2581 in the
// vocabulary; the normalizers put them there and decoding strips the leading one.
Tokenizer Tokenizer::build_gguf_spm(const json& meta, const std::string& path) {
  if (!meta.contains("tokenizer.ggml.tokens") || !meta.contains("tokenizer.ggml.scores"))
    fail("{}: missing tokenizer.ggml.tokens or tokenizer.ggml.scores", path);
  const auto& tokens = meta["tokenizer.ggml.tokens"];
  const auto& scores = meta["tokenizer.ggml.scores"];
  const json types = meta.value("tokenizer.ggml.token_type", json::array());
  EAGLET_CHECK(tokens.is_array() && scores.is_array() && types.is_array(),
               "{}: tokenizer.ggml.tokens, .scores and .token_type must be arrays", path);
  EAGLET_CHECK(!tokens.empty(), "{}: tokenizer.ggml.tokens is empty", path);
  EAGLET_CHECK(tokens.size() == scores.size(), "{}: {} tokens but {} scores", path, tokens.size(), scores.size());
  auto spm = std::make_unique<ScoredBpe>();
  spm->symbols.byte_fallback = true;
  spm->id_to_text.resize(tokens.size());
  Tokenizer t;
  t.strip_leading_space_ = true;
  t.normalizers_.push_back({Step::Prepend, kSpmSpace, "", false, nullptr});
  t.normalizers_.push_back({Step::Replace, " ", kSpmSpace, false, nullptr});
  t.id_to_bytes_.resize(tokens.size());
  t.is_special_.assign(tokens.size(), false);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string text = tokens[i].get<std::string>();
    const int type = i < types.size() ? types[i].get<int>() : 1;
    spm->scores.push_back(scores[i].get<float>());
    spm->id_to_text[i] = text;
    const int b = parse_byte_token(text);
    if (type == 6 && b >= 0) {
      spm->symbols.byte_token[b] = int(i);
      t.id_to_bytes_[i] = std::string(1, char(b));
    } else if (type == 3 || type == 2) {
      t.id_to_bytes_[i] = text;
      t.add_added_token(text, int(i), true);
    } else {
      t.id_to_bytes_[i] = replace_all(text, kSpmSpace, " ");
      spm->symbols.ids[text] = int(i);
    }
  }
  spm->symbols.unk_id = gguf_special_id(meta, "tokenizer.ggml.unknown_token_id", tokens.size(), path);
  t.model_ = std::move(spm);
  t.bos_id_ = gguf_special_id(meta, "tokenizer.ggml.bos_token_id", tokens.size(), path);
  if (const int eos = gguf_special_id(meta, "tokenizer.ggml.eos_token_id", tokens.size(), path); eos >= 0) t.eos_ids_.push_back(eos);
  t.add_bos_ = meta.value("tokenizer.ggml.add_bos_token", true);
  t.finish_load();
  return t;
}

}  // namespace eaglet
