#include "support/test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <cstring>

#include <gtest/gtest.h>

#include "core/error.h"
#include "io/safetensors.h"

namespace eaglet::test {

void write_bf16_copy(const std::string& src, const std::string& dst) {
  std::filesystem::create_directories(dst);
  for (auto f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    if (std::filesystem::exists(src + "/" + f)) std::filesystem::copy_file(src + "/" + f, dst + "/" + f);
  Checkpoint ck = Checkpoint::open_dir(src);
  std::vector<TensorToWrite> ts;
  for (auto& n : ck.names()) {
    const TensorInfo& t = ck.get(n);
    std::vector<float> v(reinterpret_cast<const float*>(t.data), reinterpret_cast<const float*>(t.data) + t.numel());
    ts.push_back({n, DType::BF16, t.shape, float_bytes(v, DType::BF16)});
  }
  write_safetensors(dst + "/model.safetensors", ts);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "error is not one line: " << msg;
    return msg;
  }
  return "<no error>";
}

void expect_mentions(const std::string& msg, std::initializer_list<std::string> parts) {
  for (auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << msg << "' does not mention '" << p << "'";
}

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}


std::string source_dir() { return EAGLET_SOURCE_DIR; }
std::string eaglet_binary() { return EAGLET_BINARY; }

std::string shared_dir() {
  if (const char* env = std::getenv("EAGLET_SHARED")) return std::filesystem::exists(env) ? env : "";
  const std::string d = source_dir() + "/../shared";
  return std::filesystem::exists(d + "/models") ? d : "";
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/eaglet-test-XXXXXX";
  path_ = ::mkdtemp(tmpl);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool python_numpy_available() {
  static const bool ok = run_command("/usr/bin/python3 -c 'import numpy' 2>/dev/null").exit_code == 0;
  return ok;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<float> random_normal(size_t n, float stddev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::string float_bytes(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::F32) return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  std::string out(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const bf16_t b = f32_to_bf16(v[i]);
    std::memcpy(&out[i * 2], &b, 2);
  }
  return out;
}

void write_tiny_model(const std::string& dir, const TinyModelSpec& s) {
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"architectures", {s.architecture}},
                        {"hidden_size", s.hidden},
                        {"intermediate_size", s.intermediate},
                        {"num_hidden_layers", s.layers},
                        {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads},
                        {"head_dim", s.head_dim},
                        {"vocab_size", s.vocab},
                        {"max_position_embeddings", s.max_position},
                        {"rms_norm_eps", 1e-5},
                        {"rope_theta", 10000.0},
                        {"hidden_act", "silu"},
                        {"tie_word_embeddings", s.tie_embeddings},
                        {"bos_token_id", 1},
                        {"eos_token_id", 2}};
  if (s.llama3_rope)
    cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  write_text(dir + "/config.json", cfg.dump(2));
  RandomTensors rt(s.dtype, s.seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float stddev, float mean = 0.0f) {
    rt.add(name, std::move(shape), stddev, mean);
  };
  const int64_t H = s.hidden, qd = int64_t(s.heads) * s.head_dim, kvd = int64_t(s.kv_heads) * s.head_dim;
  add("model.embed_tokens.weight", {s.vocab, H}, 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {qd, H}, 0.15f);
    add(p + "self_attn.k_proj.weight", {kvd, H}, 0.15f);
    add(p + "self_attn.v_proj.weight", {kvd, H}, 0.15f);
    add(p + "self_attn.o_proj.weight", {H, qd}, 0.15f);
    add(p + "mlp.gate_proj.weight", {s.intermediate, H}, 0.15f);
    add(p + "mlp.up_proj.weight", {s.intermediate, H}, 0.15f);
    add(p + "mlp.down_proj.weight", {H, s.intermediate}, 0.15f);
    if (s.architecture == "Qwen2ForCausalLM") {
      add(p + "self_attn.q_proj.bias", {qd}, 0.1f);
      add(p + "self_attn.k_proj.bias", {kvd}, 0.1f);
      add(p + "self_attn.v_proj.bias", {kvd}, 0.1f);
    }
    if (s.architecture == "Qwen3ForCausalLM") {
      add(p + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, 1.0f);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, 1.0f);
    }
  }
  add("model.norm.weight", {H}, 0.1f, 1.0f);
  if (!s.tie_embeddings) add("lm_head.weight", {s.vocab, H}, 0.2f);
  write_safetensors(dir + "/model.safetensors", rt.tensors());
}

void write_byte_vocab_target(const std::string& dir, bool chat_template, int max_position) {
  TinyModelSpec ts;
  ts.vocab = 259;  // <unk>, <s>, </s> and the 256 bytes
  ts.layers = 4;
  ts.max_position = max_position;
  write_tiny_model(dir, ts);
  std::filesystem::copy_file(source_dir() + "/tests/data/bytes_tokenizer.json", dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  if (!chat_template) return;
  nlohmann::json cfg = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_bos_token", true},
                        {"chat_template", "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}</s>"
                                          "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"}};
  write_text(dir + "/tokenizer_config.json", cfg.dump());
}

void RandomTensors::add(const std::string& name, std::vector<int64_t> shape, float stddev, float mean) {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  auto v = random_normal(n, stddev, seed_++);
  for (auto& x : v) x += mean;
  ts_.push_back({name, dtype_, shape, float_bytes(v, dtype_)});
}

}  // namespace eaglet::test
