// The tokenizer's model: how one pre-tokenized piece becomes token ids. This is the part that
// differs between tokenizer families (Hugging Face's `tokenizers` calls it the Model, beside the
// normalizers, pre-tokenizers and decoder that Tokenizer runs around it). All three are BPE over
// one merge loop (bpe.h); they differ in the starting symbols and in which merge goes first:
// - MergeRankBpe: tokenizer.json's "BPE" model (GPT-2, Llama 3, Qwen byte-level; Llama 2
//   SentencePiece-style with byte fallback): merges ranked by their order in the file.
// - TiktokenBpe: a tiktoken rank file: the merge whose result has the lowest rank goes first.
// - ScoredBpe: a SentencePiece vocabulary as llama.cpp's GGUF stores it: the merge whose result
//   scores highest goes first.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace eaglet {

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the ids of `piece` (non-empty, already normalized and pre-tokenized) to `out`.
  virtual void encode(const std::string& piece, std::vector<int>* out) const = 0;
  // The id of a vocabulary entry given as the file writes it (for byte-level vocabularies, also
  // as the bytes it stands for); -1 when there is none.
  virtual int id_of(const std::string& text) const = 0;
  // The longest vocabulary key in bytes (bounds how few tokens a text can encode to).
  virtual size_t max_key_bytes() const = 0;
};

// Vocabulary entries by key, and how a piece splits into the symbols the merges start from.
struct SymbolTable {
  std::unordered_map<std::string, int> ids;  // key -> id
  bool byte_level = false;     // symbols are single bytes (else UTF-8 characters)
  bool byte_fallback = false;  // a character not in the vocabulary becomes its <0xXX> tokens
  bool fuse_unk = false;       // consecutive unknown characters become one unk
  int unk_id = -1;
  int byte_token[256];         // byte-fallback ids (<0xXX>), -1 when absent

  SymbolTable();
  std::vector<int> split(const std::string& piece) const;
  int find(const std::string& key) const;
  size_t max_key_bytes() const;
};

class MergeRankBpe final : public TokenModel {
 public:
  SymbolTable symbols;                                        // keys: bytes (byte-level) or vocabulary strings
  std::unordered_map<uint64_t, std::pair<int, int>> merges;  // (left, right) -> (rank, merged id)
  bool ignore_merges = false;                                 // a piece that is a whole token is taken as is
  static uint64_t pair_key(int left, int right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

  void encode(const std::string& piece, std::vector<int>* out) const override;
  int id_of(const std::string& text) const override;
  size_t max_key_bytes() const override { return symbols.max_key_bytes(); }
};

class TiktokenBpe final : public TokenModel {
 public:
  SymbolTable symbols;                    // keys: the token's bytes; byte-level
  std::vector<std::string> id_to_bytes;   // the rank of a token is its id

  void encode(const std::string& piece, std::vector<int>* out) const override;
  int id_of(const std::string& text) const override { return symbols.find(text); }
  size_t max_key_bytes() const override { return symbols.max_key_bytes(); }
};

class ScoredBpe final : public TokenModel {
 public:
  SymbolTable symbols;                  // keys: vocabulary strings (with U+2581 for spaces)
  std::vector<std::string> id_to_text;  // the vocabulary strings by id
  std::vector<float> scores;            // by id; higher merges first

  void encode(const std::string& piece, std::vector<int>* out) const override;
  int id_of(const std::string& text) const override { return symbols.find(text); }
  size_t max_key_bytes() const override { return symbols.max_key_bytes(); }
};

}  // namespace eaglet
