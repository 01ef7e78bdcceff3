// `eaglet regen`: the target rewrites the data so that the draft learns the target's own
// distribution. Chat data (`conversations` / `messages`): every assistant turn is regenerated in
// order from the conversation so far, rendered with the target's chat template; the loss mask
// covers the assistant turns. Plain text (base models): each sample's first `prefix_tokens`
// tokens are kept as the prompt and the target continues them; every token is trained on.
// Batched (one target forward per step for all live sequences), resumable (finished samples are
// skipped on restart), with progress. Output: JSONL {index, input_ids, loss_mask, text}.
#pragma once
#include <string>
#include <vector>

#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {

class BadRecords;

struct RegenOptions {
  std::string input;   // .txt / .jsonl / .json texts
  std::string output;  // JSONL, appended to
  int num_samples = 0;
  float temperature = 0.8f;
  int max_new_tokens = 120;
  int prefix_tokens = 8;
  int batch = 8;
  int samples_per_prompt = 1;  // independent continuations of each prompt (index = prompt * n + r)
  uint64_t seed = 0;
  BadRecords* bad = nullptr;   // malformed input records: counted and skipped (null: errors)
  std::string chat_template;   // Jinja file for chat inputs; empty: the tokenizer's
};

// Returns the number of samples in the output file afterwards.
// Runs the target on `pool`.
int64_t regenerate(ThreadPool& pool, Model& target, const Tokenizer& tok, const std::vector<int>& eos, const RegenOptions& o);

}  // namespace eaglet
