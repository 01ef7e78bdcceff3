#include "constrain/token_mask.h"

#include <array>
#include <limits>

#include "tokenizer/tokenizer.h"

namespace eaglet::constrain {

namespace {
// The trie while it is built: children by byte, tokens per node.
struct BuildNode {
  std::vector<std::pair<uint8_t, int>> next;
  std::vector<int> tokens;
};
}  // namespace

TokenTrie::TokenTrie(const Tokenizer& tok) {
  const int V = tok.vocab_size();
  bytes_.resize(size_t(V));
  eos_.assign(size_t(V), 0);
  for (int id : tok.eos_ids())
    if (id >= 0 && id < V) eos_[size_t(id)] = 1;
  std::vector<BuildNode> nodes(1);
  for (int id = 0; id < V; ++id) {
    if (eos_[size_t(id)] || tok.is_special(id)) continue;
    bytes_[size_t(id)] = tok.token_bytes(id);
    if (bytes_[size_t(id)].empty() || bytes_[size_t(id)].size() > 0xFFFF) continue;
    int n = 0;
    for (char ch : bytes_[size_t(id)]) {
      const uint8_t b = static_cast<uint8_t>(ch);
      int child = -1;
      for (const auto& [c, k] : nodes[size_t(n)].next)
        if (c == b) child = k;
      if (child < 0) {
        child = int(nodes.size());
        nodes[size_t(n)].next.push_back({b, child});
        nodes.emplace_back();
      }
      n = child;
    }
    nodes[size_t(n)].tokens.push_back(id);
  }
  // Flatten in depth-first order (iteratively: token texts can be long).
  struct Frame {
    int node;
    size_t child;
  };
  std::vector<Frame> stack{{0, 0}};
  auto enter = [&](int n, uint8_t b) {
    byte_.push_back(b);
    depth_.push_back(uint16_t(stack.size() - 1));
    end_.push_back(0);
    token_begin_.push_back(int(tokens_.size()));
    tokens_.insert(tokens_.end(), nodes[size_t(n)].tokens.begin(), nodes[size_t(n)].tokens.end());
  };
  std::vector<int> order{0};  // flat index of each frame on the stack
  enter(0, 0);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.child == nodes[size_t(f.node)].next.size()) {
      end_[size_t(order.back())] = int(byte_.size());
      stack.pop_back();
      order.pop_back();
      continue;
    }
    const auto [b, child] = nodes[size_t(f.node)].next[f.child++];
    stack.push_back({child, 0});
    order.push_back(int(byte_.size()));
    enter(child, b);
  }
  token_begin_.push_back(int(tokens_.size()));
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

void TokenTrie::walk(States& states, std::vector<uint8_t>* allowed) const {
  std::vector<int> state(1, 0);  // the matcher state at each depth of the current path
  for (size_t i = 1; i < byte_.size();) {
    const size_t d = depth_[i];
    const int next = states.next(state[d - 1], byte_[i]);
    if (next < 0) {  // refused: so is every token below
      i = size_t(end_[i]);
      continue;
    }
    for (int k = token_begin_[i]; k < token_begin_[i + 1]; ++k) (*allowed)[size_t(tokens_[size_t(k)])] = 1;
    if (state.size() <= d) state.resize(d + 1);
    state[d] = next;
    ++i;
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
  walk(states, mask.get());
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
