#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/regex_split.h"
#include "tokenizer/token_model.h"
#include "tokenizer/unicode_normalize.h"
#include "tokenizer/vocab_text.h"

namespace eaglet {

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::add_added_token(const std::string& content, int id, bool special) {
  if (content.empty() || id < 0) return;
  if (id >= int(id_to_bytes_.size())) {
    id_to_bytes_.resize(size_t(id + 1));
    is_special_.resize(size_t(id + 1), false);
  }
  id_to_bytes_[size_t(id)] = content;
  is_special_[size_t(id)] = special;
  added_.add(content, id, special);
}

void Tokenizer::finish_load() {
  // How much normalization can shrink a text: a Replace to something shorter, or Unicode
  // composition (at most three code points into one, e.g. Hangul jamo).
  max_shrink_ = 1;
  for (auto& n : normalizers_) {
    if (n.kind == Step::Replace && n.b.empty()) max_shrink_ = size_t(1) << 40;  // deletes: no bound
    else if (n.kind == Step::Replace && n.b.size() < n.a.size()) max_shrink_ *= (n.a.size() + n.b.size()) / n.b.size();
    if (n.kind == Step::Normalize) max_shrink_ *= 3;
  }
  max_token_bytes_ = std::max<size_t>(1, added_.max_length());
  for (auto& b : id_to_bytes_) max_token_bytes_ = std::max(max_token_bytes_, b.size());
  max_token_bytes_ = std::max(max_token_bytes_, model_->max_key_bytes());
}

const std::string& Tokenizer::token_bytes(int id) const {
  static const std::string empty;
  return id >= 0 && id < int(id_to_bytes_.size()) ? id_to_bytes_[size_t(id)] : empty;
}

int Tokenizer::token_id(const std::string& text) const {
  if (const int id = added_.find(text); id >= 0) return id;
  return model_->id_of(text);
}

std::vector<int> Tokenizer::encode(std::string_view text, int add_bos, bool parse_special, size_t max_tokens) const {
  std::vector<int> out;
  if ((add_bos < 0 ? add_bos_ : add_bos != 0) && bos_id_ >= 0) out.push_back(bos_id_);
  size_t seg_start = 0, pos = 0;
  bool first = true;
  while (pos < text.size() && out.size() <= max_tokens) {
    // Added tokens that are not special (e.g. GPT-NeoX's runs of spaces) always match, as in
    // Hugging Face and llama.cpp; special ones only when asked to parse them.
    const AddedTokenMatcher::Match hit = added_.longest_at(text, pos, parse_special);
    if (hit.id < 0) { ++pos; continue; }
    if (pos > seg_start) encode_segment(text.substr(seg_start, pos - seg_start), first, max_tokens, &out);
    first = false;
    out.push_back(hit.id);
    pos += hit.length;
    seg_start = pos;
  }
  if (seg_start < text.size() && out.size() <= max_tokens) encode_segment(text.substr(seg_start), first, max_tokens, &out);
  return out;
}

void Tokenizer::encode_segment(std::string_view segment, bool first, size_t max_tokens, std::vector<int>* out) const {
  std::string s(segment);
  for (auto& n : normalizers_) {
    if (n.kind == Step::Prepend) s = n.a + s;
    else if (n.kind == Step::Replace) s = replace_all(s, n.a, n.b);
    else s = unicode_normalize(s, n.a);
  }
  for (auto& piece : pre_tokenize(std::move(s), first)) {
    if (out->size() > max_tokens) return;
    if (!piece.empty()) model_->encode(piece, out);
  }
}

// The pre-tokenizers in order, each splitting every piece the previous ones left. `first`: the
// segment starts the text (Metaspace's "first" scheme prepends only there).
std::vector<std::string> Tokenizer::pre_tokenize(std::string text, bool first) const {
  std::vector<std::string> pieces{std::move(text)};
  for (auto& p : pre_tokenizers_) {
    std::vector<std::string> next;
    if (p.kind == Step::ByteLevel && p.flag && !pieces.empty() && !pieces[0].empty() && pieces[0][0] != ' ')
      pieces[0] = " " + pieces[0];
    if (p.kind == Step::Metaspace) {
      for (size_t i = 0; i < pieces.size(); ++i) {
        std::string q = replace_all(pieces[i], " ", p.a);
        const bool prepend = p.b == "always" || (p.b == "first" && first && i == 0);
        if (prepend && q.compare(0, p.a.size(), p.a) != 0) q = p.a + q;
        if (!p.flag) { next.push_back(q); continue; }
        size_t start = 0;  // split before each replacement char, keeping it as a prefix
        for (size_t at = q.find(p.a, 1); at != std::string::npos; at = q.find(p.a, at + 1)) {
          next.push_back(q.substr(start, at - start));
          start = at;
        }
        next.push_back(q.substr(start));
      }
    } else if (p.regex) {
      for (auto& piece : pieces)
        for (auto v : p.regex->split(piece)) next.emplace_back(v);
    } else {
      next = pieces;
    }
    pieces.swap(next);
  }
  return pieces;
}

std::string Tokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  StreamDecoder d(*this, skip_special);
  std::string out;
  for (int id : ids) out += d.push(id);
  return out + d.flush();
}

std::string StreamDecoder::push(int id) {
  if (skip_special_ && tok_.is_special(id)) return "";
  pending_ += tok_.token_bytes(id);
  if (!started_ && !pending_.empty()) {
    started_ = true;
    if (tok_.strips_leading_space() && pending_[0] == ' ') pending_.erase(0, 1);
  }
  const size_t n = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace eaglet
