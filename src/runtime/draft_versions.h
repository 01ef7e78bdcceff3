// The EAGLE-3 draft versions a server with online training has served. A candidate the trainer's
// guard passed is installed: swapped into the engine between two steps (every running sequence
// keeps its exact output; its draft state is rebuilt). Once a version has served `judge_drafts`
// drafts, its live acceptance length is compared with its predecessor's; if it fell by more than
// `max_drop`, it is rolled back automatically. POST /v1/draft/rollback rolls back by hand.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/eagle3.h"
#include "runtime/scheduler.h"
#include "runtime/serving_metrics.h"

namespace eaglet {

class DraftVersions {
 public:
  struct Options {
    int64_t judge_drafts = 300;  // drafts a new version serves before it is judged
    double max_drop = 0.15;      // acceptance length it may lose against its predecessor
  };
  // `initial` serves as version `version` from `dir`.
  DraftVersions(Scheduler& scheduler, ServingMetrics& metrics, std::shared_ptr<const Eagle3Draft> initial,
                const std::string& dir, int version, Options opts);

  // Swaps `draft` (loaded from `dir`) in as `version`; `why` goes into the log line (the guard's
  // before/after scores).
  void install(std::shared_ptr<const Eagle3Draft> draft, const std::string& dir, int version, const std::string& why);
  // Back to the version before the current one; {"rolled_back": false, "reason": ...} when none is left.
  nlohmann::json rollback(const std::string& why);
  // Judges the current version once it has served enough drafts (rolls it back if it is worse).
  void check();
  int current() const;
  // Told after every rollback: the version now serving and its folder (the trainer restarts from it).
  std::function<void(int version, const std::string& dir)> on_rollback;

 private:
  struct Version {
    int number;
    std::string dir;
    std::shared_ptr<const Eagle3Draft> draft;
    bool judged = false;
  };
  Scheduler& scheduler_;
  ServingMetrics& metrics_;
  Options opts_;
  mutable std::mutex mu_;
  std::vector<Version> stack_;  // serving history; back() serves
};

}  // namespace eaglet
