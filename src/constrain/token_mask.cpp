#include "constrain/token_mask.h"

#include <array>
#include <optional>
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
// ordinary character to the same one), so the walk is table lookups, not matcher steps. The bytes
// of a multi-byte character are followed without a matcher ("partial" states: the state before
// the character and its bytes so far), and a whole character steps the matcher once per class of
// characters the grammar tells apart (Matcher::takers): a vocabulary's tens of thousands of CJK
// characters cost a handful of steps inside a string, not one each.
class TokenTrie::States {
 public:
  explicit States(const Matcher& start) { add(start); }
  // The state after byte `b` from state `s`; -1 when the grammar refuses it.
  int next(int s, uint8_t b) {
    const State& st = info_[size_t(s)];
    const bool partial = st.matcher < 0;
    if (partial && (b & 0xC0) != 0x80) return -1;
    const size_t slot = size_t(st.table) + (partial ? b - 0x80 : b);
    if (next_[slot] != kUnknown) return next_[slot];
    const int n = partial ? continue_character(s, b) : step(s, b);
    next_[slot] = n;
    return n;
  }
 private:
  static constexpr int kUnknown = -2;
  struct State {
    int matcher = -1;     // whole-character state: its matcher in matchers_; -1: partial
    int base = -1;        // partial: the state before the character
    std::string pending;  // partial: the character's bytes so far (some character of the base's
                          // grammar still starts with them: a token may end here)
    int table = 0;        // its transitions in next_ (256 bytes, or a partial's 64 continuations)
  };

  int add(Matcher m) {
    auto [it, fresh] = ids_.emplace(m.state_key(), int(info_.size()));
    if (fresh) {
      info_.push_back({int(matchers_.size()), -1, "", int(next_.size())});
      matchers_.push_back(std::move(m));
      by_takers_.emplace_back();
      next_.resize(next_.size() + 256, kUnknown);
    }
    return it->second;
  }
  // -1 when no character of the grammar starts so (the subtree is skipped at once).
  int add_partial(int base, std::string pending) {
    if (!matchers_[size_t(info_[size_t(base)].matcher)].could_complete(pending)) return -1;
    info_.push_back({-1, base, std::move(pending), int(next_.size())});
    next_.resize(next_.size() + 64, kUnknown);
    return int(info_.size()) - 1;
  }
  // A byte from a matcher's state: ASCII steps the matcher, a lead byte starts a character (a
  // matcher already inside one, where a walk may start, steps byte by byte).
  int step(int s, uint8_t b) {
    const Matcher& from = matchers_[size_t(info_[size_t(s)].matcher)];
    const int len = b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
    if (!from.mid_character()) {
      if (len == 0) return -1;
      if (len > 1) return add_partial(s, std::string(1, char(b)));
    }
    Matcher m = from;
    const char c = char(b);
    return m.accept(std::string_view(&c, 1)) ? add(std::move(m)) : -1;
  }
  // A continuation byte: the character goes on, or it is whole and steps its base state.
  int continue_character(int s, uint8_t b) {
    const State& st = info_[size_t(s)];
    const unsigned char lead = static_cast<unsigned char>(st.pending[0]);
    const size_t len = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    std::string bytes = st.pending + char(b);
    if (bytes.size() < len) return add_partial(st.base, std::move(bytes));
    uint32_t cp = lead & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(bytes[k]) & 0x3F);
    const uint32_t least = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < least || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return -1;  // not UTF-8
    const int base = st.base, mi = info_[size_t(base)].matcher;
    const std::optional<uint64_t> takers = matchers_[size_t(mi)].takers(cp);
    if (takers && *takers == 0) return -1;
    if (takers) {
      if (auto it = by_takers_[size_t(mi)].find(*takers); it != by_takers_[size_t(mi)].end()) return it->second;
    }
    Matcher m = matchers_[size_t(mi)];
    const int n = m.accept_code_point(cp) ? add(std::move(m)) : -1;
    if (takers) by_takers_[size_t(mi)][*takers] = n;
    return n;
  }

  std::vector<State> info_;
  std::vector<Matcher> matchers_;
  std::vector<std::unordered_map<uint64_t, int>> by_takers_;  // per matcher: takers bits -> next state
  std::vector<int> next_;
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
