// The built-in model: a small Llama with seeded random weights over a byte vocabulary
// (<unk>, <s>, </s>, then the 256 bytes), so every command runs without a checkpoint. Its output
// is noise and every command that uses it says so.
#include <random>

#include "models/decoder.h"

namespace eaglet {

std::unique_ptr<Model> make_builtin_model(uint64_t seed) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.dir = "<built-in random model>";
  c.hidden = 128;
  c.intermediate = 344;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.vocab = 259;
  c.max_position = 2048;
  c.rms_eps = 1e-5f;
  c.bos_token = 1;
  c.eos_tokens = {2};
  c.dtype_name = "F32";

  std::mt19937_64 rng(seed);
  WeightStore store;
  auto rand_matrix = [&](int64_t rows, int64_t cols, float stddev) {
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> w(size_t(rows * cols));
    for (auto& v : w) v = dist(rng);
    return store.own(std::move(w), rows, cols);
  };
  const int64_t H = c.hidden, I = c.intermediate, qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  auto embed = rand_matrix(c.vocab, H, 1.0f);
  std::vector<DecoderLayerWeights> layers(size_t(c.num_layers));
  for (auto& L : layers) {
    L.q = rand_matrix(qd, H, 0.1f);
    L.k = rand_matrix(kvd, H, 0.1f);
    L.v = rand_matrix(kvd, H, 0.1f);
    L.o = rand_matrix(H, qd, 0.1f);
    L.gate = rand_matrix(I, H, 0.1f);
    L.up = rand_matrix(I, H, 0.1f);
    L.down = rand_matrix(H, I, 0.1f);
    L.attn_norm.assign(size_t(H), 1.0f);
    L.mlp_norm.assign(size_t(H), 1.0f);
  }
  auto lm_head = rand_matrix(c.vocab, H, 0.2f);
  Rope rope;
  rope.rot_dim = c.head_dim;
  for (int i = 0; i < c.head_dim / 2; ++i) rope.inv_freq.push_back(1.0f / std::pow(10000.0f, float(2 * i) / float(c.head_dim)));
  return std::make_unique<DecoderModel>(c, DecoderOptions{}, rope, std::move(store), embed, lm_head,
                                        std::vector<float>(size_t(H), 1.0f), std::move(layers));
}

}  // namespace eaglet
