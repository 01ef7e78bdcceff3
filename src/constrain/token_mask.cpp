#include "constrain/token_mask.h"

#include <array>
#include <limits>

#include "tokenizer/tokenizer.h"

namespace eaglet::constrain {

TokenTrie::TokenTrie(const Tokenizer& tok) : nodes_(1) {
  const int V = tok.vocab_size();
  bytes_.resize(size_t(V));
  eos_.assign(size_t(V), 0);
  for (int id : tok.eos_ids())
    if (id >= 0 && id < V) eos_[size_t(id)] = 1;
  for (int id = 0; id < V; ++id) {
    if (eos_[size_t(id)] || tok.is_special(id)) continue;
    bytes_[size_t(id)] = tok.token_bytes(id);
    if (bytes_[size_t(id)].empty()) continue;
    int n = 0;
    for (char ch : bytes_[size_t(id)]) {
      const uint8_t b = static_cast<uint8_t>(ch);
      int child = -1;
      for (const auto& [c, k] : nodes_[size_t(n)].next)
        if (c == b) child = k;
      if (child < 0) {
        child = int(nodes_.size());
        nodes_[size_t(n)].next.push_back({b, child});
        nodes_.emplace_back();
      }
      n = child;
    }
    nodes_[size_t(n)].tokens.push_back(id);
  }
}

// The matcher states one walk meets, numbered, with their byte transitions computed on first use:
// most bytes of most tokens lead back to a handful of states (inside a JSON string, every
// ordinary character to the same one), so the walk is table lookups, not matcher steps.
class TokenTrie::States {
 public:
  explicit States(const Matcher& start) { add(start); }
  // The state after byte `b` from state `s`; -1 when the grammar refuses it.
  int next(int s, uint8_t b) {
    int n = next_[size_t(s)][b];
    if (n != kUnknown) return n;
    Matcher m = states_[size_t(s)];
    const char c = char(b);
    n = m.accept(std::string_view(&c, 1)) ? add(std::move(m)) : -1;
    next_[size_t(s)][b] = n;
    return n;
  }

 private:
  static constexpr int kUnknown = -2;
  int add(Matcher m) {
    auto [it, fresh] = ids_.emplace(m.state_key(), int(states_.size()));
    if (fresh) {
      states_.push_back(std::move(m));
      next_.emplace_back();
      next_.back().fill(kUnknown);
    }
    return it->second;
  }
  std::vector<Matcher> states_;
  std::vector<std::array<int, 256>> next_;
  std::unordered_map<std::string, int> ids_;
};

void TokenTrie::visit(int node, int state, States& states, std::vector<uint8_t>* allowed) const {
  for (const auto& [b, child] : nodes_[size_t(node)].next) {
    const int next = states.next(state, b);
    if (next < 0) continue;
    for (int id : nodes_[size_t(child)].tokens) (*allowed)[size_t(id)] = 1;
    visit(child, next, states, allowed);
  }
}

TokenTrie::Mask TokenTrie::allowed(const Matcher& m) const {
  const uint64_t gid = m.grammar().id();
  std::string key(reinterpret_cast<const char*>(&gid), sizeof gid);
  key += m.state_key();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  auto mask = std::make_shared<std::vector<uint8_t>>(bytes_.size(), 0);
  States states(m);
  visit(0, 0, states, mask.get());
  if (m.complete())
    for (size_t id = 0; id < eos_.size(); ++id)
      if (eos_[id]) (*mask)[id] = 1;
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second->second;  // another thread was first
  lru_.emplace_front(key, mask);
  cache_[key] = lru_.begin();
  while (lru_.size() * (bytes_.size() + 64) > kCacheBytes && lru_.size() > 1) {
    cache_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return mask;
}

void TokenTrie::mask(const Matcher& m, float* logits, int n) const {
  const Mask ok = allowed(m);
  for (size_t id = 0; id < size_t(n); ++id)
    if (id >= ok->size() || !(*ok)[id]) logits[id] = -std::numeric_limits<float>::infinity();
}

}  // namespace eaglet::constrain
