#include "runtime/draft_versions.h"

#include <spdlog/spdlog.h>

namespace eaglet {

DraftVersions::DraftVersions(Scheduler& scheduler, ServingMetrics& metrics, std::shared_ptr<const Eagle3Draft> initial,
                             const std::string& dir, int version, Options opts)
    : scheduler_(scheduler), metrics_(metrics), opts_(opts) {
  stack_.push_back({version, dir, std::move(initial), true});
  metrics_.set_draft_version(version);
}

void DraftVersions::install(std::shared_ptr<const Eagle3Draft> draft, const std::string& dir, int version,
                            const std::string& why) {
  std::lock_guard<std::mutex> lk(mu_);
  scheduler_.run_on_engine([&](EngineCore& e) { e.swap_draft(draft, version); });
  const double before = metrics_.version_metrics(stack_.back().number).mean_acceptance_length();
  spdlog::info("draft version {} serves from now on ({}; {}); version {} served at live acceptance length {:.3f}",
               version, dir, why, stack_.back().number, before);
  stack_.push_back({version, dir, std::move(draft), false});
  metrics_.count_draft_swap();
}

nlohmann::json DraftVersions::rollback(const std::string& why) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stack_.size() < 2)
    return {{"rolled_back", false}, {"version", stack_.back().number}, {"reason", "no earlier draft version to roll back to"}};
  const Version bad = stack_.back();
  stack_.pop_back();
  const Version& back = stack_.back();
  scheduler_.run_on_engine([&](EngineCore& e) { e.swap_draft(back.draft, back.number); });
  metrics_.count_draft_rollback();
  const double a = metrics_.version_metrics(bad.number).mean_acceptance_length();
  spdlog::warn("draft version {} rolled back to version {} ({}); it served at acceptance length {:.3f}", bad.number,
               back.number, why, a);
  if (on_rollback) on_rollback(back.number, back.dir);
  return {{"rolled_back", true}, {"from_version", bad.number}, {"version", back.number}, {"reason", why}};
}

void DraftVersions::check() {
  std::string why;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stack_.size() < 2 || stack_.back().judged) return;
    const SpecMetrics now = metrics_.version_metrics(stack_.back().number);
    if (now.num_drafts < opts_.judge_drafts) return;
    stack_.back().judged = true;
    const SpecMetrics prev = metrics_.version_metrics(stack_[stack_.size() - 2].number);
    const double a = now.mean_acceptance_length(), b = prev.mean_acceptance_length();
    spdlog::info("draft version {} after {} drafts: acceptance length {:.3f} (version {}: {:.3f})", stack_.back().number,
                 now.num_drafts, a, stack_[stack_.size() - 2].number, b);
    if (prev.num_drafts == 0 || a >= b - opts_.max_drop) return;
    why = fmt::format("automatic: live acceptance length {:.3f} < {:.3f} - {:.2f} of the version before", a, b,
                      opts_.max_drop);
  }
  rollback(why);
}

int DraftVersions::current() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stack_.back().number;
}

}  // namespace eaglet
