#include "cli/report.h"

#include <cstdio>

#include <algorithm>

namespace eaglet::cli {

nlohmann::json stats_json(const GenerationStats& s) {
  return {{"prompt_tokens", s.prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"prefill_seconds", s.prefill_seconds},
          {"decode_seconds", s.decode_seconds},
          {"prefill_tokens_per_second", s.prefill_tokens_per_second()},
          {"decode_tokens_per_second", s.decode_tokens_per_second()}};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

nlohmann::json spec_json(const SpecMetrics& m) {
  return {{"num_drafts", m.num_drafts},
          {"num_draft_tokens", m.num_draft_tokens},
          {"num_accepted_tokens", m.num_accepted_tokens},
          {"num_accepted_tokens_per_pos", m.accepted_per_pos},
          {"mean_acceptance_length", m.mean_acceptance_length()},
          {"per_position_acceptance_rate", m.per_position_rates()},
          {"draft_acceptance_rate", m.draft_acceptance_rate()},
          {"mean_draft_tokens", m.mean_draft_tokens()},
          {"drafts_by_size", m.drafts_by_size},
          {"target_seconds", m.target_seconds},
          {"draft_seconds", m.draft_seconds},
          {"verify_seconds", m.verify_seconds}};
}

void print_summary(bool json, const nlohmann::json& j, const std::string& line) {
  std::puts(json ? j.dump().c_str() : line.c_str());
}

}  // namespace eaglet::cli
