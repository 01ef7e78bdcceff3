#include "tokenizer/token_model.h"

#include <algorithm>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace eaglet {

SymbolTable::SymbolTable() { std::fill(std::begin(byte_token), std::end(byte_token), -1); }

int SymbolTable::find(const std::string& key) const {
  const auto it = ids.find(key);
  return it == ids.end() ? -1 : it->second;
}

size_t SymbolTable::max_key_bytes() const {
  size_t n = 1;
  for (auto& [key, id] : ids) n = std::max(n, key.size());
  return n;
}

// Each byte (byte-level) or UTF-8 character that is a vocabulary entry is its id; one that is
// not becomes its byte-fallback tokens, else unk (runs of unknowns fused into one when asked),
// else nothing.
std::vector<int> SymbolTable::split(const std::string& piece) const {
  std::vector<int> out;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = byte_level ? 1 : std::min(utf8_len(static_cast<unsigned char>(piece[i])), piece.size() - i);
    if (const int id = find(piece.substr(i, n)); id >= 0) {
      out.push_back(id);
    } else if (byte_fallback) {
      for (size_t j = i; j < i + n; ++j) {
        const int b = byte_token[static_cast<unsigned char>(piece[j])];
        if (b >= 0) out.push_back(b);
        else if (unk_id >= 0) out.push_back(unk_id);
      }
    } else if (unk_id >= 0 && !(fuse_unk && !out.empty() && out.back() == unk_id)) {
      out.push_back(unk_id);
    }
    i += n;
  }
  return out;
}

namespace {
void append(const std::vector<int>& ids, std::vector<int>* out) { out->insert(out->end(), ids.begin(), ids.end()); }
}  // namespace

void MergeRankBpe::encode(const std::string& piece, std::vector<int>* out) const {
  if (ignore_merges)
    if (const int id = symbols.find(piece); id >= 0) return out->push_back(id);
  append(bpe_merge(symbols.split(piece), [this](int a, int b) {
           const auto it = merges.find(pair_key(a, b));
           return it == merges.end() ? MergeResult{} : MergeResult{true, double(it->second.first), it->second.second};
         }),
         out);
}

// A byte-level vocabulary is keyed by bytes, but callers name tokens as the file writes them
// (e.g. "Ġthe"); either is accepted.
int MergeRankBpe::id_of(const std::string& text) const {
  if (symbols.byte_level) {
    std::string bytes;
    if (byte_level_decode(text, &bytes))
      if (const int id = symbols.find(bytes); id >= 0) return id;
  }
  return symbols.find(text);
}

// As tiktoken does: a piece that is a token is taken whole before any merging.
void TiktokenBpe::encode(const std::string& piece, std::vector<int>* out) const {
  if (const int id = symbols.find(piece); id >= 0) return out->push_back(id);
  append(bpe_merge(symbols.split(piece), [this](int a, int b) {
           const int merged = symbols.find(id_to_bytes[size_t(a)] + id_to_bytes[size_t(b)]);
           return merged < 0 ? MergeResult{} : MergeResult{true, double(merged), merged};
         }),
         out);
}

void ScoredBpe::encode(const std::string& piece, std::vector<int>* out) const {
  append(bpe_merge(symbols.split(piece), [this](int a, int b) {
           const int merged = symbols.find(id_to_text[size_t(a)] + id_to_text[size_t(b)]);
           return merged < 0 ? MergeResult{} : MergeResult{true, -double(scores[size_t(merged)]), merged};
         }),
         out);
}

}  // namespace eaglet
