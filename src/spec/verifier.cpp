#include "spec/verifier.h"

namespace eaglet {

Verdict verify_drafts(const float* logits, int vocab, const std::vector<int>& drafts, Sampler& sampler) {
  const SamplingParams& sp = sampler.params();
  Verdict v;
  std::vector<float> p;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const float* row = logits + i * size_t(vocab);
    if (sp.greedy()) {
      const int t = argmax(row, vocab);
      if (t != drafts[i]) return {int(i), t};
      continue;
    }
    target_probs(row, vocab, sp, &p);
    if (sampler.uniform() < double(p[size_t(drafts[i])])) continue;
    p[size_t(drafts[i])] = 0.0f;  // max(p - onehot(d), 0)
    return {int(i), sampler.draw(p)};
  }
  v.accepted = int(drafts.size());
  v.next = sampler.sample(logits + drafts.size() * size_t(vocab), vocab);
  return v;
}

}  // namespace eaglet
