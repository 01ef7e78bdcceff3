#include "constrain/compose.h"

#include <fmt/format.h>

#include <map>

#include "constrain/regex.h"
#include "core/error.h"

namespace eaglet::constrain {

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// The index just past the quoted literal or class that starts at s[i] (`close` ends it; a
// backslash escapes the next character).
size_t past_quoted(const std::string& s, size_t i, char close) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == close) return i + 1;
  }
  return s.size();
}

}  // namespace

std::string prefix_rules(const std::string& gbnf, const std::string& prefix) {
  std::string out;
  out.reserve(gbnf.size() + gbnf.size() / 8);
  for (size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    size_t next = i + 1;
    if (c == '"' || c == '[') next = past_quoted(gbnf, i, c == '"' ? '"' : ']');
    else if (c == '#') next = std::min(gbnf.find('\n', i), gbnf.size());
    else if (c == '{') next = gbnf.find('}', i) == std::string::npos ? gbnf.size() : gbnf.find('}', i) + 1;
    else if (name_char(c)) {
      while (next < gbnf.size() && name_char(gbnf[next])) ++next;
      out += prefix;
    }
    out.append(gbnf, i, next - i);
    i = next;
  }
  return out;
}

namespace {

// The trie of the markers with Aho-Corasick's failure links; node 0 is the empty prefix.
struct MarkerTrie {
  struct Node {
    std::map<uint32_t, int> next;
    int fail = 0;
    int marker = -1;  // the longest marker that ends here (itself, or a suffix through `fail`)
  };
  std::vector<Node> nodes{Node{}};

  void add(const std::vector<uint32_t>& cps, int marker) {
    int v = 0;
    for (uint32_t cp : cps) {
      auto it = nodes[size_t(v)].next.find(cp);
      if (it == nodes[size_t(v)].next.end()) {
        nodes.push_back(Node{});
        it = nodes[size_t(v)].next.emplace(cp, int(nodes.size() - 1)).first;
      }
      v = it->second;
    }
    if (nodes[size_t(v)].marker < 0) nodes[size_t(v)].marker = marker;  // a repeated marker: the first says
  }
  // Breadth-first: failure links, and markers inherited from the longest marker suffix.
  void link() {
    std::vector<int> queue;
    for (auto& [cp, child] : nodes[0].next) queue.push_back(child);
    for (size_t q = 0; q < queue.size(); ++q) {
      const int v = queue[q];
      Node& n = nodes[size_t(v)];
      if (n.marker < 0) n.marker = nodes[size_t(n.fail)].marker;
      for (auto& [cp, child] : n.next) {
        nodes[size_t(child)].fail = step(n.fail, cp);
        queue.push_back(child);
      }
    }
  }
  // The node after reading `cp` in node v (the longest marker prefix the text then ends with).
  int step(int v, uint32_t cp) const {
    for (;;) {
      const auto& next = nodes[size_t(v)].next;
      if (auto it = next.find(cp); it != next.end()) return it->second;
      if (v == 0) return 0;
      v = nodes[size_t(v)].fail;
    }
  }
};

}  // namespace

std::string free_text_gbnf(const std::string& name, const std::vector<TextMarker>& markers, bool may_end,
                           const std::string& where) {
  MarkerTrie trie;
  gbnf::CodeRanges alphabet;
  for (size_t m = 0; m < markers.size(); ++m) {
    const std::vector<uint32_t> cps = gbnf::decode_utf8(markers[m].text, where);
    if (cps.empty()) fail("{}: a marker is empty", where);
    for (uint32_t cp : cps) alphabet.push_back({cp, cp});
    trie.add(cps, int(m));
  }
  trie.link();
  alphabet = gbnf::normalize(alphabet);
  auto state = [&](int v) { return v == 0 ? name : fmt::format("{}-{}", name, v); };
  std::string out;
  for (size_t v = 0; v < trie.nodes.size(); ++v) {
    if (trie.nodes[v].marker >= 0) continue;  // a marker completed: not a state, the text handed over
    // Characters grouped by where they lead; those outside every marker go back to the start.
    std::map<std::string, gbnf::CodeRanges> targets;
    gbnf::CodeRanges to_start = gbnf::complement(alphabet);
    for (const auto& [lo, hi] : alphabet)
      for (uint32_t cp = lo; cp <= hi; ++cp) {
        const int u = trie.step(int(v), cp);
        const int m = trie.nodes[size_t(u)].marker;
        if (m < 0 && u == 0) to_start.push_back({cp, cp});
        else if (m < 0) targets[state(u)].push_back({cp, cp});
        else if (markers[size_t(m)].then) targets[*markers[size_t(m)].then].push_back({cp, cp});
      }
    std::vector<std::string> alts;
    if (!to_start.empty()) alts.push_back(gbnf::char_class(to_start) + " " + name);
    for (const auto& [target, cps] : targets) alts.push_back(gbnf::char_class(cps) + (target.empty() ? "" : " " + target));
    if (may_end) alts.push_back("\"\"");
    out += fmt::format("{} ::= {}\n", state(int(v)), fmt::join(alts, " | "));
  }
  return out;
}

}  // namespace eaglet::constrain
