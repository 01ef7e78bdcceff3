#include "speculation/metrics.h"

#include <fmt/format.h>

namespace eaglet {

void SpecMetrics::record(int num_drafted, int num_accepted, int depth) {
  if (num_drafted <= 0) return;
  if (depth < 0) depth = num_drafted;
  ++num_drafts;
  num_draft_tokens += num_drafted;
  num_accepted_tokens += num_accepted;
  if (accepted_per_pos.size() < size_t(depth)) accepted_per_pos.resize(size_t(depth), 0);
  for (int i = 0; i < num_accepted; ++i) ++accepted_per_pos[size_t(i)];
  if (drafts_by_size.size() <= size_t(num_drafted)) drafts_by_size.resize(size_t(num_drafted) + 1, 0);
  ++drafts_by_size[size_t(num_drafted)];
}

void SpecMetrics::merge(const SpecMetrics& o) {
  num_drafts += o.num_drafts;
  num_draft_tokens += o.num_draft_tokens;
  num_accepted_tokens += o.num_accepted_tokens;
  if (accepted_per_pos.size() < o.accepted_per_pos.size()) accepted_per_pos.resize(o.accepted_per_pos.size(), 0);
  for (size_t i = 0; i < o.accepted_per_pos.size(); ++i) accepted_per_pos[i] += o.accepted_per_pos[i];
  if (drafts_by_size.size() < o.drafts_by_size.size()) drafts_by_size.resize(o.drafts_by_size.size(), 0);
  for (size_t i = 0; i < o.drafts_by_size.size(); ++i) drafts_by_size[i] += o.drafts_by_size[i];
  target_seconds += o.target_seconds;
  draft_seconds += o.draft_seconds;
  verify_seconds += o.verify_seconds;
}

std::vector<double> SpecMetrics::per_position_rates() const {
  std::vector<double> r;
  for (auto a : accepted_per_pos) r.push_back(num_drafts ? double(a) / num_drafts : 0.0);
  return r;
}

std::string SpecMetrics::summary() const {
  std::string pos;
  for (double r : per_position_rates()) pos += fmt::format("{}{:.3f}", pos.empty() ? "" : ", ", r);
  return fmt::format(
      "SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted: {} tokens, Drafted: {} tokens, "
      "Per-position acceptance rate: {}, Avg Draft acceptance rate: {:.1f}%, Mean draft tokens: {:.2f}",
      mean_acceptance_length(), num_accepted_tokens, num_draft_tokens, pos, 100.0 * draft_acceptance_rate(),
      mean_draft_tokens());
}

}  // namespace eaglet
