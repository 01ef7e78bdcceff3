// Structured output's grammar layer (constrain/): GBNF parsing and its errors, the matcher over
// bytes (UTF-8 split across tokens), token masks over a vocabulary, and constrained decoding in the
// engine: speculative greedy output under a grammar equals plain constrained greedy output token
// for token, and every output is a sentence (or, cut by max_tokens, a prefix) of the grammar.
#include <gtest/gtest.h>

#include "constrain/grammar.h"
#include "constrain/token_mask.h"
#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "io/mapped_file.h"
#include "sampling/sampler.h"
#include "speculation/tree_verifier.h"
#include "support/greedy_check.h"
#include "support/synthetic_dflash.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {
namespace {

using constrain::Grammar;
using constrain::Matcher;

bool matches(const std::string& gbnf, const std::string& text) {
  Matcher m(Grammar::parse(gbnf));
  return m.accept(text) && m.complete();
}

// Overlong forms and surrogates are not UTF-8, whole or split (a whole one in a single token
// passed: a maxLength-5 string came out as 7 characters to Python's validator).
TEST(Grammar, OverlongFormsAndSurrogatesAreRefused) {
  for (const char* bad : {"\xED\xA0\x80", "\xE0\x80\x80", "\xF0\x80\x80\x80", "\xF4\x90\x80\x80"}) {
    Matcher whole(Grammar::parse("root ::= [^a]"));
    EXPECT_FALSE(whole.accept(bad)) << int(static_cast<unsigned char>(bad[1]));
    Matcher split(Grammar::parse("root ::= [^a]"));
    bool ok = true;
    for (const char* c = bad; *c && ok; ++c) ok = split.accept(std::string(1, *c));
    EXPECT_FALSE(ok && split.complete()) << int(static_cast<unsigned char>(bad[1]));
  }
  EXPECT_TRUE(matches("root ::= [^a]", "\xED\x9F\xBF"));  // U+D7FF, just below the surrogates
  EXPECT_TRUE(matches("root ::= [^a]", "\xF4\x8F\xBF\xBF"));  // U+10FFFF
}

TEST(Grammar, LiteralsClassesGroupsAndRepetitions) {
  const std::string g = R"G(
    # a comment
    root ::= greeting " " name ("!" | "?")?
    greeting ::= "hi" | "hello"
    name ::= [A-Z] [a-z]{1,4}
  )G";
  for (const char* ok : {"hi Bo", "hello Alice!", "hi Zed?"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"hi bo", "hey Bo", "hi B", "hi Bobbyy", "hi Bo!!", ""}) EXPECT_FALSE(matches(g, bad)) << bad;
  EXPECT_TRUE(matches(R"G(root ::= [^"\\]* "\"")G", "abc\""));
  EXPECT_FALSE(matches(R"G(root ::= [^"\\]* "\"")G", "a\\c\""));
  EXPECT_TRUE(matches(R"G(root ::= "a"+ "b"* "c"{2,} .)G", "aaacc\xE2\x82\xAC"));
  EXPECT_FALSE(matches(R"G(root ::= "a"+ "b"* "c"{2,} .)G", "bcc."));
  EXPECT_TRUE(matches("root ::= x{3}\nx ::= \"\\x41\" | \"\\u00e9\"", "A\xC3\xA9" "A"));
  EXPECT_TRUE(matches(R"G(root ::= "(" root ")" | "")G", "((()))"));  // right recursion and empty
  EXPECT_FALSE(matches(R"G(root ::= "(" root ")" | "")G", "(()"));
}

TEST(Grammar, MatcherStatesArePrefixesAndRefusalsLeaveItUnchanged) {
  Matcher m(Grammar::parse(R"G(root ::= "ab" [0-9]+ "\n")G"));
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept("a"));
  EXPECT_FALSE(m.accept("ac"));  // refused: nothing consumed
  EXPECT_TRUE(m.accept("b12"));
  EXPECT_TRUE(m.can_accept("3\n"));
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept("\n"));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.accept("x"));
}

// A code point split across tokens: the first part is allowed only if some continuation matches.
TEST(Grammar, Utf8SplitAcrossTokens) {
  Matcher m(Grammar::parse(R"G(root ::= "é" [\u4e00-\u9fff])G"));  // é = C3 A9; 一 = E4 B8 80
  EXPECT_TRUE(m.can_accept("\xC3"));
  EXPECT_FALSE(m.can_accept("\xC4"));   // no continuation is é
  EXPECT_FALSE(m.can_accept("\x80"));   // not a lead byte
  EXPECT_TRUE(m.accept("\xC3"));
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept("\xA9\xE4"));
  EXPECT_FALSE(m.can_accept("\xC3"));   // a 2-byte sequence is below U+4E00
  EXPECT_TRUE(m.accept("\xB8\x80"));
  EXPECT_TRUE(m.complete());
  Matcher n(Grammar::parse(R"G(root ::= [^a-z\u0080-\u07ff]+)G"));
  EXPECT_FALSE(n.can_accept("\xC3"));   // every 2-byte code point is excluded
  EXPECT_TRUE(n.can_accept("\xE4"));
}

TEST(Grammar, ErrorsNameWhereAndWhat) {
  auto err = [](const std::string& g) { return test::error_of([&] { Grammar::parse(g, "request.grammar"); }); };
  test::expect_mentions(err("root ::= item\n"), {"request.grammar", "item", "not defined"});
  test::expect_mentions(err("start ::= \"a\""), {"request.grammar", "root"});
  test::expect_mentions(err("root ::= \"a\"\nroot ::= \"b\""), {"defined twice"});
  test::expect_mentions(err("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\""), {"expr", "left-recursive"});
  test::expect_mentions(err("root ::= \"a\" (\"b\""), {"line 1", "unclosed"});
  test::expect_mentions(err("root ::= \"a\"\n  [z-a]"), {"line 2", "range"});
  test::expect_mentions(err("root ::= \"abc"), {"unterminated"});
  test::expect_mentions(err("root := \"a\""), {"::="});
  // Large counts are fine; a short text asking for billions of copies is refused.
  EXPECT_TRUE(matches("root ::= [a-z]{0,50000} \".\"", std::string(40000, 'q') + "."));
  std::string copies = "root ::=";
  for (int i = 0; i < 50; ++i) copies += " \"ab\"{100000}";
  test::expect_mentions(err(copies), {"more than"});
  test::expect_mentions(err("root ::= \"a\"{100001}"), {"above 100000"});
}

TEST(Grammar, TokenMasksFollowTheMatcher) {
  const Tokenizer tok = Tokenizer::bytes();
  const constrain::TokenTrie trie(tok);
  Matcher m(Grammar::parse(R"G(root ::= [0-9]+ "." [0-9])G"));
  std::vector<uint8_t> ok;
  ok = *trie.allowed(m);
  auto allowed_text = [&] {
    std::string s;
    for (int id = 0; id < trie.vocab(); ++id)
      if (ok[size_t(id)]) s += trie.is_eos(id) ? std::string("<eos>") : trie.bytes(id);
    return s;
  };
  EXPECT_EQ(allowed_text(), "0123456789");
  ASSERT_TRUE(m.accept("12"));
  ok = *trie.allowed(m);
  EXPECT_EQ(allowed_text(), ".0123456789");  // in id order
  ASSERT_TRUE(m.accept(".5"));
  ok = *trie.allowed(m);
  EXPECT_EQ(allowed_text(), "<eos>");
  std::vector<float> logits(size_t(trie.vocab()) + 5, 1.0f);  // a model's padding rows too
  trie.mask(m, logits.data(), int(logits.size()));
  for (size_t id = 0; id < logits.size(); ++id) EXPECT_EQ(std::isinf(logits[id]), !(id < ok.size() && ok[id])) << id;
}

// The mask walk (a flat trie, characters stepped once per class the grammar tells apart) allows
// exactly the tokens the matcher takes one by one, on the real 128k and 152k vocabularies, in
// states whose classes split multi-byte characters (CJK ranges, negated sets, a partial
// character already pending).
TEST(Grammar, TokenMasksEqualTheMatcherTokenByTokenOnRealVocabularies) {
  const std::string dir = test::shared_dir() + "/tokenizers/hf/";
  if (!file_exists(dir + "qwen3_tokenizer.json.gz")) GTEST_SKIP() << "needs ../shared/tokenizers";
  const std::string gbnf = R"G(
    root ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\nt] )* "\"" | [\u4E00-\u4FFF\u00E9]+ "!" | [^a-z\u00C0-\u024F\u4E00-\u9FFF]{1,3} "."
  )G";
  for (const char* name : {"llama3", "qwen3"}) {
    const auto tj = nlohmann::json::parse(read_text_file(dir + name + "_tokenizer.json.gz"));
    const auto cfg = nlohmann::json::parse(read_text_file(dir + name + "_tokenizer_config.json"));
    const Tokenizer tok = Tokenizer::from_json(tj, name, cfg);
    const constrain::TokenTrie trie(tok);
    const auto g = Grammar::parse(gbnf);
    for (const std::string prefix : {"", "\"", "\"ab\\n", "\xE4", "\xE4\xB8", "\xC3", "\"\xF0\x9F"}) {
      Matcher m(g);
      ASSERT_TRUE(m.accept(prefix)) << prefix;
      const auto ok = trie.allowed(m);
      size_t allowed = 0;
      for (int id = 0; id < trie.vocab(); ++id) {
        const bool want = trie.is_eos(id) ? m.complete() : !trie.bytes(id).empty() && m.can_accept(trie.bytes(id));
        ASSERT_EQ(bool((*ok)[size_t(id)]), want) << name << " after '" << prefix << "': token " << id << " '" << trie.bytes(id) << "'";
        allowed += want;
      }
      EXPECT_GT(allowed, 0u) << name << " " << prefix;
    }
  }
}

// Sampling under a grammar through a draft tree: the first two tokens follow the target's
// distributions masked by the grammar (the second by its state after the first), whichever draft
// tokens the tree holds, a refused one included.
TEST(GrammarSampling, TreeVerificationEmitsTheMaskedDistribution) {
  const Tokenizer tok = Tokenizer::bytes();
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.grammar = Grammar::parse(R"G(root ::= [a-d] [a-d01])G");
  sp.vocabulary = std::make_shared<constrain::TokenTrie>(tok);
  const int V = tok.vocab_size();
  auto id = [&](char c) {
    for (int t = 0; t < V; ++t)
      if (tok.token_bytes(t) == std::string(1, c)) return t;
    return -1;
  };
  // Root children a (node 0), b (node 1), x (node 2, refused); node 0's children c (3) and 0 (4).
  DraftTree tree;
  tree.tokens = {id('a'), id('b'), id('x'), id('c'), id('0')};
  tree.parents = {-1, -1, -1, 0, 0};
  std::vector<float> rows = test::random_normal(size_t(V) * 6, 1.5f, 17);
  // The masked distributions: the root's, and after "a" (node 0's row) and "b" (node 1's row).
  Sampler probe(sp);
  auto masked_probs = [&](int row, const std::string& prefix) {
    Matcher m(sp.grammar);
    EXPECT_TRUE(m.accept(prefix));
    std::vector<float> p;
    target_probs(probe.masked(rows.data() + size_t(row) * size_t(V), V, m), V, sp, &p);
    return p;
  };
  const auto p0 = masked_probs(0, ""), pa = masked_probs(1, "a"), pb = masked_probs(2, "b");
  const std::string second = "abcd01";
  std::vector<double> expect;  // (a, t2) x 6, (b, t2) x 6, c, d
  for (char c : second) expect.push_back(double(p0[size_t(id('a'))]) * pa[size_t(id(c))]);
  for (char c : second) expect.push_back(double(p0[size_t(id('b'))]) * pb[size_t(id(c))]);
  expect.push_back(p0[size_t(id('c'))]);
  expect.push_back(p0[size_t(id('d'))]);
  std::vector<int> counts(expect.size());
  const int n = 20000;
  sp.seed = 5;
  Sampler s(sp);
  for (int i = 0; i < n; ++i) {
    const Verdict v = verify_tree(rows.data(), V, tree, s);
    std::vector<int> emitted;  // the first two tokens (a path through c or 0 ends with end-of-sequence)
    for (int node : v.path) emitted.push_back(tree.tokens[size_t(node)]);
    emitted.push_back(v.next);
    std::string text;
    for (size_t i = 0; i < std::min<size_t>(2, emitted.size()); ++i) text += tok.token_bytes(emitted[i]);
    ASSERT_TRUE(text.size() <= 2 && Matcher(sp.grammar).can_accept(text)) << text;
    if (text.size() == 2) ++counts[size_t((text[0] == 'a' ? 0 : 6) + int(second.find(text[1])))];
    else ++counts[size_t(text[0] == 'c' ? 12 : 13)];
  }
  double chi = 0;
  for (size_t i = 0; i < expect.size(); ++i) {
    const double e = expect[i] * n;
    if (e > 0) chi += (counts[i] - e) * (counts[i] - e) / e;
    else EXPECT_EQ(counts[i], 0) << i;
  }
  EXPECT_LT(chi, 34.5);  // df = 13: p(chi2 > 34.5) = 0.001
}

// Constrained decoding through the engine, with and without speculation: the same tokens for
// EAGLE-3 chains and trees, DFlash blocks and n-gram lookup, and every output a prefix of the
// grammar (a sentence when it finished on its own).
TEST(GrammarDecoding, SpeculativeGreedyEqualsPlainUnderAGrammar) {
  test::TempDir dir;
  test::write_steered_byte_target(dir.file("target"));
  test::DraftSpec ds;
  ds.vocab = ds.draft_vocab = 259;
  ds.scale = 0.3f;
  test::write_draft(dir.file("eagle3"), ds);
  test::write_dflash_draft(dir.file("dflash"), test::dflash_draft_config(96, 4));
  ModelBundle b = load_bundle(dir.file("target"));
  const std::string gbnf = R"G(root ::= "{\"id\": " [1-9] [0-9]{0,3} ", \"tag\": \"" [a-f]{2,12} "\"}")G";
  SamplingParams sp;
  sp.grammar = Grammar::parse(gbnf);
  sp.vocabulary = std::make_shared<constrain::TokenTrie>(b.tokenizer);
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 6; ++i) {  // the n-gram proposer finds the record's shape in the prompt
    auto ids = b.tokenizer.encode("{\"id\": " + std::to_string(10 + i) + ", \"tag\": \"abc\"} {\"id\": ", true);
    prompts.push_back(ids);
  }
  SpecOptions eagle;
  eagle.draft_dir = dir.file("eagle3");
  const std::vector<std::string> shapes = {"k=3", "topk=3,depth=4,budget=10", "auto"};
  const int64_t constrained = test::expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts, eagle, 40, shapes, sp);
  SpecOptions loose = eagle;  // the draft proposes unconstrained; verification refuses what the grammar does
  loose.constrain_draft = false;
  const int64_t unconstrained = test::expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts, loose, 40, shapes, sp);
  EXPECT_GT(constrained, unconstrained) << "a draft held to the grammar is accepted more often";
  SpecOptions dflash;
  dflash.method = "dflash";
  dflash.draft_dir = dir.file("dflash");
  const std::vector<std::string> block_shapes = {"k=7", "topk=2,depth=4,budget=8", "auto"};
  const int64_t held = test::expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts, dflash, 40, block_shapes, sp);
  SpecOptions loose_block = dflash;
  loose_block.constrain_draft = false;
  EXPECT_GT(held, test::expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts, loose_block, 40, block_shapes, sp));
  SpecOptions ngram;
  ngram.method = "ngram";
  EXPECT_GT(test::expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts, ngram, 40, {"k=3", "k=7"}, sp), 0);
  for (const auto& p : prompts) {
    auto r = std::make_shared<Request>();
    r->prompt = p;
    r->sampling = sp;
    r->stop.max_tokens = 40;
    r->stop.ignore_eos = true;  // a finished grammar ends the output all the same
    const GenerationResult g = generate(test::pool(), *b.model, b.tokenizer, r);
    Matcher m(sp.grammar);
    EXPECT_TRUE(m.accept(g.text)) << g.text;
    EXPECT_EQ(g.finish_reason, m.complete() ? "stop" : "length") << g.text;
  }
}

}  // namespace
}  // namespace eaglet
