#include "train/regen.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "engine/offline.h"
#include "engine/generator.h"
#include "sampling/sampler.h"
#include "io/mapped_file.h"
#include "train/chat_data.h"
#include "train/dataset.h"
#include "train/progress.h"

namespace eaglet {

namespace {
// Drops a line cut short by an interrupted run, so appended lines start on a fresh line.
void drop_partial_line(const std::string& path) {
  const std::string data = read_text_file(path);
  const size_t keep = data.empty() || data.back() == '\n' ? data.size() : data.find_last_of('\n') + 1;
  if (keep != data.size()) std::filesystem::resize_file(path, keep);
}

std::set<int64_t> finished_indices(const std::string& path) {
  std::set<int64_t> done;
  if (!file_exists(path)) return done;
  drop_partial_line(path);
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    try {
      done.insert(nlohmann::json::parse(line).at("index").get<int64_t>());
    } catch (const std::exception&) {
      // an unreadable line: that sample is redone
    }
  }
  return done;
}

struct Job {
  int64_t key;
  std::vector<int> prompt;
  uint64_t seed;
};

// Continues every job's prompt by up to `max_new` tokens (EOS ends early), `batch` sequences at a
// time on the engine core; `done(key, generated)` is called as each finishes, in admission order
// within a step.
void continue_batched(ThreadPool& pool, Model& target, const Tokenizer& tok, const std::vector<int>& eos, std::vector<Job> jobs,
                      const RegenOptions& o, const std::function<void(int64_t, const std::vector<int>&)>& done) {
  const int max_pos = target.config().max_position;
  int64_t longest = 0;
  std::vector<std::shared_ptr<Request>> requests;
  for (Job& j : jobs) {
    if (int(j.prompt.size()) + o.max_new_tokens >= max_pos) j.prompt.resize(size_t(std::max(1, max_pos - o.max_new_tokens - 1)));
    longest = std::max<int64_t>(longest, int64_t(j.prompt.size()) + o.max_new_tokens);
    auto r = std::make_shared<Request>();
    r->prompt = j.prompt;
    r->sampling.temperature = o.temperature;
    r->sampling.seed = j.seed;
    r->stop.max_tokens = o.max_new_tokens;
    r->stop.stop_tokens = eos;
    auto out = std::make_shared<std::vector<int>>();
    r->on_output = [out](const std::string&, const std::vector<TokenLogprob>& toks) {
      for (auto& t : toks) out->push_back(t.token);
    };
    r->on_finish = [out, key = j.key, &eos, &done](const std::string&, int) {
      // The EOS that ended a continuation is not part of it.
      if (!out->empty() && std::find(eos.begin(), eos.end(), out->back()) != eos.end()) out->pop_back();
      done(key, *out);
    };
    requests.push_back(std::move(r));
  }
  OfflineEngine(pool, target, tok, nullptr, longest, o.batch).run_all(requests);
}

uint64_t seed_for(const RegenOptions& o, int64_t index, int64_t turn = 0) {
  return o.seed * 1000003ULL + uint64_t(index) * 7919ULL + uint64_t(turn);
}

void write_line(std::ofstream& out, const TrainSample& s, const Tokenizer& tok) {
  nlohmann::json j = {{"index", s.index}, {"input_ids", s.ids}, {"loss_mask", s.loss_mask}, {"text", tok.decode(s.ids)}};
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.flush();
}
}  // namespace

int64_t regenerate(ThreadPool& pool, Model& target, const Tokenizer& tok, const std::vector<int>& eos, const RegenOptions& o) {
  const std::set<int64_t> done = finished_indices(o.output);
  std::ofstream out(o.output, std::ios::app);
  if (!out) fail("{}: cannot write", o.output);
  const int64_t per = std::max(1, o.samples_per_prompt);
  int64_t written = int64_t(done.size()), generated = 0;

  if (is_chat_file(o.input)) {
    const auto tmpl = chat_template_for(o.input, o.chat_template, tok);
    const auto convs = load_conversations(o.input, o.num_samples, o.bad);
    std::vector<Conversation> todo;
    for (auto& c : convs)
      for (int64_t r = 0; r < per; ++r)
        if (!done.count(c.index * per + r)) todo.push_back(Conversation{c.index * per + r, c.messages});
    spdlog::info("regen: {} conversations from {}, {} already in {}", convs.size() * size_t(per), o.input, done.size(), o.output);
    Progress progress("regen", int64_t(convs.size()) * per, written);
    // Groups of conversations advance turn by turn: each assistant turn is regenerated from the
    // conversation so far (with the earlier turns already regenerated).
    for (size_t g = 0; g < todo.size(); g += size_t(o.batch)) {
      std::vector<Conversation> group(todo.begin() + long(g), todo.begin() + long(std::min(todo.size(), g + size_t(o.batch))));
      for (size_t turn = 0;; ++turn) {
        std::vector<Job> jobs;
        std::vector<size_t> where;
        for (size_t c = 0; c < group.size(); ++c) {
          size_t seen = 0;
          for (size_t m = 0; m < group[c].messages.size(); ++m) {
            if (group[c].messages[m].role != "assistant") continue;
            if (seen++ == turn) {
              jobs.push_back({int64_t(c), render_prompt(group[c].messages, m, *tmpl, tok), seed_for(o, group[c].index, int64_t(turn))});
              where.push_back(m);
            }
          }
        }
        if (jobs.empty()) break;
        std::vector<size_t> msg_of(group.size());
        for (size_t j = 0; j < jobs.size(); ++j) msg_of[size_t(jobs[j].key)] = where[j];
        continue_batched(pool, target, tok, eos, jobs, o, [&](int64_t c, const std::vector<int>& ids) {
          group[size_t(c)].messages[msg_of[size_t(c)]].content = tok.decode(ids);
          generated += int64_t(ids.size());
        });
      }
      for (auto& c : group) {
        write_line(out, render_conversation(c, *tmpl, tok, 1 << 30), tok);
        progress.update(++written, fmt::format("{:.0f} generated tok/s", generated / std::max(1e-9, progress.elapsed())));
      }
    }
    return written;
  }

  const auto texts = load_texts(o.input, o.num_samples, o.bad);
  const int64_t total = int64_t(texts.size()) * per;
  spdlog::info("regen: {} samples from {}, {} already in {}", total, o.input, done.size(), o.output);
  std::vector<Job> jobs;
  const int prefix = std::max(1, o.prefix_tokens);
  for (int64_t i = 0; i < total; ++i) {
    if (done.count(i)) continue;
    std::vector<int> ids = tok.encode(texts[size_t(i / per)]);
    if (int(ids.size()) > prefix) ids.resize(size_t(prefix));
    jobs.push_back({i, ids, o.seed * 1000003ULL + uint64_t(i)});
  }
  std::map<int64_t, std::vector<int>> prompts;
  for (auto& j : jobs) prompts[j.key] = j.prompt;
  Progress progress("regen", total, written);
  continue_batched(pool, target, tok, eos, jobs, o, [&](int64_t i, const std::vector<int>& ids) {
    TrainSample s;
    s.index = i;
    s.ids = prompts[i];
    s.ids.insert(s.ids.end(), ids.begin(), ids.end());
    s.loss_mask.assign(s.ids.size(), 1);
    write_line(out, s, tok);
    generated += int64_t(ids.size());
    progress.update(++written, fmt::format("{:.0f} generated tok/s", generated / std::max(1e-9, progress.elapsed())));
  });
  return written;
}

}  // namespace eaglet
