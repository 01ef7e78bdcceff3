// Which tokens of a vocabulary a grammar allows next. The tokens' texts form a byte trie, stored
// flat in depth-first order (a walk reads memory front to back); the matcher walks it from its
// current state, and a subtree is skipped as soon as its prefix is refused, so tokens that share a
// refused prefix cost one check (llama.cpp rejects candidates the same way, one code point at a
// time); the matcher states met on the way are numbered and their byte transitions tabulated, so
// a byte costs a lookup once seen.
// End-of-sequence tokens are allowed exactly where the text so far is a whole sentence of the
// grammar. Masks are cached by grammar and matcher state (xgrammar's adaptive cache, in its
// simplest form) and handed out shared, not copied: inside a JSON string every character leaves
// the same state, so the costly walk over a vocabulary that allows nearly everything runs once
// per state, not once per token.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>
#include <vector>

#include "constrain/grammar.h"

namespace eaglet {
class Tokenizer;
}

namespace eaglet::constrain {

class TokenTrie {
 public:
  // Every token with text (special tokens other than end-of-sequence never match a grammar).
  explicit TokenTrie(const Tokenizer& tok);
  int vocab() const { return int(bytes_.size()); }
  const std::string& bytes(int id) const { return bytes_[size_t(id)]; }
  bool is_eos(int id) const { return eos_[size_t(id)] != 0; }
  // [vocab()]: 1 for each token `m` allows next (the cached mask itself: read-only, shared).
  using Mask = std::shared_ptr<const std::vector<uint8_t>>;
  Mask allowed(const Matcher& m) const;
  // Sets the logits [n] of every token `m` does not allow to -infinity (ids from vocab() on,
  // a model's padding rows, included).
  void mask(const Matcher& m, float* logits, int n) const;

 private:
  class States;
  void walk(States& states, std::vector<uint8_t>* allowed) const;
  // Node i (depth-first order; 0 is the root, the empty text): the byte that leads to it, its
  // depth, one past the last node of its subtree, and its tokens tokens_[token_begin_[i] ..
  // token_begin_[i + 1]).
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<int> end_, token_begin_, tokens_;
  // (grammar id, state key) -> mask; least recently used dropped beyond kCacheBytes.
  static constexpr size_t kCacheBytes = size_t(64) << 20;
  mutable std::mutex mu_;
  mutable std::list<std::pair<std::string, Mask>> lru_;
  mutable std::unordered_map<std::string, decltype(lru_)::iterator> cache_;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> eos_;
};

}  // namespace eaglet::constrain
