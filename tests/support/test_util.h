// Helpers shared by the tests: locating ../shared, temporary directories, running commands and
// writing tiny random checkpoints that an independent reference can also read.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"

namespace eaglet::test {

// The one-line message of the eaglet::Error `f` throws ("<no error>" when it throws none; a
// message over several lines fails the test).
std::string error_of(const std::function<void()>& f);
// Expects `msg` to contain every part (file, field, tensor, value...).
void expect_mentions(const std::string& msg, std::initializer_list<std::string> parts);

// The kernel threads model-level tests run forwards on: two, so every parallel path is taken
// (kernel tests that compare thread counts make their own pools).
ThreadPool& pool();

// Whether this build runs under AddressSanitizer or ThreadSanitizer (scripts/sanitize.sh): their
// allocators keep freed memory in quarantine, so resident-memory bounds mean nothing there.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EAGLET_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EAGLET_TEST_SANITIZED 1
#endif
#ifdef EAGLET_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// ../shared beside the checkout (or $EAGLET_SHARED); empty when absent.
std::string shared_dir();
#define EAGLET_REQUIRE_SHARED()                                                            \
  do {                                                                                      \
    if (::eaglet::test::shared_dir().empty())                                               \
      GTEST_SKIP() << "../shared is not present; this test needs its models or data";       \
  } while (0)

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout (stderr too when merged by the command)
};
CommandResult run_command(const std::string& cmd);
std::string eaglet_binary();
std::string source_dir();
bool python_numpy_available();

void write_text(const std::string& path, const std::string& text);

// A tiny decoder checkpoint with seeded random weights.
struct TinyModelSpec {
  std::string architecture = "LlamaForCausalLM";  // or Qwen2ForCausalLM, Qwen3ForCausalLM
  int hidden = 48, intermediate = 72, layers = 3, heads = 4, kv_heads = 2, head_dim = 16, vocab = 97;
  bool llama3_rope = false;
  bool tie_embeddings = false;
  DType dtype = DType::F32;
  uint64_t seed = 7;
  int max_position = 512;
};
void write_tiny_model(const std::string& dir, const TinyModelSpec& spec);
inline void PrintTo(const TinyModelSpec& s, std::ostream* os) { *os << s.architecture; }
// A tiny 4-layer Llama over the built-in byte vocabulary (tokenizer.json included), optionally
// with a chat template ("[role] content</s>" per message, "[assistant] " as generation prompt).
// `max_position`: its context (a published chat template with tools needs more than 512 bytes).
void write_byte_vocab_target(const std::string& dir, bool chat_template = false, int max_position = 512);

// The F32 Hugging Face checkpoint in `src` converted to BF16 (round to nearest even) in a new
// folder `dst`, beside copies of its config and tokenizer files.
void write_bf16_copy(const std::string& src, const std::string& dst);

// Float data as raw bytes of `dtype` (F32 or BF16), for safetensors writers.
std::string float_bytes(const std::vector<float>& v, DType dtype);
std::vector<float> random_normal(size_t n, float stddev, uint64_t seed);

// Appends seeded random tensors (normal(mean, stddev)) to a safetensors write list.
class RandomTensors {
 public:
  RandomTensors(DType dtype, uint64_t seed) : dtype_(dtype), seed_(seed) {}
  void add(const std::string& name, std::vector<int64_t> shape, float stddev, float mean = 0.0f);
  std::vector<struct TensorToWrite>& tensors() { return ts_; }

 private:
  DType dtype_;
  uint64_t seed_;
  std::vector<struct TensorToWrite> ts_;
};

}  // namespace eaglet::test
