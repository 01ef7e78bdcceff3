// Hugging Face `tokenizer.json` (+ tokenizer_config.json): the BPE model with its merges, the
// normalizers and pre-tokenizers, added tokens, and BOS/EOS.
#include <algorithm>

#include "core/error.h"
#include "io/json_config.h"
#include "io/mapped_file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/token_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_text.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
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

json read_json_file(const std::string& path) {
  try {
    return json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail("{}: bad JSON: {}", path, e.what());
  }
}
}  // namespace

// Reads one tokenizer.json into a Tokenizer, in steps.
class HfTokenizerReader {
 public:
  HfTokenizerReader(const json& tj, const std::string& where, const json& cfg) : tj_(tj), where_(where), cfg_(cfg) {}
  Tokenizer read();

 private:
  struct AddedToken {
    std::string content;
    int id;
    bool special;
  };
  bool read_modes(const json& model, const std::vector<json>& pre, const std::vector<json>& decoders);
  int64_t strip_start(const json& decoder) const;
  std::vector<AddedToken> read_vocab();
  void add_vocab_entry(const std::string& key, int id, bool spm_space);
  void read_merges(const json& model);
  void read_normalizers(const std::vector<json>& normalizers);
  void read_pre_tokenizers(const std::vector<json>& pre);
  void read_bos_eos();

  const json& tj_;
  const std::string& where_;
  const json& cfg_;
  Tokenizer t_;
  MergeRankBpe* bpe_ = nullptr;  // t_'s model, while it is filled in
  bool spm_space_ = false;       // U+2581 in vocabulary strings stands for a space
};

Tokenizer Tokenizer::from_dir(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  if (!file_exists(path)) fail("{}: tokenizer.json not found", dir);
  const json tj = read_json_file(path);
  const std::string cfg_path = dir + "/tokenizer_config.json";
  json cfg = file_exists(cfg_path) ? read_json_file(cfg_path) : json::object();
  // Newer checkpoints (MiniMax-M2/M3 among them) ship the template as its own file.
  const std::string template_path = dir + "/chat_template.jinja";
  if (cfg.is_object() && !cfg.contains("chat_template") && file_exists(template_path))
    cfg["chat_template"] = read_text_file(template_path);
  return from_json(tj, path, cfg);
}

Tokenizer Tokenizer::from_json(const json& tj, const std::string& where, const json& cfg) {
  try {
    return HfTokenizerReader(tj, where, cfg).read();
  } catch (const json::exception& e) {  // a field of the wrong type the checks do not name
    fail("{}: malformed tokenizer: {}", where, e.what());
  }
}

Tokenizer HfTokenizerReader::read() {
  t_.config_ = cfg_;
  if (!tj_.is_object() || !tj_.contains("model") || !tj_["model"].is_object()) fail("{}: missing field 'model'", where_);
  if (!cfg_.is_object()) fail("{}: tokenizer_config.json must be a JSON object", where_);
  const json& model = tj_["model"];
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") fail("{}: tokenizer model type '{}' is not supported (only BPE)", where_, type);
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail("{}: missing field 'model.vocab'", where_);
  auto bpe = std::make_unique<MergeRankBpe>();
  bpe_ = bpe.get();
  t_.model_ = std::move(bpe);
  const auto pre = flatten(tj_.value("pre_tokenizer", json()), "pretokenizers");
  spm_space_ = read_modes(model, pre, flatten(tj_.value("decoder", json()), "decoders"));
  const std::vector<AddedToken> added = read_vocab();
  read_merges(model);
  read_normalizers(flatten(tj_.value("normalizer", json()), "normalizers"));
  read_pre_tokenizers(pre);
  for (auto& a : added) t_.add_added_token(a.content, a.id, a.special);
  read_bos_eos();
  t_.finish_load();
  return std::move(t_);
}

// How vocabulary strings map to bytes: byte-level if any pre-tokenizer or decoder says so; else
// SentencePiece-style, where the decoders say whether U+2581 stands for a space (returned) and
// whether a leading space is stripped.
// A Strip decoder's `start` (a count of characters; a float or a negative is refused, not cast).
int64_t HfTokenizerReader::strip_start(const json& decoder) const {
  if (!decoder.contains("start")) return 0;
  int64_t n = 0;
  if (!json_int64(decoder["start"], &n) || n < 0)
    fail("{}: decoder Strip 'start' must be a non-negative integer (got {})", where_, json_brief(decoder["start"]));
  return n;
}

bool HfTokenizerReader::read_modes(const json& model, const std::vector<json>& pre, const std::vector<json>& decoders) {
  SymbolTable& s = bpe_->symbols;
  for (auto& p : pre) s.byte_level |= p.value("type", "") == "ByteLevel";
  for (auto& d : decoders) s.byte_level |= d.value("type", "") == "ByteLevel";
  bool spm_space = false;
  for (auto& d : decoders) {
    const std::string dt = d.value("type", "");
    if (dt == "Replace" && d.contains("pattern") && d["pattern"].value("String", "") == kSpmSpace) spm_space = true;
    if (dt == "Metaspace") spm_space = true;
    if (dt == "Strip" && strip_start(d) > 0 && d.value("content", "") == " ") t_.strip_leading_space_ = true;
    if (dt == "Metaspace" && d.value("prepend_scheme", "always") != "never") t_.strip_leading_space_ = true;
  }
  s.byte_fallback = model.value("byte_fallback", false);
  s.fuse_unk = model.value("fuse_unk", false);
  bpe_->ignore_merges = model.value("ignore_merges", false);
  return spm_space;
}

// The vocabulary's id tables; returns the added tokens, which are registered once the
// pre-tokenizers exist. Token ids index tables sized by the largest id, so they are checked
// before anything is allocated: a negative id would write before the table, a huge one allocate
// gigabytes.
std::vector<HfTokenizerReader::AddedToken> HfTokenizerReader::read_vocab() {
  const json& vocab = tj_["model"]["vocab"];
  const json no_added = json::array();
  const json& added = tj_.contains("added_tokens") && !tj_["added_tokens"].is_null() ? tj_["added_tokens"] : no_added;
  if (!added.is_array()) fail("{}: 'added_tokens' must be a list", where_);
  if (vocab.empty() && added.empty()) fail("{}: the vocabulary is empty (model.vocab and added_tokens)", where_);
  const int64_t id_limit = int64_t(vocab.size() + added.size()) + kMaxIdGap;
  // `what` names the entry (a callable, so the name is only built for an error).
  auto checked_id = [&](const json& v, const auto& what) {
    int64_t id;
    if (!json_int64(v, &id)) fail("{}: {} must be an integer token id (got {})", where_, what(), json_brief(v));
    if (id < 0 || id >= id_limit)
      fail("{}: {} has id {}, outside [0, {}): ids must number the {} tokens without large gaps", where_, what(), id,
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
      fail("{}: {} needs a string 'content'", where_, what());
    if (!a.contains("id")) fail("{}: {} needs an 'id'", where_, what());
    const json special = a.value("special", json(false));
    if (!special.is_boolean()) fail("{}: {}.special must be true or false", where_, what());
    added_tokens.push_back({a["content"].get<std::string>(), checked_id(a["id"], what), special.get<bool>()});
    max_id = std::max(max_id, added_tokens.back().id);
  }
  t_.id_to_bytes_.assign(size_t(max_id + 1), "");
  t_.is_special_.assign(size_t(max_id + 1), false);
  for (auto& [key, id] : vocab_ids) add_vocab_entry(*key, id, spm_space_);
  const json& model = tj_["model"];
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab.find(model["unk_token"].get<std::string>());
    if (it != vocab.end()) bpe_->symbols.unk_id = it->get<int>();  // checked above
  }
  return added_tokens;
}

// One vocabulary string: the key the model looks it up by and the text it decodes to.
void HfTokenizerReader::add_vocab_entry(const std::string& k, int id, bool spm_space) {
  SymbolTable& s = bpe_->symbols;
  if (s.byte_level) {
    std::string bytes;
    if (!byte_level_decode(k, &bytes)) bytes = k;
    s.ids[bytes] = id;
    t_.id_to_bytes_[size_t(id)] = bytes;
    return;
  }
  const int b = parse_byte_token(k);
  if (b >= 0) s.byte_token[b] = id;
  s.ids[k] = id;
  std::string shown = k;
  if (b >= 0 && s.byte_fallback) shown = std::string(1, char(b));
  else if (spm_space) shown = replace_all(shown, kSpmSpace, " ");
  t_.id_to_bytes_[size_t(id)] = shown;
}

// Merges as "left right" strings or pairs, ranked in order; one whose parts or result are not in
// the vocabulary keeps its rank and is never applied.
void HfTokenizerReader::read_merges(const json& model) {
  if (!model.contains("merges") || model["merges"].is_null()) return;
  if (!model["merges"].is_array()) fail("{}: model.merges must be a list", where_);
  const json& vocab = model["vocab"];
  int rank = 0;
  for (auto& m : model["merges"]) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) fail("{}: malformed merge '{}' in model.merges", where_, s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      fail("{}: malformed entry {} in model.merges (a \"left right\" string or a pair of strings)", where_, rank);
    }
    auto ia = vocab.find(a), ib = vocab.find(b), im = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || im == vocab.end()) {
      ++rank;
      continue;
    }
    bpe_->merges.emplace(MergeRankBpe::pair_key(ia->get<int>(), ib->get<int>()), std::make_pair(rank++, im->get<int>()));
  }
}

void HfTokenizerReader::read_normalizers(const std::vector<json>& normalizers) {
  using Step = Tokenizer::Step;
  for (auto& n : normalizers) {
    const std::string nt = n.value("type", "");
    if (nt == "Prepend") t_.normalizers_.push_back({Step::Prepend, n.value("prepend", ""), "", false, nullptr});
    else if (nt == "Replace") {
      if (!n.contains("pattern") || !n["pattern"].contains("String"))
        fail("{}: Replace normalizer with a regex pattern is not supported", where_);
      t_.normalizers_.push_back({Step::Replace, n["pattern"]["String"].get<std::string>(), n.value("content", ""), false, nullptr});
    } else if (nt == "NFC" || nt == "NFD" || nt == "NFKC" || nt == "NFKD") {
      t_.normalizers_.push_back({Step::Normalize, nt, "", false, nullptr});
    } else {
      fail("{}: normalizer '{}' is not supported", where_, nt);
    }
  }
}

void HfTokenizerReader::read_pre_tokenizers(const std::vector<json>& pre) {
  using Step = Tokenizer::Step;
  for (auto& p : pre) {
    const std::string pt = p.value("type", "");
    if (pt == "ByteLevel") {
      Step s{Step::ByteLevel, "", "", p.value("add_prefix_space", false), nullptr};
      if (p.value("use_regex", true)) s.regex = std::make_shared<RegexSplitter>(kGpt2SplitPattern);
      t_.pre_tokenizers_.push_back(s);
    } else if (pt == "Split") {
      if (!p.contains("pattern") || !p["pattern"].contains("Regex"))
        fail("{}: Split pre-tokenizer needs a Regex pattern", where_);
      if (p.value("behavior", "Isolated") != "Isolated" || p.value("invert", false))
        fail("{}: Split pre-tokenizer behaviour '{}' is not supported", where_, p.value("behavior", ""));
      t_.pre_tokenizers_.push_back({Step::SplitRegex, "", "", false,
                                    std::make_shared<RegexSplitter>(p["pattern"]["Regex"].get<std::string>())});
    } else if (pt == "Metaspace") {
      t_.pre_tokenizers_.push_back({Step::Metaspace, p.value("replacement", kSpmSpace),
                                    p.value("prepend_scheme", "always"), p.value("split", true), nullptr});
    } else {
      fail("{}: pre-tokenizer '{}' is not supported", where_, pt);
    }
  }
}

// BOS/EOS: tokenizer_config.json first, then the post-processor template (whose leading special
// token, if any, is the BOS it adds).
void HfTokenizerReader::read_bos_eos() {
  if (cfg_.contains("bos_token")) t_.bos_id_ = t_.token_id(special_token_text(cfg_["bos_token"]));
  if (cfg_.contains("eos_token")) {
    const int e = t_.token_id(special_token_text(cfg_["eos_token"]));
    if (e >= 0) t_.eos_ids_.push_back(e);
  }
  bool template_bos = false;
  for (auto& pp : flatten(tj_.value("post_processor", json()), "processors")) {
    if (pp.value("type", "") != "TemplateProcessing" || !pp.contains("single")) continue;
    for (auto& item : pp["single"]) {
      if (item.contains("SpecialToken")) {
        const int id = t_.token_id(item["SpecialToken"].value("id", ""));
        if (id >= 0) {
          if (t_.bos_id_ < 0) t_.bos_id_ = id;
          template_bos = id == t_.bos_id_;
        }
      }
      break;  // only a leading special token counts as BOS
    }
  }
  t_.add_bos_ = cfg_.contains("add_bos_token") && cfg_["add_bos_token"].is_boolean() ? cfg_["add_bos_token"].get<bool>()
                                                                                      : template_bos;
}

// <unk>=0, <s>=1, </s>=2, then bytes as <0xXX> byte-fallback tokens 3..258.
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

}  // namespace eaglet
