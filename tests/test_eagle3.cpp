// EAGLE-3 drafts in every key/config variant against the numpy reference (tests/reference/
// eagle3_ref.py), aux-layer numbering, and malformed drafts.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_config.h"
#include "io/mapped_file.h"
#include "models/eagle3.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

struct Variant {
  std::string name;
  test::DraftSpec spec;
  DraftSemantics semantics = DraftSemantics::Vllm;
};

class DraftVsReference : public ::testing::TestWithParam<Variant> {};

TEST_P(DraftVsReference, ForwardMatches) {
  if (!test::python_numpy_available()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy (apt: python3-numpy)";
  test::DraftSpec ds = GetParam().spec;
  test::TempDir dir;
  test::TinyModelSpec ts;
  ts.hidden = ds.target_hidden;
  ts.vocab = ds.vocab;
  ts.layers = 6;
  test::write_tiny_model(dir.file("target"), ts);
  test::write_draft(dir.file("draft"), ds);
  auto target = load_model(dir.file("target"));
  auto draft = Eagle3Draft::load(dir.file("draft"), *target, {.semantics = GetParam().semantics});
  const auto& c = draft->config();
  const int T = 9, H = c.hidden, Ht = c.target_hidden, Vd = c.draft_vocab;
  std::vector<int> tokens;
  for (int i = 0; i <= T; ++i) tokens.push_back((i * 29 + 5) % ds.vocab);
  auto aux = test::random_normal(size_t(T * 3 * Ht), 1.0f, 5);

  // eaglet: T exact positions, then one step on its own state.
  KvCache cache(draft->kv_shape(4, 16));
  SeqId s = cache.create();
  std::vector<float> g(size_t(T * H)), out(size_t(T * H)), logits, all_logits;
  draft->fuse_aux(test::pool(), aux.data(), T, g.data());
  draft->forward(test::pool(), cache, {Eagle3Rows{s, std::vector<int>(tokens.begin(), tokens.begin() + T)}}, g.data(), out.data(),
                 &all_logits, /*all_logits=*/true);
  std::vector<float> g2(out.end() - H, out.end()), out2(static_cast<size_t>(H));
  draft->forward(test::pool(), cache, {Eagle3Rows{s, {tokens[size_t(T)]}}}, g2.data(), out2.data(), &logits);

  test::TempDir tmp;
  {
    std::ofstream in(tmp.file("in.bin"), std::ios::binary);
    for (int t : tokens) in.write(reinterpret_cast<const char*>(&t), 4);
    in.write(reinterpret_cast<const char*>(aux.data()), std::streamsize(aux.size() * 4));
  }
  auto r = test::run_command("/usr/bin/python3 " + test::source_dir() + "/tests/reference/eagle3_ref.py " +
                             dir.file("draft") + " " + dir.file("target") + " " + tmp.file("in.bin") + " " +
                             tmp.file("out.bin") + " " + std::to_string(T) + " " +
                             draft_semantics_name(GetParam().semantics) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<float> ref_logits(size_t((T + 1) * Vd)), ref_states(size_t((T + 1) * H));
  std::ifstream ref(tmp.file("out.bin"), std::ios::binary);
  ref.read(reinterpret_cast<char*>(ref_logits.data()), std::streamsize(ref_logits.size() * 4));
  ref.read(reinterpret_cast<char*>(ref_states.data()), std::streamsize(ref_states.size() * 4));
  ASSERT_TRUE(bool(ref));
  std::vector<float> got_logits = all_logits, got_states = out;
  got_logits.insert(got_logits.end(), logits.begin(), logits.end());
  got_states.insert(got_states.end(), out2.begin(), out2.end());
  auto check = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    double mx = 0;
    for (float v : want) mx = std::max(mx, std::fabs(double(v)));
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_LE(std::fabs(double(got[i]) - want[i]), 1e-4 * mx) << what << " element " << i;
  };
  check(got_logits, ref_logits, "logits");
  check(got_states, ref_states, "states");
}

Variant variant(const std::string& name, std::function<void(test::DraftSpec&)> f,
                DraftSemantics semantics = DraftSemantics::Vllm) {
  test::DraftSpec s;
  f(s);
  return {name, s, semantics};
}

INSTANTIATE_TEST_SUITE_P(
    Variants, DraftVsReference,
    ::testing::Values(
        variant("midlayer_gqa", [](auto&) {}),
        variant("vllm_keys_mha", [](auto& s) { s.vllm_keys = true; s.kv_heads = 4; }),
        variant("speculators_config", [](auto& s) { s.speculators_config = true; s.vllm_keys = true; s.norm_before_residual = true; }),
        variant("norm_before_fc", [](auto& s) { s.speculators_config = true; s.norm_before_fc = true; }),
        variant("eagle31_fc_norm_norm_output", [](auto& s) { s.fc_norm = true; s.norm_output = true; s.own_embed = true; }),
        variant("shared_embed_and_lm_head", [](auto& s) { s.own_lm_head = false; }),
        variant("target_hidden_differs", [](auto& s) { s.target_hidden = 64; s.own_embed = true; }),
        variant("pruned_vocab_d2t", [](auto& s) { s.draft_vocab = 40; }),
        variant("qwen3_layer_with_bias", [](auto& s) { s.qwen3_layer = true; s.attention_bias = true; }),
        variant("speculators_qwen3_layer", [](auto& s) { s.speculators_config = true; s.qwen3_layer = true; }),
        variant("llama_attention_bias", [](auto& s) { s.attention_bias = true; }),
        variant("transformers_v5_rope", [](auto& s) { s.rope_parameters = true; s.rope_theta = 5e5; }),
        variant("specforge_legacy_norm_output", [](auto& s) { s.norm_output = true; }, DraftSemantics::SpecForgeLegacy),
        variant("specforge_legacy_plain", [](auto&) {}, DraftSemantics::SpecForgeLegacy),
        variant("two_layers", [](auto& s) { s.layers = 2; }),
        variant("three_layers_vllm_keys_hidden_norms", [](auto& s) {
          s.layers = 3;
          s.vllm_keys = true;
          s.hidden_norm_in_every_layer = true;
          s.norm_before_residual = true;
        }),
        variant("two_qwen3_layers_eagle31", [](auto& s) {
          s.layers = 2;
          s.qwen3_layer = true;
          s.fc_norm = true;
          s.norm_output = true;
        })),
    [](const auto& info) { return info.param.name; });

TEST(Eagle3Config, AuxNumbering) {
  auto parse = [](nlohmann::json j, AuxNumbering n, int layers = 30) {
    j["hidden_size"] = 8;
    j["intermediate_size"] = 8;
    j["num_attention_heads"] = 2;
    j["vocab_size"] = 10;
    return parse_eagle3_config(JsonConfig(j, "draft/config.json"), layers, {.numbering = n}).aux_layers;
  };
  EXPECT_EQ(parse({}, AuxNumbering::Input), (std::vector<int>{2, 15, 27}));  // default (2, L/2, L-3)
  EXPECT_EQ(parse({}, AuxNumbering::Output), (std::vector<int>{2, 15, 27}));  // defaults are ours already
  EXPECT_EQ(parse({{"eagle_aux_hidden_state_layer_ids", {1, 29, 14}}}, AuxNumbering::Input), (std::vector<int>{1, 14, 29}));
  // SGLang/SpecForge/TorchSpec "output of layer i" ids are ours minus one.
  EXPECT_EQ(parse({{"eagle_aux_hidden_state_layer_ids", {1, 14, 26}}}, AuxNumbering::Output), (std::vector<int>{2, 15, 27}));
  EXPECT_EQ(parse({{"eagle_config", {{"eagle_aux_hidden_state_layer_ids", {2, 30, 57}}}}}, AuxNumbering::Input, 60),
            (std::vector<int>{2, 30, 57}));
  // Auto: top-level ids as vLLM reads them; ids only under eagle_config as SGLang reads them
  // (first id 1: "output of layer i", +1; else as they are). They used to be taken one layer early.
  EXPECT_EQ(parse({{"eagle_aux_hidden_state_layer_ids", {1, 17, 33}}}, AuxNumbering::Auto, 60), (std::vector<int>{1, 17, 33}));
  EXPECT_EQ(parse({{"eagle_config", {{"eagle_aux_hidden_state_layer_ids", {1, 17, 33}}}}}, AuxNumbering::Auto, 60),
            (std::vector<int>{2, 18, 34}));
  EXPECT_EQ(parse({{"eagle_config", {{"eagle_aux_hidden_state_layer_ids", {2, 30, 57}}}}}, AuxNumbering::Auto, 60),
            (std::vector<int>{2, 30, 57}));
  EXPECT_EQ(parse({{"eagle_aux_hidden_state_layer_ids", {2, 30, 57}}, {"eagle_config", {{"eagle_aux_hidden_state_layer_ids", {1, 29, 56}}}}},
                  AuxNumbering::Auto, 60),
            (std::vector<int>{2, 30, 57}));  // both: the top level wins, as in vLLM
  EXPECT_THROW(parse({{"eagle_aux_hidden_state_layer_ids", {2, 15, 31}}}, AuxNumbering::Input), Error);
  EXPECT_THROW(parse({{"eagle_aux_hidden_state_layer_ids", {2, 15}}}, AuxNumbering::Input), Error);
  EXPECT_THROW(parse({{"draft_vocab_size", 11}}, AuxNumbering::Input), Error);
}

std::string draft_error(const test::DraftSpec& ds, const std::function<void(const std::string&)>& corrupt = {}) {
  test::TempDir dir;
  test::TinyModelSpec ts;
  ts.layers = 6;
  test::write_tiny_model(dir.file("target"), ts);
  test::write_draft(dir.file("draft"), ds);
  if (corrupt) corrupt(dir.file("draft"));
  auto target = load_model(dir.file("target"));
  try {
    Eagle3Draft::load(dir.file("draft"), *target);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Eagle3Config, MalformedDraftsAreClearErrors) {
  test::DraftSpec s;
  s.draft_vocab = 40;
  s.write_d2t = false;
  EXPECT_NE(draft_error(s).find("no 'd2t' tensor"), std::string::npos);
  test::DraftSpec big;
  big.draft_vocab = 200;
  EXPECT_NE(draft_error(big).find("draft_vocab_size 200 is larger than vocab_size 97"), std::string::npos);
  test::DraftSpec wide;
  wide.target_hidden = 64;  // the target has 48
  wide.own_embed = true;
  EXPECT_NE(draft_error(wide).find("target_hidden_size 64 differs"), std::string::npos);
  // fc.weight written for a different target width than the config says.
  std::string e = draft_error(test::DraftSpec{}, [](const std::string& d) {
    auto cfg = nlohmann::json::parse(read_text_file(d + "/config.json"));
    cfg["hidden_size"] = 40;
    test::write_text(d + "/config.json", cfg.dump());
  });
  EXPECT_NE(e.find("'fc.weight' has shape [48, 144], expected [40, 144]"), std::string::npos) << e;
  test::DraftSpec ids;
  ids.aux_ids = {2, 3, 9};
  EXPECT_NE(draft_error(ids).find("aux layer id 9 is outside the target's layers [0, 6]"), std::string::npos);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// Adds tensors to a draft checkpoint (rewriting model.safetensors with the old ones kept).
void add_tensors(const std::string& dir, std::vector<TensorToWrite> extra) {
  std::vector<TensorToWrite> all;
  {
    const Checkpoint ck = Checkpoint::open_dir(dir);
    for (const std::string& n : ck.names()) {
      const TensorInfo& t = ck.get(n);
      all.push_back({n, t.dtype, t.shape, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
  }
  for (auto& t : extra) all.push_back(std::move(t));
  write_safetensors(dir + "/model.safetensors", all);
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
  auto cfg = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  f(cfg);
  test::write_text(dir + "/config.json", cfg.dump());
}

struct Pair {
  test::TempDir dir;
  std::unique_ptr<Model> target;
  Pair() {
    test::TinyModelSpec ts;
    ts.layers = 6;
    test::write_tiny_model(dir.file("target"), ts);
    target = load_model(dir.file("target"));
  }
  // The draft's logits for a fixed prompt and random taps (all rows).
  std::vector<float> logits(const std::string& draft_dir, bool allow_unused = false) {
    auto d = Eagle3Draft::load(draft_dir, *target, {.numbering = AuxNumbering::Input, .allow_unused_tensors = allow_unused});
    return test::fixed_prompt_logits(*d);
  }
  std::string error(const std::string& draft_dir) {
    return test::error_of([&] { Eagle3Draft::load(draft_dir, *target); });
  }
};

// transformers v5 keeps rope_theta and the scaling fields in rope_parameters; it used to be read
// as theta 10000 without a word.
TEST(Eagle3Flavours, RopeParametersOfTransformersV5) {
  auto rope = [](nlohmann::json j) { return Rope::from_config(JsonConfig(j, "config.json"), 16); };
  const Rope v4 = rope({{"rope_theta", 1e6}}), v5 = rope({{"rope_parameters", {{"rope_theta", 1e6}, {"rope_type", "default"}}}});
  EXPECT_EQ(v5.inv_freq, v4.inv_freq);
  EXPECT_NE(v5.inv_freq, rope(nlohmann::json::object()).inv_freq);
  const nlohmann::json llama3 = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                 {"original_max_position_embeddings", 8192}};
  nlohmann::json nested = llama3;
  nested["rope_theta"] = 5e5;
  EXPECT_EQ(rope({{"rope_parameters", nested}}).inv_freq, rope({{"rope_theta", 5e5}, {"rope_scaling", llama3}}).inv_freq);
  EXPECT_EQ(rope({{"rope_parameters", {{"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}}}}).rot_dim, 8);
  test::expect_mentions(test::error_of([&] { rope({{"rope_theta", 1e4}, {"rope_parameters", {{"rope_theta", 1e6}}}}); }),
                        {"rope_theta", "rope_parameters.rope_theta", "disagree"});
}

// vLLM reads norm_before_fc (and the other flavour flags) from eagle_config first: a draft that
// keeps it there must apply input_norm (it used to be skipped).
TEST(Eagle3Flavours, FlagsUnderEagleConfig) {
  Pair p;
  test::DraftSpec ds;
  ds.norm_before_fc = true;
  test::write_draft(p.dir.file("top"), ds);
  test::write_draft(p.dir.file("nested"), ds);
  edit_config(p.dir.file("nested"), [](nlohmann::json& c) {
    c.erase("norm_before_fc");
    c["eagle_config"] = {{"norm_before_fc", true}};
  });
  EXPECT_EQ(p.logits(p.dir.file("nested")), p.logits(p.dir.file("top")));
}

// With attention_bias vLLM's Llama layer has an o_proj bias as well as q/k/v ones.
TEST(Eagle3Flavours, AttentionBiasIncludesOutputProjection) {
  Pair p;
  test::DraftSpec ds;
  const int qd = ds.heads * ds.head_dim, kvd = ds.kv_heads * ds.head_dim;
  auto biased = [&](const std::string& name, float o_value, bool with_o) {
    test::write_draft(p.dir.file(name), ds);
    edit_config(p.dir.file(name), [](nlohmann::json& c) { c["attention_bias"] = true; });
    std::vector<TensorToWrite> b = {
        {"midlayer.self_attn.q_proj.bias", DType::F32, {qd}, test::float_bytes(std::vector<float>(size_t(qd), 0.0f), DType::F32)},
        {"midlayer.self_attn.k_proj.bias", DType::F32, {kvd}, test::float_bytes(std::vector<float>(size_t(kvd), 0.0f), DType::F32)},
        {"midlayer.self_attn.v_proj.bias", DType::F32, {kvd}, test::float_bytes(std::vector<float>(size_t(kvd), 0.0f), DType::F32)}};
    if (with_o)
      b.push_back({"midlayer.self_attn.o_proj.bias", DType::F32, {ds.hidden},
                   test::float_bytes(std::vector<float>(size_t(ds.hidden), o_value), DType::F32)});
    add_tensors(p.dir.file(name), b);
    return p.dir.file(name);
  };
  test::write_draft(p.dir.file("plain"), ds);
  EXPECT_EQ(p.logits(biased("zero", 0.0f, true)), p.logits(p.dir.file("plain")));  // zero biases change nothing
  EXPECT_NE(p.logits(biased("shifted", 0.5f, true)), p.logits(p.dir.file("plain")));  // the o_proj bias is applied
  test::expect_mentions(p.error(biased("no_o", 0.0f, false)), {"self_attn.o_proj.bias"});
}

// A flavour eaglet does not run is refused by name, never run with part of its math.
TEST(Eagle3Flavours, UnknownTensorsLayersAndLayerTypesAreRefused) {
  Pair p;
  test::DraftSpec ds;
  test::write_draft(p.dir.file("qk"), ds);
  add_tensors(p.dir.file("qk"), {{"midlayer.self_attn.q_norm.weight", DType::F32, {ds.head_dim},
                                  test::float_bytes(std::vector<float>(size_t(ds.head_dim), 1.0f), DType::F32)}});
  test::expect_mentions(p.error(p.dir.file("qk")), {"midlayer.self_attn.q_norm.weight", "--allow-unused-draft-tensors"});
  test::write_draft(p.dir.file("plain"), ds);
  EXPECT_EQ(p.logits(p.dir.file("qk"), /*allow_unused=*/true), p.logits(p.dir.file("plain")));

  // A config that says two layers over a one-layer checkpoint names the missing layer; a second
  // layer's tensors under a one-layer config are unused and refused (both ran as one layer before).
  test::write_draft(p.dir.file("deep"), ds);
  edit_config(p.dir.file("deep"), [](nlohmann::json& c) { c["num_hidden_layers"] = 2; });
  test::expect_mentions(p.error(p.dir.file("deep")), {"layers.1.self_attn.q_proj.weight"});
  test::DraftSpec two = ds;
  two.layers = 2;
  test::write_draft(p.dir.file("two"), two);
  edit_config(p.dir.file("two"), [](nlohmann::json& c) { c["num_hidden_layers"] = 1; });
  test::expect_mentions(p.error(p.dir.file("two")), {"tensor 'layers.1.", "not used", "layers=1"});

  // A Qwen3 layer (speculators' layer model_type, or vLLM's Eagle3Qwen3ForCausalLM) needs its
  // q/k norms; it used to run as a Llama layer.
  test::DraftSpec sp;
  sp.speculators_config = true;
  test::write_draft(p.dir.file("qwen3"), sp);
  edit_config(p.dir.file("qwen3"), [](nlohmann::json& c) { c["transformer_layer_config"]["model_type"] = "qwen3"; });
  test::expect_mentions(p.error(p.dir.file("qwen3")), {"self_attn.q_norm.weight"});
  test::write_draft(p.dir.file("gemma"), sp);
  edit_config(p.dir.file("gemma"), [](nlohmann::json& c) { c["transformer_layer_config"]["model_type"] = "gemma2"; });
  test::expect_mentions(p.error(p.dir.file("gemma")), {"model_type 'gemma2'"});
  test::write_draft(p.dir.file("mla"), ds);
  edit_config(p.dir.file("mla"), [](nlohmann::json& c) { c["architectures"] = {"Eagle3DeepseekV2ForCausalLM"}; });
  test::expect_mentions(p.error(p.dir.file("mla")), {"architecture 'Eagle3DeepseekV2ForCausalLM'"});
  test::write_draft(p.dir.file("sliding"), ds);
  edit_config(p.dir.file("sliding"), [](nlohmann::json& c) { c["layer_types"] = {"sliding_attention"}; });
  test::expect_mentions(p.error(p.dir.file("sliding")), {"sliding_attention"});
}

// A Qwen3-layer draft read as a Llama layer would leave its q/k norms out: refused by name. (Its
// math is checked against the numpy reference in DraftVsReference.)
TEST(Eagle3Flavours, Qwen3LayerTensorsAreNotDroppedSilently) {
  Pair p;
  test::DraftSpec ds;
  ds.qwen3_layer = true;
  test::write_draft(p.dir.file("qwen3"), ds);
  edit_config(p.dir.file("qwen3"), [](nlohmann::json& c) { c["architectures"] = {"LlamaForCausalLMEagle3"}; });
  test::expect_mentions(p.error(p.dir.file("qwen3")), {"self_attn.k_norm.weight' (and 1 more)", "not used", "layer=llama"});
}

// SpecForge between its PRs #568 and #879 fed the pre-norm state back whatever norm_output said;
// --draft-semantics specforge-legacy runs such drafts as trained, vllm (the default) as vLLM does.
TEST(Eagle3Flavours, SpecForgeLegacySemantics) {
  Pair p;
  test::DraftSpec ds;
  ds.norm_output = true;
  test::write_draft(p.dir.file("normed"), ds);
  test::DraftSpec plain_spec;
  test::write_draft(p.dir.file("plain"), plain_spec);
  auto run = [&](const std::string& d, DraftSemantics s) {
    auto draft = Eagle3Draft::load(d, *p.target, {.numbering = AuxNumbering::Input, .semantics = s});
    const int T = 5, H = draft->config().hidden;
    const auto aux = test::random_normal(size_t(T * 3 * draft->config().target_hidden), 1.0f, 11);
    std::vector<float> g(size_t(T * H)), next(size_t(T * H)), out;
    draft->fuse_aux(test::pool(), aux.data(), T, g.data());
    KvCache cache(draft->kv_shape(4, 16));
    draft->forward(test::pool(), cache, {Eagle3Rows{cache.create(), {5, 9, 2, 7, 30}}}, g.data(), next.data(), &out, true);
    return std::make_pair(out, next);
  };
  // Legacy + norm_output: lm_head reads norm(out) and out is fed back, i.e. plain EAGLE-3.
  EXPECT_EQ(run(p.dir.file("normed"), DraftSemantics::SpecForgeLegacy), run(p.dir.file("plain"), DraftSemantics::Vllm));
  EXPECT_NE(run(p.dir.file("normed"), DraftSemantics::Vllm).second, run(p.dir.file("plain"), DraftSemantics::Vllm).second);
  // Legacy without norm_output: lm_head reads out itself.
  EXPECT_NE(run(p.dir.file("plain"), DraftSemantics::SpecForgeLegacy).first, run(p.dir.file("plain"), DraftSemantics::Vllm).first);
  test::expect_mentions(test::error_of([] { parse_draft_semantics("specforge"); }), {"--draft-semantics", "specforge-legacy"});
}

// The loader says in one line what it resolved and from where.
TEST(Eagle3Flavours, ResolvedFlavourNamesEverySource) {
  test::DraftSpec ds;
  ds.speculators_config = true;
  ds.qwen3_layer = true;
  ds.rope_parameters = true;
  ds.flags_in_eagle_config = true;
  ds.fc_norm = true;
  ds.aux_ids = {1, 2, 3};
  ds.aux_in_eagle_config = true;
  test::TempDir dir;
  test::write_draft(dir.path(), ds);
  edit_config(dir.path(), [](nlohmann::json& c) { c.erase("norm_before_residual"); });
  const Eagle3Config c = parse_eagle3_config(JsonConfig::load(dir.file("config.json")), 6);
  test::expect_mentions(c.describe(), {"layer=qwen3 (transformer_layer_config.model_type)",
                                       "norm_before_residual=true (speculators default)", "fc_norm=true (eagle_config)",
                                       "norm_output=false (default)", "rope_theta=10000 (rope_parameters)",
                                       "taps entering layers=2/3/4 (eagle_config, first id 1",
                                       "norm_output semantics=vllm"});
}

}  // namespace
}  // namespace eaglet
