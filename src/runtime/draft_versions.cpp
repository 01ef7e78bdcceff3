#include "runtime/draft_versions.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "core/error.h"
#include "io/durable_file.h"
#include "io/json_config.h"
#include "io/mapped_file.h"

namespace eaglet {

namespace fs = std::filesystem;

DraftHistory DraftHistory::load(const std::string& online_dir) {
  DraftHistory h;
  const std::string path = online_dir + "/versions.json", legacy = online_dir + "/current.json";
  if (file_exists(path)) {
    const JsonConfig j = JsonConfig::load(path);
    const nlohmann::json& list = j.has("history") ? j.raw()["history"] : nlohmann::json();
    EAGLET_CHECK(list.is_array() && !list.empty(), "{}: 'history' must be a non-empty list", path);
    for (size_t i = 0; i < list.size(); ++i) {
      EAGLET_CHECK(list[i].is_object(), "{}: history[{}] must be an object", path, i);
      const JsonConfig e(list[i], fmt::format("{}: history[{}]", path, i));
      h.entries.push_back({e.get_int_in("version", e.get_int("version"), 0, INT32_MAX), e.get_string("dir", "")});
      EAGLET_CHECK(!h.entries.back().dir.empty(), "{}: history[{}].dir is missing or empty", path, i);
    }
  } else if (file_exists(legacy)) {  // written by earlier eaglet: the serving version only
    const JsonConfig j = JsonConfig::load(legacy);
    h.entries.push_back({j.get_int_in("version", j.get_int("version"), 0, INT32_MAX), stored(online_dir, j.get_string("dir", ""))});
  }
  return h;
}

void DraftHistory::save(const std::string& online_dir) const {
  nlohmann::json list = nlohmann::json::array();
  for (const Entry& e : entries) list.push_back({{"version", e.version}, {"dir", e.dir}});
  const nlohmann::json j = {{"serving", entries.empty() ? 0 : entries.back().version}, {"history", list}};
  write_file_durably(online_dir + "/versions.json", j.dump(1) + "\n");
}

std::string DraftHistory::resolve(const std::string& online_dir, const std::string& dir) {
  return fs::path(dir).is_absolute() ? dir : (fs::path(online_dir) / dir).string();
}

std::string DraftHistory::stored(const std::string& online_dir, const std::string& dir) {
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(online_dir, ec), p = fs::weakly_canonical(dir, ec);
  const fs::path rel = p.lexically_relative(base);
  if (!rel.empty() && *rel.begin() != "..") return rel.string();
  return fs::absolute(dir).string();
}

DraftVersions::DraftVersions(Scheduler& scheduler, ServingMetrics& metrics, std::shared_ptr<const ServedDraft> serving,
                             const DraftHistory& history, std::string online_dir, Loader loader, Options opts)
    : scheduler_(scheduler), metrics_(metrics), online_dir_(std::move(online_dir)), loader_(std::move(loader)), opts_(opts) {
  EAGLET_CHECK(!history.entries.empty(), "internal: a draft history needs the serving version");
  metrics_.set_recent_drafts(opts_.judge_drafts);
  for (const auto& e : history.entries)
    stack_.push_back({e.version, DraftHistory::resolve(online_dir_, e.dir), nullptr, true});
  stack_.back().draft = std::move(serving);
  metrics_.set_draft_version(stack_.back().number);
}

void DraftVersions::persist() const {
  if (online_dir_.empty()) return;
  DraftHistory h;
  for (const Version& v : stack_) h.entries.push_back({v.number, DraftHistory::stored(online_dir_, v.dir)});
  h.save(online_dir_);
}

bool DraftVersions::install(std::shared_ptr<const ServedDraft> draft, const std::string& dir, int version,
                            const std::string& why, int based_on) {
  std::lock_guard<std::mutex> lk(mu_);
  if (based_on >= 0 && stack_.back().number != based_on) {
    spdlog::info("draft version {} ({}) is not swapped in: it was judged against version {}, and version {} serves "
                 "now (a rollback came between)", version, dir, based_on, stack_.back().number);
    return false;
  }
  scheduler_.run_on_engine([&](EngineCore& e) { e.swap_draft(draft, version); });
  const double before = metrics_.version_metrics(stack_.back().number).mean_acceptance_length();
  spdlog::info("draft version {} serves from now on ({}; {}); version {} served at live acceptance length {:.3f}",
               version, dir, why, stack_.back().number, before);
  stack_.push_back({version, dir, std::move(draft), false});
  metrics_.count_draft_swap();
  persist();
  return true;
}

nlohmann::json DraftVersions::rollback(const std::string& why) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stack_.size() < 2)
    return {{"rolled_back", false}, {"version", stack_.back().number}, {"reason", "no earlier draft version to roll back to"}};
  Version& back = stack_[stack_.size() - 2];
  if (!back.draft) {  // served before this process started
    try {
      back.draft = loader_(back.dir);
    } catch (const std::exception& e) {
      spdlog::error("draft version {} ({}) cannot be loaded for a rollback: {}", back.number, back.dir, e.what());
      return {{"rolled_back", false}, {"version", stack_.back().number},
              {"reason", fmt::format("version {} ({}) cannot be loaded: {}", back.number, back.dir, e.what())}};
    }
  }
  const Version bad = stack_.back();
  stack_.pop_back();
  scheduler_.run_on_engine([&](EngineCore& e) { e.swap_draft(stack_.back().draft, stack_.back().number); });
  metrics_.count_draft_rollback();
  const double a = metrics_.version_metrics(bad.number).mean_acceptance_length();
  spdlog::warn("draft version {} rolled back to version {} ({}); it served at acceptance length {:.3f}", bad.number,
               stack_.back().number, why, a);
  persist();
  if (on_rollback) on_rollback(stack_.back().number, stack_.back().dir);
  return {{"rolled_back", true}, {"from_version", bad.number}, {"version", stack_.back().number}, {"reason", why}};
}

void DraftVersions::check() {
  std::string why;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stack_.size() < 2 || stack_.back().judged) return;
    const SpecMetrics now = metrics_.version_metrics(stack_.back().number);
    if (now.num_drafts < opts_.judge_drafts) return;
    stack_.back().judged = true;
    // Its latest drafts against its predecessor's last ones: two windows of the same length
    // next to each other in time, so neither old traffic nor a short sample decides.
    const ServingMetrics::Recent now_recent = metrics_.recent_acceptance(stack_.back().number);
    const ServingMetrics::Recent prev = metrics_.recent_acceptance(stack_[stack_.size() - 2].number);
    const double a = now_recent.acceptance_length, b = prev.acceptance_length;
    spdlog::info("draft version {} over its last {} drafts: acceptance length {:.3f} (version {} over its last {}: "
                 "{:.3f})", stack_.back().number, now_recent.drafts, a, stack_[stack_.size() - 2].number, prev.drafts, b);
    if (prev.drafts == 0 || a >= b - opts_.max_drop) return;
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
