// What `--draft`, `-k`, `--spec-method` and `--aux-numbering` resolve to, shared by generate,
// bench and serve: the loaded draft (if any) and a factory for per-sequence proposers.
#pragma once
#include <memory>
#include <string>

#include "models/eagle3.h"
#include "spec/proposer.h"

namespace eaglet {

struct SpecOptions {
  std::string draft_dir;
  std::string method;               // "eagle3" | "ngram" | "" (eagle3 when a draft is given, else none)
  int num_speculative_tokens = 3;   // k; 0 disables speculation
  std::string aux_numbering = "input";  // "input" (vLLM) | "output" (SGLang/SpecForge/TorchSpec)
  int ngram_max = 3, ngram_min = 1;
};

class SpecSetup {
 public:
  SpecSetup(const SpecOptions& opts, const Model& target);
  bool enabled() const { return method_ != "none" && k_ > 0; }
  const std::string& method() const { return method_; }
  int k() const { return k_; }
  const Eagle3Draft* draft() const { return draft_.get(); }
  // A fresh proposer for one sequence of at most `max_tokens` tokens (prompt included).
  std::unique_ptr<Proposer> new_proposer(int max_tokens) const;
  std::string describe() const;

 private:
  std::string method_;
  int k_;
  SpecOptions opts_;
  std::unique_ptr<Eagle3Draft> draft_;
};

}  // namespace eaglet
