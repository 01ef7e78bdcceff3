// Token sampling: greedy, temperature, top-k, top-p, min-p, seeded. `target_probs` gives the
// distribution a sampler draws from, which the speculative verifier needs for rejection sampling.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "constrain/grammar.h"
#include "constrain/token_mask.h"

namespace eaglet {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
  // OpenAI's penalties (over generated tokens) and vLLM's repetition penalty (over prompt and
  // generated tokens), and additive biases per token id. They depend on the sequence's history,
  // so the engine decodes such a sequence without drafts (docs/serving.md).
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;  // 0 = off
  float repetition_penalty = 1.0f;                          // 1 = off
  std::vector<std::pair<int, float>> logit_bias;
  // Structured output: every token keeps the text a sentence (prefix) of `grammar`; tokens it
  // refuses are masked out of the distribution, end-of-sequence allowed where the text is whole.
  // Unlike the penalties this depends on the text alone, so constrained sequences still draft.
  std::shared_ptr<const constrain::Grammar> grammar;
  std::shared_ptr<const constrain::TokenTrie> vocabulary;  // the tokenizer's, for the masks
  bool greedy() const { return temperature <= 0.0f; }
  bool constrained() const { return grammar != nullptr; }
  bool has_logits_processors() const {
    return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1 || !logit_bias.empty();
  }
};

// Validates ranges; throws eaglet::Error naming the parameter.
void validate(const SamplingParams& p);

int argmax(const float* logits, int n);

// log(sum(exp(logits))), in double after subtracting the maximum: a token's log-probability is its
// logit minus this (log-probs in responses, perplexity).
double log_partition(const float* logits, int n);

// The distribution sampling draws from (fp32): softmax(logits / T) with top-k, top-p and min-p
// masks applied and renormalised. Greedy params give a one-hot on the argmax.
void target_probs(const float* logits, int n, const SamplingParams& p, std::vector<float>* probs);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // A token from `logits` [n]; constrained, from the grammar's state `at` (null: the state after
  // the tokens accepted so far).
  int sample(const float* logits, int n, const constrain::Matcher* at = nullptr);
  // The history the penalties read: the prompt once, then every token the sequence emits.
  void set_prompt(const std::vector<int>& prompt);
  // The sequence emitted `token` (the grammar's state moves over its text).
  void accept(int token);
  // Constrained: the grammar's state after the accepted tokens (null when unconstrained), and
  // whether the grammar allows nothing more (the output is complete).
  const constrain::Matcher* matcher() const { return matcher_ ? &*matcher_ : nullptr; }
  bool grammar_finished() const { return matcher_ && matcher_->finished(); }
  // `logits` [n] with what the grammar at `at` refuses set to -infinity (a copy; the input is
  // left as it is).
  const float* masked(const float* logits, int n, const constrain::Matcher& at);
  // Masks computed so far and the seconds they took; draft tokens the grammar refused.
  int64_t masks() const { return masks_; }
  double mask_seconds() const { return mask_seconds_; }
  int64_t refused_drafts() const { return refused_drafts_; }
  void count_refused_draft() { ++refused_drafts_; }
  // `logits` with the biases and penalties applied (a copy; the input is left as it is).
  const float* processed(const float* logits, int n);
  // Uniform [0, 1) from this sampler's stream (rejection tests).
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  // Draws an index from a probability vector (need not be normalised).
  int draw(const std::vector<float>& probs);
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::optional<constrain::Matcher> matcher_;
  int64_t masks_ = 0, refused_drafts_ = 0;
  double mask_seconds_ = 0;
  std::vector<float> probs_, processed_, masked_;
  std::unordered_map<int, int> output_counts_;
  std::unordered_set<int> prompt_tokens_;
};

}  // namespace eaglet
