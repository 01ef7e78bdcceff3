// Function-preserving widening (convert/widen.h): the wide target gives the small target's logits
// and hidden states, the wide draft the small draft's logits from them, for every draft variant
// widening takes; what it cannot widen is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_config.h"
#include "models/dflash.h"
#include "models/eagle3.h"
#include "models/model.h"
#include "convert/widen.h"
#include "support/synthetic_dflash.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

// A wide shape for the tiny test models: every dimension grows (head_dim 48 is a multiple of the
// target's 16 and the draft's 12), layers 3 -> 7, F32 so only summation order differs.
WidenShape test_shape() {
  WidenShape s;
  s.hidden = 96, s.heads = 8, s.kv_heads = 2, s.head_dim = 48, s.intermediate = 130, s.layers = 7;
  s.dtype = DType::F32;
  s.seed = 3;
  return s;
}

struct ForwardRun {
  std::vector<float> logits, taps;
};
ForwardRun forward_all(Model& m, const std::vector<int>& tokens, const std::vector<int>& taps) {
  KvCache cache(m.kv_shape(4, 16));
  ForwardBatch b;
  b.chunks.push_back(SeqChunk{cache.create(), tokens, {}});
  for (size_t i = 0; i < tokens.size(); ++i) b.chunks[0].logit_rows.push_back(int(i));
  b.tap_layers = taps;
  ForwardOutput out;
  m.forward(test::pool(), cache, b, &out);
  return {out.logits, out.taps};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(double(v)));
  ASSERT_GT(mx, 0) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::fabs(double(got[i]) - want[i]), 1e-4 * mx) << what << " element " << i;
}

std::vector<int> prompt(int vocab) {
  std::vector<int> t;
  for (int i = 0; i < 23; ++i) t.push_back((i * 31 + 7) % vocab);
  return t;
}

class WidenTarget : public ::testing::TestWithParam<bool> {};

TEST_P(WidenTarget, SameLogitsAndHiddenStates) {
  test::TempDir dir;
  test::TinyModelSpec ts;
  ts.tie_embeddings = GetParam();
  test::write_tiny_model(dir.file("small"), ts);
  widen_llama(dir.file("small"), dir.file("wide"), test_shape());
  auto small = load_model(dir.file("small")), wide = load_model(dir.file("wide"));
  EXPECT_EQ(wide->config().hidden, 96);
  EXPECT_EQ(wide->config().num_layers, 7);
  const std::vector<int> live = widened_live_layers(ts.layers, 7);
  EXPECT_EQ(live, (std::vector<int>{0, 3, 6}));
  const auto tokens = prompt(ts.vocab);
  // Residual stream entering original layer i = entering wide layer live[i]; the output = wide L.
  const ForwardRun a = forward_all(*small, tokens, {1, 2, 3}), b = forward_all(*wide, tokens, {live[1], live[2], 7});
  expect_close(b.logits, a.logits, "logits");
  std::vector<float> live_dims, dead_dims;  // wide taps: the original values, then exact zeros
  for (size_t r = 0; r < b.taps.size() / 96; ++r) {
    live_dims.insert(live_dims.end(), b.taps.begin() + long(r * 96), b.taps.begin() + long(r * 96 + 48));
    dead_dims.insert(dead_dims.end(), b.taps.begin() + long(r * 96 + 48), b.taps.begin() + long(r * 96 + 96));
  }
  expect_close(live_dims, a.taps, "taps");
  EXPECT_EQ(dead_dims, std::vector<float>(dead_dims.size(), 0.0f));
  const JsonConfig c = JsonConfig::load(dir.file("wide/config.json"));
  EXPECT_EQ(c.sub("widened_from").get_int_list("live_layers"), (std::vector<int64_t>{0, 3, 6}));
}

INSTANTIATE_TEST_SUITE_P(Embeddings, WidenTarget, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "tied" : "untied"; });

// A 6-layer tiny target widened to 11 layers with the draft `write_draft` writes into `draft`:
// both sides loaded (the drafts by the caller, which knows their kind).
struct WidenedPair {
  test::TempDir dir;
  test::TinyModelSpec ts;
  std::unique_ptr<Model> small, wide;
  explicit WidenedPair(const std::function<void(const std::string& draft)>& write_draft) {
    ts.layers = 6;
    test::write_tiny_model(dir.file("small"), ts);
    write_draft(dir.file("draft"));
    WidenShape s = test_shape();
    s.layers = 11;
    widen_llama(dir.file("small"), dir.file("wide"), s);
    widen_draft(dir.file("draft"), dir.file("wide"), dir.file("wide_draft"), s);
    small = load_model(dir.file("small"));
    wide = load_model(dir.file("wide"));
  }
};

struct DraftVariant {
  std::string name;
  test::DraftSpec spec;
};
class WidenDraft : public ::testing::TestWithParam<DraftVariant> {};

// The wide draft fed the wide target's taps gives the small draft's logits fed the small target's.
TEST_P(WidenDraft, SameDraftLogits) {
  const test::DraftSpec ds = GetParam().spec;
  WidenedPair p([&](const std::string& d) { test::write_draft(d, ds); });
  auto d_small = Eagle3Draft::load(p.dir.file("draft"), *p.small), d_wide = Eagle3Draft::load(p.dir.file("wide_draft"), *p.wide);
  const auto tokens = prompt(p.ts.vocab);
  const int T = int(tokens.size()) - 1;
  auto draft_logits = [&](Model& m, const Eagle3Draft& d) {
    const ForwardRun r = forward_all(m, tokens, d.config().aux_layers);
    const int H = d.config().hidden;
    std::vector<float> g(size_t(T * H)), next(size_t(T * H)), logits;
    d.fuse_aux(test::pool(), r.taps.data(), T, g.data());
    KvCache cache(d.kv_shape(4, 16));
    d.forward(test::pool(), cache, {Eagle3Rows{cache.create(), std::vector<int>(tokens.begin() + 1, tokens.end())}}, g.data(),
              next.data(), &logits, /*all_logits=*/true);
    return logits;
  };
  expect_close(draft_logits(*p.wide, *d_wide), draft_logits(*p.small, *d_small), "draft logits");
}

DraftVariant variant(const std::string& name, std::function<void(test::DraftSpec&)> f) {
  test::DraftSpec s;
  s.aux_ids = {1, 3, 5};
  f(s);
  return {name, s};
}

INSTANTIATE_TEST_SUITE_P(
    Variants, WidenDraft,
    ::testing::Values(variant("midlayer_gqa", [](auto&) {}),
                      variant("vllm_keys_default_taps", [](auto& s) { s.vllm_keys = true; s.aux_ids.clear(); }),
                      variant("fc_norm_norm_output_own_embed", [](auto& s) { s.fc_norm = true; s.norm_output = true; s.own_embed = true; }),
                      variant("shared_lm_head", [](auto& s) { s.own_lm_head = false; }),
                      variant("pruned_vocab_d2t", [](auto& s) { s.draft_vocab = 40; }),
                      // SGLang-style ids only under eagle_config (first id 1: output of layer i)
                      variant("ids_under_eagle_config", [](auto& s) { s.aux_in_eagle_config = true; })),
    [](const auto& info) { return info.param.name; });

// A DFlash draft (Qwen3 layers: per-head q/k norms, context keys from the target's taps) widened
// beside its target drafts the same block: the wide block's logits fed the wide target's taps
// equal the small one's.
TEST(WidenDFlash, SameBlockLogits) {
  WidenedPair p([](const std::string& d) { test::write_dflash_draft(d, test::dflash_draft_config()); });
  auto d_small = DFlashDraft::load(p.dir.file("draft"), *p.small), d_wide = DFlashDraft::load(p.dir.file("wide_draft"), *p.wide);
  const std::vector<int> live = widened_live_layers(6, 11);
  EXPECT_EQ(d_wide->config().target_layer_ids, (std::vector<int>{live[0], live[2]}));
  EXPECT_EQ(d_wide->config().hidden, 96);
  EXPECT_EQ(d_wide->config().block_size, d_small->config().block_size);
  const auto tokens = prompt(p.ts.vocab);
  auto block_logits = [&](Model& m, const DFlashDraft& d) {
    const ForwardRun r = forward_all(m, tokens, d.config().taps);
    KvCache cache(d.kv_shape(4));
    const SeqId seq = cache.create();
    d.add_context(test::pool(), cache, seq, r.taps.data(), int64_t(tokens.size()));
    std::vector<float> logits;
    d.draft_block(test::pool(), cache, seq, tokens.back(), &logits);
    return logits;
  };
  expect_close(block_logits(*p.wide, *d_wide), block_logits(*p.small, *d_small), "block logits");
}

TEST(Widen, RefusesWhatItCannotWidenByName) {
  test::TempDir dir;
  test::TinyModelSpec ts;
  test::write_tiny_model(dir.file("small"), ts);
  WidenShape s = test_shape();
  s.head_dim = 40;  // not a multiple of 16
  test::expect_mentions(test::error_of([&] { widen_llama(dir.file("small"), dir.file("w"), s); }), {"config.json", "head_dim"});
  s = test_shape();
  s.hidden = 32;
  test::expect_mentions(test::error_of([&] { widen_llama(dir.file("small"), dir.file("w"), s); }), {"hidden 48 -> 32"});
  ts.architecture = "Qwen3ForCausalLM";
  test::write_tiny_model(dir.file("qwen"), ts);
  test::expect_mentions(test::error_of([&] { widen_llama(dir.file("qwen"), dir.file("w"), test_shape()); }),
                        {"architectures", "Qwen3ForCausalLM"});
  test::DraftSpec ds;
  ds.speculators_config = true;
  test::write_draft(dir.file("spec_draft"), ds);
  widen_llama(dir.file("small"), dir.file("wide"), test_shape());
  test::expect_mentions(test::error_of([&] { widen_eagle3(dir.file("spec_draft"), dir.file("wide"), dir.file("wd"), test_shape()); }),
                        {"transformer_layer_config"});
  test::expect_mentions(test::error_of([&] { widen_eagle3(dir.file("spec_draft"), dir.file("small"), dir.file("wd"), test_shape()); }),
                        {"transformer_layer_config"});
  ds = test::DraftSpec{};
  test::write_draft(dir.file("draft"), ds);
  test::expect_mentions(test::error_of([&] { widen_eagle3(dir.file("draft"), dir.file("small"), dir.file("wd"), test_shape()); }),
                        {"widened_from"});
  test::write_dflash_draft(dir.file("dflash"), test::dflash_draft_config(), {"layers.0.self_attn.q_proj.bias"});
  test::expect_mentions(test::error_of([&] { widen_draft(dir.file("dflash"), dir.file("wide"), dir.file("wd"), test_shape()); }),
                        {"layers.0.self_attn.q_proj.bias", "not one widening knows"});
  test::expect_mentions(test::error_of([&] { widen_draft(dir.file("dflash"), dir.file("small"), dir.file("wd"), test_shape()); }),
                        {"widened_from"});
}

}  // namespace
}  // namespace eaglet
