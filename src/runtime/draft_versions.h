// The draft versions (EAGLE-3 or DFlash) a server with online training has served. A candidate
// the trainer's guard passed is installed: swapped into the engine between two steps (every
// running sequence keeps its exact output; its draft state is rebuilt). Once a version has served `judge_drafts`
// drafts, its live acceptance length over them is compared with its predecessor's over its last as
// many; if it fell by more than `max_drop`, it is rolled back automatically. POST /v1/draft/rollback rolls back by hand.
//
// The history (which versions served, in order) lives in DIR/versions.json, rewritten atomically
// and durably at every install and rollback, so a restarted server serves what was serving and
// can still roll back past the restart. Folders inside DIR are kept relative to it (a copied DIR
// serves its own versions).
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "speculation/served_draft.h"
#include "runtime/scheduler.h"
#include "runtime/serving_metrics.h"

namespace eaglet {

struct DraftHistory {
  struct Entry {
    int version = 0;
    std::string dir;  // as stored: relative to the online-training folder when inside it
  };
  std::vector<Entry> entries;  // oldest first; back() serves

  // DIR/versions.json (or the older DIR/current.json, which named only the serving version); no
  // entries when neither exists. Throws eaglet::Error naming the file and field at fault.
  static DraftHistory load(const std::string& online_dir);
  void save(const std::string& online_dir) const;
  // `dir` of an entry as a path to open.
  static std::string resolve(const std::string& online_dir, const std::string& dir);
  // How `dir` is stored: relative to online_dir when inside it, else absolute.
  static std::string stored(const std::string& online_dir, const std::string& dir);
};

class DraftVersions {
 public:
  struct Options {
    // Drafts a new version serves before it is judged, against as many of its predecessor's last
    // drafts (2000: a 100-request window of 64 tokens at acceptance 2.5 varies by ~0.025).
    int64_t judge_drafts = 2000;
    double max_drop = 0.15;      // acceptance length it may lose against its predecessor
  };
  // Loads an earlier version's draft when a rollback reaches one this process never loaded.
  using Loader = std::function<std::shared_ptr<const ServedDraft>(const std::string& dir)>;
  // `serving` serves as history.entries.back(); `online_dir` keeps versions.json ("" keeps none).
  DraftVersions(Scheduler& scheduler, ServingMetrics& metrics, std::shared_ptr<const ServedDraft> serving,
                const DraftHistory& history, std::string online_dir, Loader loader, Options opts);

  // Swaps `draft` (loaded from `dir`) in as `version`; `why` goes into the log line (the guard's
  // before/after scores). `based_on` >= 0: the version the candidate was judged against; if
  // another serves by now (a rollback came between), nothing is swapped and the answer is false.
  bool install(std::shared_ptr<const ServedDraft> draft, const std::string& dir, int version, const std::string& why,
               int based_on = -1);
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
    std::string dir;  // openable
    std::shared_ptr<const ServedDraft> draft;  // null: not loaded in this process yet
    bool judged = false;
  };
  void persist() const;  // with mu_ held

  Scheduler& scheduler_;
  ServingMetrics& metrics_;
  std::string online_dir_;
  Loader loader_;
  Options opts_;
  mutable std::mutex mu_;
  std::vector<Version> stack_;  // serving history; back() serves
};

}  // namespace eaglet
