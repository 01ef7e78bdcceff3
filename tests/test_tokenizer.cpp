// Tokenizers against llama.cpp's test vectors and tiktoken's, plus round trips and streaming.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/mapped_file.h"
#include "tokenizer/token_model.h"
#include "tokenizer/tokenizer.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

std::vector<std::string> split_on(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t b = 0, e;
  while ((e = s.find(sep, b)) != std::string::npos) {
    out.push_back(s.substr(b, e - b));
    b = e + sep.size();
  }
  out.push_back(s.substr(b));
  return out;
}

// Checks every (input, ids) pair of a llama.cpp `.inp/.out` vector file; returns the count.
int check_llamacpp_vectors(const Tokenizer& tok, const std::string& name) {
  const std::string base = test::shared_dir() + "/tokenizers/llamacpp_vocab/ggml-vocab-" + name + ".gguf";
  auto inputs = split_on(read_text_file(base + ".inp"), "\n__ggml_vocab_test__\n");
  auto outputs = split_on(read_text_file(base + ".out"), "\n");
  int checked = 0;
  for (size_t i = 0; i + 1 < inputs.size() && i < outputs.size(); ++i) {
    std::vector<int> want;
    std::istringstream ss(outputs[i]);
    int id;
    while (ss >> id) want.push_back(id);
    const auto got = tok.encode(inputs[i], /*add_bos=*/0, /*parse_special=*/false);
    EXPECT_EQ(got, want) << name << " vector " << i << ": '" << inputs[i] << "'";
    EXPECT_EQ(tok.decode(got, false), inputs[i]) << name << " round trip " << i;
    ++checked;
  }
  return checked;
}

TEST(Tokenizer, Gpt2MatchesLlamaCppVectors) {
  EAGLET_REQUIRE_SHARED();
  nlohmann::json tj = nlohmann::json::parse(read_text_file(test::shared_dir() + "/tokenizers/hf/gpt2_tokenizer.json"));
  EXPECT_EQ(check_llamacpp_vectors(Tokenizer::from_json(tj, "gpt2"), "gpt-2"), 46);
}

TEST(Tokenizer, Llama3MatchesLlamaCppVectors) {
  EAGLET_REQUIRE_SHARED();
  const std::string d = test::shared_dir() + "/tokenizers/hf/";
  auto tj = nlohmann::json::parse(read_text_file(d + "llama3_tokenizer.json.gz"));
  auto cfg = nlohmann::json::parse(read_text_file(d + "llama3_tokenizer_config.json"));
  Tokenizer tok = Tokenizer::from_json(tj, "llama3", cfg);
  EXPECT_EQ(check_llamacpp_vectors(tok, "llama-bpe"), 46);
  EXPECT_EQ(tok.bos_id(), 128000);
  // This tokenizer.json has no TemplateProcessing and the config no add_bos_token, so Hugging
  // Face adds no BOS by default; forcing it puts <|begin_of_text|> first.
  EXPECT_FALSE(tok.adds_bos());
  EXPECT_EQ(tok.encode("Hi", 1)[0], 128000);
  // Special tokens in text are single ids when parsed, and never leak into decoded output.
  auto ids = tok.encode("<|start_header_id|>user<|end_header_id|>", 0, true);
  EXPECT_EQ(ids.front(), 128006);
  EXPECT_EQ(tok.decode(ids), "user");
}

TEST(Tokenizer, Qwen2MatchesLlamaCppVectors) {
  EAGLET_REQUIRE_SHARED();
  const std::string d = test::shared_dir() + "/tokenizers/hf/";
  auto tj = nlohmann::json::parse(read_text_file(d + "qwen3_tokenizer.json.gz"));
  auto cfg = nlohmann::json::parse(read_text_file(d + "qwen3_tokenizer_config.json"));
  Tokenizer tok = Tokenizer::from_json(tj, "qwen3", cfg);
  EXPECT_EQ(check_llamacpp_vectors(tok, "qwen2"), 46);
  EXPECT_FALSE(tok.adds_bos());
  EXPECT_EQ(tok.encode("<|im_start|>", 0, true), std::vector<int>{151644});
}

TEST(Tokenizer, LlamaSpmGgufMatchesLlamaCppVectors) {
  EAGLET_REQUIRE_SHARED();
  Tokenizer tok = Tokenizer::from_gguf(test::shared_dir() + "/tokenizers/llamacpp_vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(tok.vocab_size(), 32000);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(check_llamacpp_vectors(tok, "llama-spm"), 46);
  Tokenizer phi3 = Tokenizer::from_gguf(test::shared_dir() + "/tokenizers/llamacpp_vocab/ggml-vocab-phi-3.gguf");
  EXPECT_EQ(check_llamacpp_vectors(phi3, "phi-3"), 46);
}

// Byte-level BPE GGUF vocabularies, whose pre-tokenizer llama.cpp picks by `tokenizer.ggml.pre`.
class BpeGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(BpeGguf, MatchesLlamaCppVectors) {
  EAGLET_REQUIRE_SHARED();
  const Tokenizer tok =
      Tokenizer::from_gguf(test::shared_dir() + "/tokenizers/llamacpp_vocab/ggml-vocab-" + GetParam() + ".gguf");
  EXPECT_GT(check_llamacpp_vectors(tok, GetParam()), 40);
}

TEST(Tokenizer, GgufVocabulariesWithoutVectorsLoadAndRoundTrip) {
  EAGLET_REQUIRE_SHARED();
  const std::string text = "Hello world!  Numbers 12345, symbols {}[] and \xc3\xa9t\xc3\xa9.";
  for (const char* name : {"gpt-neox", "baichuan"}) {
    const Tokenizer tok = Tokenizer::from_gguf(test::shared_dir() + "/tokenizers/llamacpp_vocab/ggml-vocab-" + name + ".gguf");
    EXPECT_EQ(tok.decode(tok.encode(text, 0, false), false), text) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, BpeGguf,
                         ::testing::Values("gpt-2", "mpt", "falcon", "starcoder", "refact", "deepseek-coder",
                                           "deepseek-llm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Tokenizer, BadGgufIsAClearError) {
  test::TempDir d;
  test::write_text(d.file("x.gguf"), "GGUF\x03");
  EXPECT_THROW(Tokenizer::from_gguf(d.file("x.gguf")), std::exception);
  test::write_text(d.file("y.gguf"), "NOPE0000000000000000000000000");
  try {
    Tokenizer::from_gguf(d.file("y.gguf"));
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not a GGUF file"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, TiktokenVectors) {
  EAGLET_REQUIRE_SHARED();
  const std::string d = test::shared_dir() + "/tokenizers/tiktoken/";
  std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto get = [&](std::string enc) -> Tokenizer& {
    if (enc == "gpt2") enc = "r50k_base";
    auto& slot = cache[enc];
    if (!slot) {
      auto meta = nlohmann::json::parse(read_text_file(d + enc + ".meta.json"));
      std::vector<std::pair<std::string, int>> specials;
      for (auto& [k, v] : meta["special_tokens"].items()) specials.emplace_back(k, v.get<int>());
      slot = std::make_unique<Tokenizer>(Tokenizer::from_tiktoken(d + enc + ".tiktoken", meta["pat_str"], specials));
    }
    return *slot;
  };
  std::ifstream in(d + "tiktoken_test_vectors.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    const bool allow_special = j.contains("kwargs") && j["kwargs"].value("allowed_special", "") == "all";
    Tokenizer& tok = get(j["encoding"]);
    auto ids = tok.encode(j["text"].get<std::string>(), 0, allow_special);
    EXPECT_EQ(ids, j["ids"].get<std::vector<int>>()) << j["encoding"] << " '" << j["text"] << "'";
    EXPECT_EQ(tok.decode(ids, false), j["text"].get<std::string>());
    ++n;
  }
  EXPECT_GE(n, 30);
}

TEST(Tokenizer, Stories260KSentencePieceStyle) {
  EAGLET_REQUIRE_SHARED();
  Tokenizer tok = Tokenizer::from_dir(test::shared_dir() + "/models/stories260K-hf");
  EXPECT_EQ(tok.encode("Once upon a time"), (std::vector<int>{1, 403, 407, 261, 378}));
  for (std::string s : {"Once upon a time, there was a little girl named Lily.", "Lily's mom said, \"Hi!\"\n\nThe end.",
                        "unicode: caf\xC3\xA9 \xF0\x9F\xA6\x99 \xE4\xBD\xA0\xE5\xA5\xBD", "  two leading spaces"}) {
    auto ids = tok.encode(s, 0);
    EXPECT_EQ(tok.decode(ids), s);
  }
}

TEST(Tokenizer, StreamingNeverSplitsCharacters) {
  Tokenizer tok = Tokenizer::bytes();
  const std::string text = "a\xC3\xA9 \xF0\x9F\xA6\x99!";
  auto ids = tok.encode(text, 0);
  ASSERT_EQ(ids.size(), text.size());  // one id per byte
  StreamDecoder d(tok);
  std::string joined;
  for (int id : ids) {
    std::string piece = d.push(id);
    EXPECT_EQ(utf8_complete_prefix(piece), piece.size()) << "emitted half a character";
    joined += piece;
  }
  joined += d.flush();
  EXPECT_EQ(joined, text);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xC3\xA9"), 4u);
}

// Found by fuzz_gguf: metadata values of the wrong type escaped as a JSON type error.
TEST(Tokenizer, GgufMetadataOfTheWrongTypeIsAClearError) {
  using json = nlohmann::json;
  const json tokens = json::array({"<unk>", "<s>", "</s>", "a"}), scores = json::array({0.0, 0.0, 0.0, -1.0});
  for (const json& meta : {json{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", json::array({1, 2})},
                                {"tokenizer.ggml.scores", json::array({0.0, 0.0})}},
                           json{{"tokenizer.ggml.model", 7}},
                           json{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens},
                                {"tokenizer.ggml.scores", json::array({"x", 0.0, 0.0, 0.0})}},
                           json{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens},
                                {"tokenizer.ggml.scores", scores}, {"tokenizer.ggml.bos_token_id", 99}},
                           json{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", tokens},
                                {"tokenizer.ggml.scores", scores}, {"tokenizer.ggml.token_type", "x"}}}) {
    try {
      Tokenizer::from_gguf_metadata(meta, "vocab.gguf");
      ADD_FAILURE() << "accepted " << meta.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("vocab.gguf"), std::string::npos) << e.what();
    }
  }
}

TEST(Tokenizer, BadTokenizerJsonIsAClearError) {
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"), "{\"model\": ");
  try {
    Tokenizer::from_dir(dir.path());
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json: bad JSON"), std::string::npos) << e.what();
  }
  test::write_text(dir.file("tokenizer.json"), R"({"model": {"type": "WordPiece", "vocab": {}}})");
  EXPECT_THROW(Tokenizer::from_dir(dir.path()), std::exception);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// Seconds for the fastest of three encodes (the machine's noise only ever adds time).
double encode_seconds(const Tokenizer& tok, const std::string& text) {
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    EXPECT_GT(ids.size(), text.size() / 8);
  }
  return best;
}

// Issue 12, failure 2: a 3.9 MB prompt of "ab " took 99.5 s of CPU before the server could say
// it was too long (in-place string replacement in the normalizer, and every added token tried at
// every byte). Eight times the text must take about eight times as long, not sixty-four.
TEST(Tokenizer, EncodingIsLinearInTheText) {
  using json = nlohmann::json;
  json tj = json::parse(read_text_file(test::source_dir() + "/tests/data/bytes_tokenizer.json"));
  // SentencePiece-style normalization (as stories260K and Llama 2 have) and two thousand added
  // tokens that share a first byte with the text.
  tj["normalizer"] = {{"type", "Sequence"},
                      {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  for (int i = 0; i < 2000; ++i)
    tj["added_tokens"].push_back({{"id", 259 + i}, {"content", "a<tok" + std::to_string(i) + ">"}, {"special", true}});
  const Tokenizer tok = Tokenizer::from_json(tj, "test");
  std::string small;
  while (small.size() < (128 << 10)) small += "ab ";
  std::string large;
  for (int i = 0; i < 8; ++i) large += small;
  const double t_small = encode_seconds(tok, small), t_large = encode_seconds(tok, large);
  EXPECT_LT(t_large / std::max(t_small, 1e-4), 20.0) << t_small << " s for 128 KB, " << t_large << " s for 1 MB";
  // The added tokens still match, longest first, inside the text.
  EXPECT_EQ(tok.encode("xa<tok12>a<tok1>", 0), (std::vector<int>{3 + 0xE2, 3 + 0x96, 3 + 0x81, 3 + 'x', 259 + 12, 259 + 1}));
  // A caller that only needs to know the prompt is too long can stop early (after the piece
  // of pre-tokenized text that crossed the limit).
  tj.erase("normalizer");
  tj["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  const Tokenizer split = Tokenizer::from_json(tj, "test");
  EXPECT_GT(split.encode(large, 0).size(), 1000000u);
  EXPECT_LE(split.encode(large, 0, true, 1000).size(), 1010u);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// The starting symbols every BPE model merges from (token_model.h): characters or bytes in the
// vocabulary, byte fallback for the rest, else unk (fused runs when asked).
TEST(TokenModel, SymbolsFallBackToBytesThenUnk) {
  SymbolTable t;
  t.ids = {{"a", 5}, {"\xC3\xA9", 6}};  // "a", "é"
  t.unk_id = 0;
  const std::string text = "a\xC3\xA9z\xE2\x82\xAC";  // a é z €
  EXPECT_EQ(t.split(text), (std::vector<int>{5, 6, 0, 0}));
  t.fuse_unk = true;
  EXPECT_EQ(t.split(text), (std::vector<int>{5, 6, 0}));
  t.byte_fallback = true;
  t.byte_token[0xE2] = 40;
  t.byte_token[0x82] = 41;
  t.byte_token[0xAC] = 42;
  EXPECT_EQ(t.split(text), (std::vector<int>{5, 6, 0, 40, 41, 42}));  // no <0x7A>: unk for 'z'
  t.byte_level = true;  // bytes, not characters: "é" is two symbols neither of which is a token
  t.byte_token[0xC3] = 43;
  t.byte_token[0xA9] = 44;
  EXPECT_EQ(t.split("a\xC3\xA9"), (std::vector<int>{5, 43, 44}));
}

// The three merge orders: by merge rank, by the merged token's rank (tiktoken), by score (GGUF
// SentencePiece), on one small vocabulary where they disagree.
TEST(TokenModel, EachFamilyMergesInItsOwnOrder) {
  // ids: a=0 b=1 c=2 ab=3 bc=4
  const std::unordered_map<std::string, int> vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}};
  MergeRankBpe ranked;
  ranked.symbols.ids = vocab;
  ranked.merges[MergeRankBpe::pair_key(1, 2)] = {0, 4};  // "b c" ranked first
  ranked.merges[MergeRankBpe::pair_key(0, 1)] = {1, 3};
  std::vector<int> out;
  ranked.encode("abc", &out);
  EXPECT_EQ(out, (std::vector<int>{0, 4}));  // a bc

  TiktokenBpe tik;
  tik.symbols.ids = vocab;
  tik.id_to_bytes = {"a", "b", "c", "ab", "bc"};
  out.clear();
  tik.encode("abc", &out);
  EXPECT_EQ(out, (std::vector<int>{3, 2}));  // "ab" has the lower rank (3 < 4)
  out.clear();
  tik.encode("bc", &out);  // a piece that is a token is taken whole
  EXPECT_EQ(out, (std::vector<int>{4}));

  ScoredBpe spm;
  spm.symbols.ids = vocab;
  spm.id_to_text = tik.id_to_bytes;
  spm.scores = {0, 0, 0, -2.0f, -1.0f};  // "bc" scores higher
  out.clear();
  spm.encode("abc", &out);
  EXPECT_EQ(out, (std::vector<int>{0, 4}));
  EXPECT_EQ(spm.id_of("bc"), 4);
  EXPECT_EQ(spm.id_of("abc"), -1);
}

}  // namespace
}  // namespace eaglet
