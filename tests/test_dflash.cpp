// DFlash block drafts (models/dflash.h): the config as published drafts write it, the forward
// against an independent numpy reference (tests/reference/dflash_ref.py), and what is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"
#include "kernels/ops.h"
#include "io/safetensors.h"
#include "models/dflash.h"
#include "speculation/dflash_proposer.h"
#include "models/model.h"
#include "speculation/spec_setup.h"
#include "support/gguf_writer.h"
#include "support/greedy_check.h"
#include "support/synthetic_dflash.h"
#include "support/test_util.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {
namespace {

nlohmann::json draft_config() { return test::dflash_draft_config(); }

struct Rig {
  test::TempDir dir;
  std::unique_ptr<Model> target;
  Rig() {
    test::write_tiny_model(dir.file("target"), {});
    target = load_model(dir.file("target"));
  }
  std::string draft(const nlohmann::json& cfg = draft_config(), std::vector<std::string> extra = {}) {
    const std::string d = dir.file("draft" + std::to_string(drafts++));
    test::write_dflash_draft(d, cfg, extra);
    return d;
  }
  int drafts = 0;
};

TEST(DFlash, ConfigReadsPublishedLayouts) {
  DFlashConfig c = parse_dflash_config(JsonConfig(draft_config(), "draft/config.json"), 3, 48);
  EXPECT_EQ(c.block_size, 8);
  EXPECT_EQ(c.mask_token_id, 96);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(c.taps, (std::vector<int>{1, 3}));  // the output of layer i is the stream entering layer i + 1
  // Newer drafts keep block_size in dflash_config; without target_layer_ids, z-lab's spread.
  nlohmann::json j = draft_config();
  j.erase("block_size");
  j["dflash_config"]["block_size"] = 16;
  j["dflash_config"].erase("target_layer_ids");
  j["num_target_layers"] = 36;
  j["num_hidden_layers"] = 5;
  j["layer_types"] = std::vector<std::string>(5, "full_attention");
  c = parse_dflash_config(JsonConfig(j, "draft/config.json"), 36, 48);
  EXPECT_EQ(c.block_size, 16);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int>{1, 9, 17, 25, 33}));  // Qwen3-4B-DFlash-b16's
}

// Sliding-window and causal layers as vLLM resolves them, and the export says the same again.
TEST(DFlash, SlidingAndCausalLayersResolveAsVllmAndExportAlike) {
  auto layers = [](const nlohmann::json& j) {
    const DFlashConfig c = parse_dflash_config(JsonConfig(j, "draft/config.json"), 3, 48);
    std::string s = std::to_string(c.sliding_window) + ":";
    for (const auto& l : c.layer_attention) s += std::string(l.sliding ? "S" : "F") + (l.causal ? "c" : "n");
    return s;
  };
  nlohmann::json j = draft_config();
  EXPECT_EQ(layers(j), "0:FnFn");
  j["layer_types"] = {"sliding_attention", "full_attention"};
  j["sliding_window"] = 4;
  EXPECT_EQ(layers(j), "4:ScFn");  // sliding layers are causal unless told
  j["dflash_config"]["causal"] = false;
  EXPECT_EQ(layers(j), "4:SnFn");
  j["is_causal"] = true;  // wins over dflash_config.causal
  EXPECT_EQ(layers(j), "4:ScFc");
  j = draft_config();
  j["dflash_config"]["use_swa"] = true;  // every layer, window from dflash_config
  j["dflash_config"]["swa_window_size"] = 3;
  j["sliding_window"] = 99;
  EXPECT_EQ(layers(j), "3:ScSc");
  for (const nlohmann::json& k : {j, [&] { auto x = j; x["dflash_config"]["causal"] = false; return x; }()}) {
    const DFlashConfig c = parse_dflash_config(JsonConfig(k, "draft/config.json"), 3, 48);
    EXPECT_EQ(layers(dflash_config_json(c, Rope{}, 64, 3, 97)), layers(k)) << k.dump();
  }
}

// The reference's configs: full layers; a causal sliding layer whose window leaves the context
// behind; both layers non-causal with a window narrower than the block; causal full layers.
std::vector<nlohmann::json> reference_configs() { return test::dflash_attention_variants(); }

TEST(DFlash, BlockMatchesTheNumpyReference) {
  if (!test::python_numpy_available()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy (apt: python3-numpy)";
  Rig r;
  std::vector<std::vector<float>> blocks;
  for (const nlohmann::json& cfg : reference_configs()) {
    SCOPED_TRACE(cfg.dump());
    const std::string d = r.draft(cfg);
    auto draft = DFlashDraft::load(d, *r.target);
    const int n = 9, last = 42, width = 2 * 48;
    const auto feats = test::random_normal(size_t(n * width), 1.0f, 5);
    KvCache cache(draft->kv_shape(8));
    const SeqId seq = cache.create();
    draft->add_context(test::pool(), cache, seq, feats.data(), 5);  // in two chunks: the cache appends
    draft->add_context(test::pool(), cache, seq, feats.data() + 5 * width, n - 5);
    std::vector<float> got, again;
    draft->draft_block(test::pool(), cache, seq, last, &got);
    EXPECT_EQ(cache.length(seq), n);  // the block's rows are gone again
    draft->draft_block(test::pool(), cache, seq, last, &again);
    EXPECT_EQ(got, again);

    const std::string in = r.dir.file("in.bin"), out = r.dir.file("out.bin");
    {
      std::ofstream f(in, std::ios::binary);
      const int32_t head[2] = {n, last};
      f.write(reinterpret_cast<const char*>(head), sizeof(head));
      f.write(reinterpret_cast<const char*>(feats.data()), std::streamsize(feats.size() * sizeof(float)));
    }
    const auto res = test::run_command("/usr/bin/python3 " + test::source_dir() + "/tests/reference/dflash_ref.py " + d +
                                       " " + r.dir.file("target") + " " + in + " " + out + " 2>&1");
    ASSERT_EQ(res.exit_code, 0) << res.output;
    const std::string bytes = read_text_file(out);
    std::vector<float> want(bytes.size() / sizeof(float));
    std::memcpy(want.data(), bytes.data(), bytes.size());
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(want.size(), size_t(7 * 97));
    double mx = 0;
    for (float v : want) mx = std::max(mx, std::fabs(double(v)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * mx) << i;
    blocks.push_back(got);
  }
  for (size_t i = 1; i < blocks.size(); ++i) EXPECT_NE(blocks[i], blocks[0]) << "config " << i << " changed nothing";
}

TEST(DFlash, WhatItDoesNotRunIsRefusedByName) {
  Rig r;
  auto refused = [&](nlohmann::json cfg, std::initializer_list<std::string> parts, std::vector<std::string> extra = {}) {
    const std::string d = r.draft(cfg, std::move(extra));
    test::expect_mentions(test::error_of([&] { DFlashDraft::load(d, *r.target); }), parts);
  };
  nlohmann::json j = draft_config();
  j["layer_types"] = {"sliding_attention", "full_attention"};
  refused(j, {"sliding_window"});  // a sliding layer without its window
  j["layer_types"] = {"chunked_attention", "full_attention"};
  refused(j, {"layer_types[0]", "chunked_attention"});
  j["layer_types"] = {"full_attention"};
  refused(j, {"layer_types", "2 layers"});
  j = draft_config();
  j["dflash_config"]["attention_sink_bias"] = true;
  refused(j, {"attention_sink_bias"});
  j = draft_config();
  j["dflash_config"].erase("mask_token_id");
  refused(j, {"mask_token_id"});
  j = draft_config();
  j["dflash_config"]["mask_token_id"] = 500;
  refused(j, {"mask_token_id 500", "97"});
  j = draft_config();
  j["dflash_config"]["target_layer_ids"] = {0, 3};
  refused(j, {"target layer 3"});
  j = draft_config();
  j["final_logit_softcapping"] = 30.0;
  refused(j, {"final_logit_softcapping"});
  refused(draft_config(), {"lm_head.weight", "not used"}, {"lm_head.weight"});
}


// The draft as llama.cpp's converter (conversion/qwen.py DFlashModel) writes it, from the format's
// definition: Qwen3 `dflash.*` metadata, the tapped layers as layer inputs (ids + 1), the mask as
// tokenizer.ggml.mask_token_id, hidden_norm as enc.output_norm, layers as blk.N (no q/k permutation:
// NEOX RoPE), shapes innermost first.
void write_dflash_gguf(const std::string& hf_dir, const std::string& path, nlohmann::json meta_overrides = nlohmann::json::object(),
                       std::vector<std::string> extra_tensors = {}) {
  const std::map<std::string, std::string> layer = {
      {"input_layernorm", "attn_norm"},        {"post_attention_layernorm", "ffn_norm"},
      {"self_attn.q_proj", "attn_q"},          {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},          {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"},     {"self_attn.k_norm", "attn_k_norm"},
      {"mlp.gate_proj", "ffn_gate"},           {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"}};
  const Checkpoint ck = Checkpoint::open_dir(hf_dir);
  std::vector<test::GgufTensorToWrite> ts;
  for (const std::string& name : ck.names()) {
    std::string g = name == "hidden_norm.weight" ? "enc.output_norm.weight" : name == "norm.weight" ? "output_norm.weight" : name;
    if (name.rfind("layers.", 0) == 0) {
      const size_t dot = name.find('.', 7);
      const std::string rest = name.substr(dot + 1, name.size() - dot - 1 - 7);  // without ".weight"
      g = "blk." + name.substr(7, dot - 7) + "." + layer.at(rest) + ".weight";
    }
    const TensorInfo& t = ck.get(name);
    std::vector<int64_t> dims(t.shape.rbegin(), t.shape.rend());
    ts.push_back({g, kernels::GgmlType::F32, dims, std::string(reinterpret_cast<const char*>(t.data), size_t(t.numel()) * 4)});
  }
  for (const std::string& name : extra_tensors) ts.push_back({name, kernels::GgmlType::F32, {4}, std::string(16, '\0')});
  nlohmann::json meta = {{"general.architecture", "dflash"}, {"dflash.embedding_length", 48},
                         {"dflash.feed_forward_length", 64}, {"dflash.block_count", 2},
                         {"dflash.attention.head_count", 4}, {"dflash.attention.head_count_kv", 2},
                         {"dflash.attention.key_length", 16}, {"dflash.attention.value_length", 16},
                         {"dflash.attention.layer_norm_rms_epsilon", 1e-6}, {"dflash.rope.freq_base", 10000.0},
                         {"dflash.context_length", 512}, {"dflash.block_size", 8}, {"dflash.target_layers", {1, 3}},
                         {"tokenizer.ggml.mask_token_id", 96}};
  meta.update(meta_overrides);
  test::write_gguf(path, meta, ts);
}

// The same draft from its GGUF gives the same block, bit for bit; what the GGUF path cannot run is
// refused naming the file and the key or tensor.
TEST(DFlash, LlamaCppGgufLoadsBitwiseAsTheCheckpoint) {
  Rig r;
  const std::string d = r.draft(), g = r.dir.file("draft.gguf");
  write_dflash_gguf(d, g);
  auto hf = DFlashDraft::load(d, *r.target);
  auto gguf = DFlashDraft::load(g, *r.target);
  EXPECT_EQ(gguf->config().target_layer_ids, hf->config().target_layer_ids);
  EXPECT_EQ(gguf->config().mask_token_id, 96);
  EXPECT_EQ(gguf->config().block_size, 8);
  const int n = 7, width = 2 * 48;
  const auto feats = test::random_normal(size_t(n * width), 1.0f, 8);
  std::vector<std::vector<float>> out;
  for (const DFlashDraft* dr : {hf.get(), gguf.get()}) {
    KvCache cache(dr->kv_shape(8));
    const SeqId seq = cache.create();
    dr->add_context(test::pool(), cache, seq, feats.data(), n);
    out.emplace_back();
    dr->draft_block(test::pool(), cache, seq, 17, &out.back());
  }
  EXPECT_EQ(out[0], out[1]);
  auto refused = [&](nlohmann::json meta, std::vector<std::string> extra, std::initializer_list<std::string> parts) {
    const std::string bad = r.dir.file("bad" + std::to_string(r.drafts++) + ".gguf");
    write_dflash_gguf(d, bad, std::move(meta), std::move(extra));
    test::expect_mentions(test::error_of([&] { DFlashDraft::load(bad, *r.target); }), parts);
  };
  refused({{"dflash.target_layers", {0, 2}}}, {}, {"dflash.target_layers", "from 1"});
  refused({{"general.architecture", "eagle3"}}, {}, {"'eagle3'", "dflash"});
  refused({{"dflash.attention.sliding_window", 4}}, {}, {"dflash.attention.sliding_window", "GGUF"});
  refused(nlohmann::json::object(), {"token_embd.weight"}, {"token_embd.weight", "not used"});
}

// Served through the engine (--spec-method dflash): greedy output is the target's token for token
// with every chain length, including more than a block holds (cut to B - 1 = 7).
// One block, two shapes: the chain is the block's greedy tokens; a tree over the positions'
// top-k starts down that chain (its path of first children), adds each position's runner-up where its path
// probability ranks, in best-first order (scores never rise), and two sequences drafted together
// get what each gets alone.
TEST(DFlash, BlockTreesAreBestFirstOverEachPositionsTopK) {
  Rig r;
  auto draft = DFlashDraft::load(r.draft(), *r.target);
  const int width = 2 * 48, n = 6;
  // Sequence i's prompt taps and first token come from input[i] (seeded), its shape from shapes[i].
  auto propose = [&](const std::vector<int>& input, const std::vector<TreeShape>& shapes) {
    DFlashProposer p(*draft, 16, test::pool());
    std::vector<Proposer::Request> requests;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto taps = test::random_normal(size_t(n * width), 1.0f, uint64_t(40 + input[i]));
      p.begin(SeqId(i), std::vector<int>(size_t(n), 7), taps.data(), 11 + input[i]);
      requests.push_back({SeqId(i), shapes[i]});
    }
    std::vector<DraftTree> trees;
    p.propose(requests, &trees);
    return trees;
  };
  const DraftTree chain = propose({0}, {TreeShape::chain(5)})[0];
  const DraftTree tree = propose({0}, {TreeShape{3, 5, 12}})[0];
  ASSERT_EQ(chain.size(), 5);
  ASSERT_EQ(tree.size(), 12);
  std::vector<int> first_path;  // the tree's path of first children
  for (int node = 0, parent = -1; node < tree.size(); ++node)
    if (tree.parents[size_t(node)] == parent && int(first_path.size()) == tree.depths()[size_t(node)] - 1) {
      first_path.push_back(tree.tokens[size_t(node)]);
      parent = node;
    }
  ASSERT_GE(first_path.size(), 2u);
  EXPECT_EQ(first_path, std::vector<int>(chain.tokens.begin(), chain.tokens.begin() + long(first_path.size())));
  for (int i = 1; i < tree.size(); ++i) {
    EXPECT_LE(tree.scores[size_t(i)], tree.scores[size_t(i - 1)]) << "node " << i;
    EXPECT_LT(tree.parents[size_t(i)], i);
  }
  std::set<std::pair<int, int>> siblings;  // (parent, token): no token twice under one parent
  for (int i = 0; i < tree.size(); ++i) EXPECT_TRUE(siblings.insert({tree.parents[size_t(i)], tree.tokens[size_t(i)]}).second);
  const DraftTree other = propose({1}, {TreeShape{3, 5, 12}})[0];
  const auto both = propose({0, 1}, {TreeShape::chain(5), TreeShape{3, 5, 12}});
  EXPECT_EQ(both[0].tokens, chain.tokens);
  EXPECT_EQ(both[1].tokens, other.tokens);
  EXPECT_EQ(both[1].parents, other.parents);
}

TEST(DFlash, GreedyOutputIsTheTargets) {
  Rig r;
  const std::string d = r.draft();
  Tokenizer tok = Tokenizer::bytes();
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 24; ++i) prompts.push_back({1, 3 + i % 50, 7 + (i * 13) % 50, 4 + i % 7});
  SpecOptions o;
  o.method = "dflash";
  o.draft_dir = d;
  EXPECT_GT(test::expect_greedy_equal(*r.target, tok, {}, prompts, o, 32,
                                      {"k=1", "k=3", "k=7", "k=12", "topk=2,depth=4,budget=8", "topk=3,depth=7,budget=20", "auto"}),
            0);
  for (size_t i = 1; i < reference_configs().size(); ++i) {  // sliding-window and causal layers
    o.draft_dir = r.draft(reference_configs()[i]);
    EXPECT_GT(test::expect_greedy_equal(*r.target, tok, {}, prompts, o, 32, {"k=7", "topk=2,depth=4,budget=8", "auto"}), 0)
        << reference_configs()[i].dump();
  }
  SpecOptions vllm;
  apply_speculative_config(vllm, R"({"method": "dflash", "model": ")" + d + R"(", "num_speculative_tokens": 7})");
  EXPECT_EQ(SpecSetup(vllm, *r.target).describe(), "DFlash draft " + d + " (block 8, chain k=7)");
}

}  // namespace
}  // namespace eaglet
