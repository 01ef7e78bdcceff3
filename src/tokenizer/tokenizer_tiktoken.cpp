// tiktoken rank files: one "base64(token bytes) rank" line per token, the rank being its id.
#include <fstream>

#include "core/error.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/token_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_text.h"

namespace eaglet {

namespace {
// Standard base64; decoding stops at the first character outside the alphabet ('=' padding).
std::string decode_base64(const std::string& s) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : s) {
    const size_t p = alphabet.find(c);
    if (p == std::string::npos) break;
    val = (val << 6) + int(p);
    bits += 6;
    if (bits >= 0) {
      out.push_back(char((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}
}  // namespace

Tokenizer Tokenizer::from_tiktoken(const std::string& ranks_path, const std::string& pattern,
                                   const std::vector<std::pair<std::string, int>>& specials) {
  auto model = std::make_unique<TiktokenBpe>();
  model->symbols.byte_level = true;
  std::ifstream in(ranks_path);
  if (!in) fail("{}: cannot open", ranks_path);
  std::string line;
  int64_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    char* end = nullptr;
    const long long r = std::strtoll(line.c_str() + sp + 1, &end, 10);
    if (end == line.c_str() + sp + 1 || r < 0 || r >= lines + kMaxIdGap)
      fail("{}:{}: rank '{}' is not a token id in [0, {})", ranks_path, lines, line.substr(sp + 1), lines + kMaxIdGap);
    const size_t rank = size_t(r);
    if (rank >= model->id_to_bytes.size()) model->id_to_bytes.resize(rank + 1);
    model->id_to_bytes[rank] = decode_base64(line.substr(0, sp));
    model->symbols.ids[model->id_to_bytes[rank]] = int(rank);
  }
  Tokenizer t;
  t.id_to_bytes_ = model->id_to_bytes;
  t.is_special_.assign(t.id_to_bytes_.size(), false);
  t.model_ = std::move(model);
  t.pre_tokenizers_.push_back({Step::SplitRegex, "", "", false, std::make_shared<RegexSplitter>(pattern)});
  for (auto& [s, id] : specials) t.add_added_token(s, id, true);
  t.finish_load();
  return t;
}

}  // namespace eaglet
