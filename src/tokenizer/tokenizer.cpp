#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "io/json_config.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gguf_bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/unicode_normalize.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581 '▁'

uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// Builds a new string: replacing in place shifts the tail on every hit, which made a prompt of
// a few megabytes of spaces take minutes (quadratic).
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t start = 0;
  for (size_t pos = s.find(from); pos != std::string_view::npos; pos = s.find(from, start)) {
    out.append(s, start, pos - start).append(to);
    start = pos + from.size();
  }
  return out.append(s, start);
}

// Token ids may leave this many unused ids in total (some tokenizers skip a few); anything
// sparser is a broken or hostile file.
constexpr int64_t kMaxIdGap = 1 << 16;

size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;  // stray continuation byte: a character of its own
}

int parse_byte_token(const std::string& s) {  // "<0xAB>" -> 0xAB
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  return int(std::strtol(s.substr(3, 2).c_str(), nullptr, 16));
}

std::string special_token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// Flattens a "Sequence" node (normalizers / pretokenizers / decoders) into its steps.
std::vector<json> flatten(const json& node, const char* list_key) {
  std::vector<json> out;
  if (node.is_null()) return out;
  if (node.value("type", "") == "Sequence" && node.contains(list_key)) {
    for (auto& c : node[list_key]) {
      auto sub = flatten(c, list_key);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  } else {
    out.push_back(node);
  }
  return out;
}
}  // namespace

Tokenizer::Tokenizer() { std::fill(std::begin(byte_token_), std::end(byte_token_), -1); }
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_dir(const std::string& dir) {
  std::string path = dir + "/tokenizer.json";
  if (!file_exists(path)) fail("{}: tokenizer.json not found", dir);
  json tj, cfg = json::object();
  try {
    tj = json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail("{}: bad JSON: {}", path, e.what());
  }
  const std::string cfg_path = dir + "/tokenizer_config.json";
  if (file_exists(cfg_path)) {
    try {
      cfg = json::parse(read_text_file(cfg_path));
    } catch (const json::exception& e) {
      fail("{}: bad JSON: {}", cfg_path, e.what());
    }
  }
  // Newer checkpoints (MiniMax-M2/M3 among them) ship the template as its own file.
  const std::string template_path = dir + "/chat_template.jinja";
  if (!cfg.contains("chat_template") && file_exists(template_path)) cfg["chat_template"] = read_text_file(template_path);
  return from_json(tj, path, cfg);
}

Tokenizer Tokenizer::from_json(const json& tj, const std::string& where, const json& cfg) {
  try {
    return build(tj, where, cfg);
  } catch (const json::exception& e) {  // a field of the wrong type the checks below do not name
    fail("{}: malformed tokenizer: {}", where, e.what());
  }
}

Tokenizer Tokenizer::build(const json& tj, const std::string& where, const json& cfg) {
  Tokenizer t;
  t.config_ = cfg;
  if (!tj.is_object() || !tj.contains("model") || !tj["model"].is_object()) fail("{}: missing field 'model'", where);
  if (!cfg.is_object()) fail("{}: tokenizer_config.json must be a JSON object", where);
  const json& model = tj["model"];
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") fail("{}: tokenizer model type '{}' is not supported (only BPE)", where, type);
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail("{}: missing field 'model.vocab'", where);
  const auto pre = flatten(tj.value("pre_tokenizer", json()), "pretokenizers");
  const bool spm_space = t.read_modes(model, pre, flatten(tj.value("decoder", json()), "decoders"));
  const std::vector<AddedToken> added = t.read_vocab(tj, where, spm_space);
  t.read_merges(model, where);
  t.read_normalizers(flatten(tj.value("normalizer", json()), "normalizers"), where);
  t.read_pre_tokenizers(pre, where);
  for (auto& a : added) t.add_added_token(a.content, a.id, a.special);
  t.read_bos_eos(tj, cfg);
  t.finish_load();
  return t;
}

// How vocabulary strings map to bytes: byte-level if any pre-tokenizer or decoder says so; else
// SentencePiece-style, where the decoders say whether U+2581 stands for a space (returned) and
// whether a leading space is stripped.
bool Tokenizer::read_modes(const json& model, const std::vector<json>& pre, const std::vector<json>& decoders) {
  for (auto& p : pre) byte_level_ |= p.value("type", "") == "ByteLevel";
  for (auto& d : decoders) byte_level_ |= d.value("type", "") == "ByteLevel";
  bool spm_space = false;
  for (auto& d : decoders) {
    const std::string dt = d.value("type", "");
    if (dt == "Replace" && d.contains("pattern") && d["pattern"].value("String", "") == kSpmSpace) spm_space = true;
    if (dt == "Metaspace") spm_space = true;
    if (dt == "Strip" && d.value("start", 0) > 0 && d.value("content", "") == " ") strip_leading_space_ = true;
    if (dt == "Metaspace" && d.value("prepend_scheme", "always") != "never") strip_leading_space_ = true;
  }
  byte_fallback_ = model.value("byte_fallback", false);
  ignore_merges_ = model.value("ignore_merges", false);
  fuse_unk_ = model.value("fuse_unk", false);
  return spm_space;
}

// The vocabulary's id tables; returns the added tokens, which are registered once the
// pre-tokenizers exist. Token ids index tables sized by the largest id, so they are checked
// before anything is allocated: a negative id would write before the table, a huge one allocate
// gigabytes.
std::vector<Tokenizer::AddedToken> Tokenizer::read_vocab(const json& tj, const std::string& where, bool spm_space) {
  const json& vocab = tj["model"]["vocab"];
  const json no_added = json::array();
  const json& added = tj.contains("added_tokens") && !tj["added_tokens"].is_null() ? tj["added_tokens"] : no_added;
  if (!added.is_array()) fail("{}: 'added_tokens' must be a list", where);
  if (vocab.empty() && added.empty()) fail("{}: the vocabulary is empty (model.vocab and added_tokens)", where);
  const int64_t id_limit = int64_t(vocab.size() + added.size()) + kMaxIdGap;
  // `what` names the entry (a callable, so the name is only built for an error).
  auto checked_id = [&](const json& v, const auto& what) {
    int64_t id;
    if (!json_int64(v, &id)) fail("{}: {} must be an integer token id (got {})", where, what(), json_brief(v));
    if (id < 0 || id >= id_limit)
      fail("{}: {} has id {}, outside [0, {}): ids must number the {} tokens without large gaps", where, what(), id,
           id_limit, vocab.size() + added.size());
    return int(id);
  };
  std::vector<std::pair<const std::string*, int>> vocab_ids;
  int max_id = -1;
  for (auto& [k, v] : vocab.items()) {
    const std::string& key = k;  // (clang 14 cannot capture a structured binding)
    vocab_ids.emplace_back(&key, checked_id(v, [&] { return "model.vocab['" + key + "']"; }));
    max_id = std::max(max_id, vocab_ids.back().second);
  }
  std::vector<AddedToken> added_tokens;
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    auto what = [i] { return fmt::format("added_tokens[{}]", i); };
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string())
      fail("{}: {} needs a string 'content'", where, what());
    if (!a.contains("id")) fail("{}: {} needs an 'id'", where, what());
    const json special = a.value("special", json(false));
    if (!special.is_boolean()) fail("{}: {}.special must be true or false", where, what());
    added_tokens.push_back({a["content"].get<std::string>(), checked_id(a["id"], what), special.get<bool>()});
    max_id = std::max(max_id, added_tokens.back().id);
  }
  id_to_bytes_.assign(size_t(max_id + 1), "");
  is_special_.assign(size_t(max_id + 1), false);
  for (auto& [key, id] : vocab_ids) add_vocab_entry(*key, id, spm_space);
  const json& model = tj["model"];
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab.find(model["unk_token"].get<std::string>());
    if (it != vocab.end()) unk_id_ = it->get<int>();  // checked above
  }
  return added_tokens;
}

// One vocabulary string: the bytes it encodes and the text it decodes to.
void Tokenizer::add_vocab_entry(const std::string& k, int id, bool spm_space) {
  if (byte_level_) {
    std::string bytes;
    if (!byte_level_decode(k, &bytes)) bytes = k;
    bytes_to_id_[bytes] = id;
    id_to_bytes_[size_t(id)] = bytes;
    return;
  }
  const int b = parse_byte_token(k);
  if (b >= 0) byte_token_[b] = id;
  bytes_to_id_[k] = id;
  std::string shown = k;
  if (b >= 0 && byte_fallback_) shown = std::string(1, char(b));
  else if (spm_space) shown = replace_all(shown, kSpmSpace, " ");
  id_to_bytes_[size_t(id)] = shown;
}

// Merges as "left right" strings or pairs, ranked in order; one whose parts or result are not in
// the vocabulary keeps its rank and is never applied.
void Tokenizer::read_merges(const json& model, const std::string& where) {
  if (!model.contains("merges") || model["merges"].is_null()) return;
  if (!model["merges"].is_array()) fail("{}: model.merges must be a list", where);
  const json& vocab = model["vocab"];
  int rank = 0;
  for (auto& m : model["merges"]) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) fail("{}: malformed merge '{}' in model.merges", where, s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      fail("{}: malformed entry {} in model.merges (a \"left right\" string or a pair of strings)", where, rank);
    }
    auto ia = vocab.find(a), ib = vocab.find(b), im = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || im == vocab.end()) {
      ++rank;
      continue;
    }
    merges_.emplace(pair_key(ia->get<int>(), ib->get<int>()), std::make_pair(rank++, im->get<int>()));
  }
}

void Tokenizer::read_normalizers(const std::vector<json>& normalizers, const std::string& where) {
  for (auto& n : normalizers) {
    const std::string nt = n.value("type", "");
    if (nt == "Prepend") normalizers_.push_back({Step::Prepend, n.value("prepend", ""), "", false, nullptr});
    else if (nt == "Replace") {
      if (!n.contains("pattern") || !n["pattern"].contains("String"))
        fail("{}: Replace normalizer with a regex pattern is not supported", where);
      normalizers_.push_back({Step::Replace, n["pattern"]["String"].get<std::string>(), n.value("content", ""), false, nullptr});
    } else if (nt == "NFC" || nt == "NFD" || nt == "NFKC" || nt == "NFKD") {
      normalizers_.push_back({Step::Normalize, nt, "", false, nullptr});
    } else {
      fail("{}: normalizer '{}' is not supported", where, nt);
    }
  }
}

void Tokenizer::read_pre_tokenizers(const std::vector<json>& pre, const std::string& where) {
  for (auto& p : pre) {
    const std::string pt = p.value("type", "");
    if (pt == "ByteLevel") {
      Step s{Step::ByteLevel, "", "", p.value("add_prefix_space", false), nullptr};
      if (p.value("use_regex", true)) s.regex = std::make_shared<RegexSplitter>(kGpt2SplitPattern);
      pre_tokenizers_.push_back(s);
    } else if (pt == "Split") {
      if (!p.contains("pattern") || !p["pattern"].contains("Regex"))
        fail("{}: Split pre-tokenizer needs a Regex pattern", where);
      if (p.value("behavior", "Isolated") != "Isolated" || p.value("invert", false))
        fail("{}: Split pre-tokenizer behaviour '{}' is not supported", where, p.value("behavior", ""));
      pre_tokenizers_.push_back({Step::SplitRegex, "", "", false,
                                 std::make_shared<RegexSplitter>(p["pattern"]["Regex"].get<std::string>())});
    } else if (pt == "Metaspace") {
      pre_tokenizers_.push_back({Step::Metaspace, p.value("replacement", kSpmSpace), p.value("prepend_scheme", "always"),
                                 p.value("split", true), nullptr});
    } else {
      fail("{}: pre-tokenizer '{}' is not supported", where, pt);
    }
  }
}

// BOS/EOS: tokenizer_config.json first, then the post-processor template (whose leading special
// token, if any, is the BOS it adds).
void Tokenizer::read_bos_eos(const json& tj, const json& cfg) {
  if (cfg.contains("bos_token")) bos_id_ = token_id(special_token_text(cfg["bos_token"]));
  if (cfg.contains("eos_token")) {
    const int e = token_id(special_token_text(cfg["eos_token"]));
    if (e >= 0) eos_ids_.push_back(e);
  }
  bool template_bos = false;
  for (auto& pp : flatten(tj.value("post_processor", json()), "processors")) {
    if (pp.value("type", "") != "TemplateProcessing" || !pp.contains("single")) continue;
    for (auto& item : pp["single"]) {
      if (item.contains("SpecialToken")) {
        const int id = token_id(item["SpecialToken"].value("id", ""));
        if (id >= 0) {
          if (bos_id_ < 0) bos_id_ = id;
          template_bos = id == bos_id_;
        }
      }
      break;  // only a leading special token counts as BOS
    }
  }
  add_bos_ = cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean() ? cfg["add_bos_token"].get<bool>()
                                                                                 : template_bos;
}

Tokenizer Tokenizer::from_tiktoken(const std::string& ranks_path, const std::string& pattern,
                                   const std::vector<std::pair<std::string, int>>& specials) {
  static const std::string b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto decode64 = [&](const std::string& s) {
    std::string out;
    int val = 0, bits = -8;
    for (char c : s) {
      const size_t p = b64.find(c);
      if (p == std::string::npos) break;
      val = (val << 6) + int(p);
      bits += 6;
      if (bits >= 0) {
        out.push_back(char((val >> bits) & 0xFF));
        bits -= 8;
      }
    }
    return out;
  };
  Tokenizer t;
  t.byte_level_ = true;
  t.rank_by_merged_bytes_ = true;
  std::ifstream in(ranks_path);
  if (!in) fail("{}: cannot open", ranks_path);
  std::string tok, line;
  int64_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    tok = decode64(line.substr(0, sp));
    char* end = nullptr;
    const long long r = std::strtoll(line.c_str() + sp + 1, &end, 10);
    if (end == line.c_str() + sp + 1 || r < 0 || r >= lines + kMaxIdGap)
      fail("{}:{}: rank '{}' is not a token id in [0, {})", ranks_path, lines, line.substr(sp + 1), lines + kMaxIdGap);
    const int rank = int(r);
    if (rank >= int(t.id_to_bytes_.size())) t.id_to_bytes_.resize(size_t(rank + 1));
    t.id_to_bytes_[size_t(rank)] = tok;
    t.bytes_to_id_[tok] = rank;
  }
  t.is_special_.assign(t.id_to_bytes_.size(), false);
  t.pre_tokenizers_.push_back({Step::SplitRegex, "", "", false, std::make_shared<RegexSplitter>(pattern)});
  for (auto& [s, id] : specials) t.add_added_token(s, id, true);
  t.finish_load();
  return t;
}

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
    return build_gguf(meta, path);
  } catch (const json::exception& e) {  // a value of the wrong type somewhere in the metadata
    fail("{}: malformed tokenizer metadata: {}", path, e.what());
  }
}

Tokenizer Tokenizer::build_gguf(const json& meta, const std::string& path) {
  const std::string model = meta.value("tokenizer.ggml.model", "");
  const size_t n_tokens = meta.contains("tokenizer.ggml.tokens") && meta["tokenizer.ggml.tokens"].is_array()
                              ? meta["tokenizer.ggml.tokens"].size() : 0;
  if (model == "gpt2") {
    Tokenizer t = from_json(gguf_bpe_tokenizer_json(meta, path), path, json::object());
    t.bos_id_ = gguf_special_id(meta, "tokenizer.ggml.bos_token_id", n_tokens, path);
    t.eos_ids_.clear();
    if (const int eos = gguf_special_id(meta, "tokenizer.ggml.eos_token_id", n_tokens, path); eos >= 0) t.eos_ids_.push_back(eos);
    t.add_bos_ = meta.value("tokenizer.ggml.add_bos_token", false);
    return t;
  }
  if (model != "llama")
    fail("{}: GGUF tokenizer model '{}' is not supported ('llama' SentencePiece, 'gpt2' byte-level BPE)", path, model);
  if (!meta.contains("tokenizer.ggml.tokens") || !meta.contains("tokenizer.ggml.scores"))
    fail("{}: missing tokenizer.ggml.tokens or tokenizer.ggml.scores", path);
  const auto& tokens = meta["tokenizer.ggml.tokens"];
  const auto& scores = meta["tokenizer.ggml.scores"];
  const json types = meta.value("tokenizer.ggml.token_type", json::array());
  EAGLET_CHECK(tokens.is_array() && scores.is_array() && types.is_array(),
               "{}: tokenizer.ggml.tokens, .scores and .token_type must be arrays", path);
  EAGLET_CHECK(!tokens.empty(), "{}: tokenizer.ggml.tokens is empty", path);
  EAGLET_CHECK(tokens.size() == scores.size(), "{}: {} tokens but {} scores", path, tokens.size(), scores.size());
  Tokenizer t;
  t.byte_fallback_ = true;
  t.strip_leading_space_ = true;
  t.normalizers_.push_back({Step::Prepend, kSpmSpace, "", false, nullptr});
  t.normalizers_.push_back({Step::Replace, " ", kSpmSpace, false, nullptr});
  t.id_to_bytes_.resize(tokens.size());
  t.id_to_text_.resize(tokens.size());
  t.is_special_.assign(tokens.size(), false);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string text = tokens[i].get<std::string>();
    const int type = i < types.size() ? types[i].get<int>() : 1;  // 1 normal, 2 unknown, 3 control, 6 byte
    t.scores_.push_back(scores[i].get<float>());
    t.id_to_text_[i] = text;
    const int b = parse_byte_token(text);
    if (type == 6 && b >= 0) {
      t.byte_token_[b] = int(i);
      t.id_to_bytes_[i] = std::string(1, char(b));
    } else if (type == 3 || type == 2) {
      t.id_to_bytes_[i] = text;
      t.add_added_token(text, int(i), true);
    } else {
      t.id_to_bytes_[i] = replace_all(text, kSpmSpace, " ");
      t.bytes_to_id_[text] = int(i);
    }
  }
  t.unk_id_ = gguf_special_id(meta, "tokenizer.ggml.unknown_token_id", n_tokens, path);
  t.bos_id_ = gguf_special_id(meta, "tokenizer.ggml.bos_token_id", n_tokens, path);
  if (const int eos = gguf_special_id(meta, "tokenizer.ggml.eos_token_id", n_tokens, path); eos >= 0) t.eos_ids_.push_back(eos);
  t.add_bos_ = meta.value("tokenizer.ggml.add_bos_token", true);
  t.finish_load();
  return t;
}

Tokenizer Tokenizer::bytes() {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  json tj = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"byte_fallback", true}, {"unk_token", "<unk>"}}},
             {"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                           {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                           {{"id", 2}, {"content", "</s>"}, {"special", true}}})},
             {"decoder", {{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}}}};
  json cfg = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_bos_token", true}};
  return from_json(tj, "<built-in byte tokenizer>", cfg);
}

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
  for (auto& [b, id] : bytes_to_id_) max_token_bytes_ = std::max(max_token_bytes_, b.size());
}

const std::string& Tokenizer::token_bytes(int id) const {
  static const std::string empty;
  return id >= 0 && id < int(id_to_bytes_.size()) ? id_to_bytes_[size_t(id)] : empty;
}

int Tokenizer::token_id(const std::string& text) const {
  if (const int id = added_.find(text); id >= 0) return id;
  std::string key = text;
  if (byte_level_) byte_level_decode(text, &key);
  auto it = bytes_to_id_.find(key);
  if (it != bytes_to_id_.end()) return it->second;
  it = bytes_to_id_.find(text);
  return it == bytes_to_id_.end() ? -1 : it->second;
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
  std::vector<std::string> pieces{s};
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
  for (auto& piece : pieces) {
    if (out->size() > max_tokens) return;
    if (!piece.empty()) encode_piece(piece, out);
  }
}

void Tokenizer::encode_piece(const std::string& piece, std::vector<int>* out) const {
  if (ignore_merges_ || rank_by_merged_bytes_) {
    auto it = bytes_to_id_.find(piece);
    if (it != bytes_to_id_.end()) { out->push_back(it->second); return; }
  }
  std::vector<int> symbols;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = byte_level_ ? 1 : std::min(utf8_len(static_cast<unsigned char>(piece[i])), piece.size() - i);
    auto it = bytes_to_id_.find(piece.substr(i, n));
    if (it != bytes_to_id_.end()) {
      symbols.push_back(it->second);
    } else if (byte_fallback_) {
      for (size_t j = i; j < i + n; ++j) {
        const int b = byte_token_[static_cast<unsigned char>(piece[j])];
        if (b >= 0) symbols.push_back(b);
        else if (unk_id_ >= 0) symbols.push_back(unk_id_);
      }
    } else if (unk_id_ >= 0) {
      if (!(fuse_unk_ && !symbols.empty() && symbols.back() == unk_id_)) symbols.push_back(unk_id_);
    }
    i += n;
  }
  MergeFn merge;
  if (!scores_.empty()) {
    merge = [this](int a, int b) {
      auto it = bytes_to_id_.find(id_to_text_[size_t(a)] + id_to_text_[size_t(b)]);
      return it == bytes_to_id_.end() ? MergeResult{} : MergeResult{true, -double(scores_[size_t(it->second)]), it->second};
    };
  } else if (rank_by_merged_bytes_) {
    merge = [this](int a, int b) {
      auto it = bytes_to_id_.find(id_to_bytes_[size_t(a)] + id_to_bytes_[size_t(b)]);
      return it == bytes_to_id_.end() ? MergeResult{} : MergeResult{true, double(it->second), it->second};
    };
  } else {
    merge = [this](int a, int b) {
      auto it = merges_.find(pair_key(a, b));
      return it == merges_.end() ? MergeResult{} : MergeResult{true, double(it->second.first), it->second.second};
    };
  }
  for (int id : bpe_merge(symbols, merge)) out->push_back(id);
}

std::string Tokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  StreamDecoder d(*this, skip_special);
  std::string out;
  for (int id : ids) out += d.push(id);
  return out + d.flush();
}

size_t utf8_complete_prefix(std::string_view s) {
  // Walk back over at most 3 trailing bytes to find an unfinished lead byte.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = utf8_len(c);
    return need > back ? n - back : n;
  }
  return n;
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
