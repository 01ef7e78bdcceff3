#include "train/regen.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "engine/generator.h"
#include "engine/sampler.h"
#include "io/mapped_file.h"
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
      auto j = nlohmann::json::parse(line);
      done.insert(j.at("index").get<int64_t>());
    } catch (const std::exception&) {
      // a line cut short by an interrupted run: that sample is redone
    }
  }
  return done;
}

struct Live {
  int64_t index;
  SeqId seq;
  std::vector<int> ids;
  size_t prompt_len;
  Sampler sampler;
  int last;
};
}  // namespace

int64_t regenerate(Model& target, const Tokenizer& tok, const std::vector<int>& eos, const RegenOptions& o) {
  const auto texts = load_texts(o.input, o.num_samples);
  const std::set<int64_t> done = finished_indices(o.output);
  const int64_t per = std::max(1, o.samples_per_prompt), total = int64_t(texts.size()) * per;
  std::vector<int64_t> todo;
  for (int64_t i = 0; i < total; ++i)
    if (!done.count(i)) todo.push_back(i);
  spdlog::info("regen: {} samples from {}, {} already in {}", texts.size(), o.input, done.size(), o.output);
  std::ofstream out(o.output, std::ios::app);
  if (!out) fail("{}: cannot write", o.output);
  if (todo.empty()) return int64_t(done.size());

  const int max_pos = target.config().max_position;
  const int prefix = std::max(1, o.prefix_tokens);
  const int64_t per_seq = prefix + o.max_new_tokens + 1;
  KvCache cache(target.kv_shape(int64_t(o.batch) * (kv_blocks_for(std::min<int64_t>(per_seq, max_pos)) + 1)));
  SamplingParams sp;
  sp.temperature = o.temperature;
  Progress progress("regen", total, int64_t(done.size()));
  int64_t written = int64_t(done.size()), tokens_out = 0;
  size_t next = 0;
  std::vector<Live> live;
  while (next < todo.size() || !live.empty()) {
    // Admit new samples (prefill each) while there is room in the batch.
    while (next < todo.size() && int(live.size()) < o.batch) {
      const int64_t idx = todo[next++];
      std::vector<int> ids = tok.encode(texts[size_t(idx / per)]);
      if (int(ids.size()) > prefix) ids.resize(size_t(prefix));
      if (int(ids.size()) + o.max_new_tokens >= max_pos) ids.resize(size_t(std::max(1, max_pos - o.max_new_tokens - 1)));
      sp.seed = o.seed * 1000003ULL + uint64_t(idx);
      Live l{idx, cache.create(), ids, ids.size(), Sampler(sp), 0};
      auto logits = prefill(target, cache, l.seq, ids, 512);
      l.last = l.sampler.sample(logits.data(), target.config().vocab);
      live.push_back(std::move(l));
    }
    // One decode step for every live sequence; finished ones are written and leave the batch.
    ForwardBatch batch;
    std::vector<size_t> stepping;
    for (size_t i = 0; i < live.size(); ++i) {
      Live& l = live[i];
      l.ids.push_back(l.last);
      const bool stop = std::find(eos.begin(), eos.end(), l.last) != eos.end() ||
                        int(l.ids.size() - l.prompt_len) >= o.max_new_tokens || int(l.ids.size()) + 1 >= max_pos;
      if (stop) continue;
      batch.chunks.push_back(SeqChunk{l.seq, {l.last}, {0}});
      stepping.push_back(i);
    }
    ForwardOutput fo;
    if (!batch.chunks.empty()) target.forward(cache, batch, &fo);
    std::vector<Live> still;
    for (size_t i = 0, s = 0; i < live.size(); ++i) {
      Live& l = live[i];
      if (s < stepping.size() && stepping[s] == i) {
        l.last = l.sampler.sample(fo.logits.data() + s * size_t(target.config().vocab), target.config().vocab);
        ++s;
        still.push_back(std::move(l));
        continue;
      }
      nlohmann::json j = {{"index", l.index},
                          {"input_ids", l.ids},
                          {"loss_mask", std::vector<int>(l.ids.size(), 1)},
                          {"text", tok.decode(l.ids)}};
      out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      out.flush();
      tokens_out += int64_t(l.ids.size() - l.prompt_len);
      cache.free(l.seq);
      ++written;
      progress.update(written, fmt::format("{:.0f} generated tok/s", tokens_out / std::max(1e-9, progress.elapsed())));
    }
    live.swap(still);
  }
  return written;
}

}  // namespace eaglet
