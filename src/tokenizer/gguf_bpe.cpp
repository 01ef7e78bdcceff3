#include "tokenizer/gguf_bpe.h"

#include "core/error.h"

namespace eaglet {

namespace {

// GPT-2's split, which many of llama.cpp's pre-tokenizer types share.
const char* const kGpt2Split = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

// DeepSeek LLM's letter class (the cased letters of many scripts), as code points: written as
// characters, several of them (U+1FD3, U+2126, ...) are silently replaced by their canonical
// equivalents when the source is normalised, which breaks the ranges.
const char* const kDeepseekLetters =
    "\\s?["
    "\\x{41}-\\x{5A}\\x{61}-\\x{7A}\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}"
    "\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}-\\x{377}"
    "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}"
    "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"
    "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
    "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
    "\\x{214E}\\x{2183}-\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
    "\\x{2CF2}-\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
    "]+";

const char* const kCjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

}  // namespace

std::vector<std::string> gguf_pretokenizer_regexes(const std::string& pre, const std::string& where) {
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "mpt" || pre == "olmo" || pre == "jais")
    return {kGpt2Split};
  if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" || pre == "codeshell")
    return {"\\p{N}", kGpt2Split};
  if (pre == "falcon") return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Split, "[0-9][0-9][0-9]"};
  if (pre == "deepseek-coder") return {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"};
  if (pre == "deepseek-llm")
    return {"[\r\n]", kDeepseekLetters,
            "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$",
            kCjk, "\\p{N}+"};
  if (pre == "llama-bpe" || pre == "llama3" || pre == "dbrx" || pre == "smaug-bpe")
    return {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
            "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  fail("{}: GGUF pre-tokenizer '{}' is not supported (gpt-2, mpt, olmo, jais, starcoder, refact, command-r, "
       "smollm, codeshell, falcon, deepseek-coder, deepseek-llm, llama-bpe, dbrx, smaug-bpe)",
       where, pre);
}

nlohmann::json gguf_bpe_tokenizer_json(const nlohmann::json& meta, const std::string& where) {
  using nlohmann::json;
  if (!meta.contains("tokenizer.ggml.tokens") || !meta.contains("tokenizer.ggml.merges"))
    fail("{}: missing tokenizer.ggml.tokens or tokenizer.ggml.merges", where);
  const auto& tokens = meta["tokenizer.ggml.tokens"];
  const json types = meta.value("tokenizer.ggml.token_type", json::array());
  json vocab = json::object(), added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string text = tokens[i].get<std::string>();
    const int type = i < types.size() ? types[i].get<int>() : 1;  // 1 normal, 3 control, 4 user-defined
    if (!vocab.contains(text)) vocab[text] = int(i);
    if (type == 3 || type == 4)
      added.push_back({{"id", int(i)}, {"content", text}, {"special", type == 3}, {"normalized", false},
                       {"lstrip", false}, {"rstrip", false}, {"single_word", false}});
  }
  json splits = json::array();
  for (const auto& r : gguf_pretokenizer_regexes(meta.value("tokenizer.ggml.pre", ""), where))
    splits.push_back({{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
  splits.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", meta["tokenizer.ggml.merges"]},
                     {"byte_fallback", false}}},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", splits}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"added_tokens", added}};
}

}  // namespace eaglet
