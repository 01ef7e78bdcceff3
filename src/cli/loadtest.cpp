// `eaglet loadtest`: a bounded load benchmark against a running `eaglet serve` (loopback only):
// streaming completions at each concurrency level, reporting output tokens/s and p50/p99 of
// time-to-first-token and inter-token latency.
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/report.h"
#include "core/error.h"
#include "engine/prompt_dataset.h"

namespace eaglet::cli {

namespace {
using clock_type = std::chrono::steady_clock;

struct LoadOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key, dataset, json_out;
  std::vector<int> concurrency = {1, 4, 16};
  int requests = 32;        // per concurrency level
  int max_tokens = 64;
  double time_limit_s = 120;  // per level
  float temperature = 0;
  double rate = 0;            // requests per second (0: as fast as the concurrency allows)
  int max_prompts = 256;      // prompts read from --dataset (requests cycle through them)
  int metrics_every = 0;      // scrape /metrics after every N finished requests (0: never)
  std::string outputs;        // JSONL of every request's prompt and text, by request index
};

// The value of the first sample whose line contains `name` followed by '{' (a labelled sample).
double metric_value(const std::string& text, const std::string& name) {
  const size_t at = text.find(name + "{");
  if (at == std::string::npos) return 0;
  const size_t sp = text.find("} ", at);
  return sp == std::string::npos ? 0 : std::atof(text.c_str() + sp + 2);
}

// The samples of a family labelled by draft version: {"3": value, ...}.
nlohmann::json by_version(const std::string& text, const std::string& name) {
  nlohmann::json out = nlohmann::json::object();
  const std::string key = "version=\"";
  for (size_t at = text.find("\n" + name + "{"); at != std::string::npos; at = text.find("\n" + name + "{", at + 1)) {
    const size_t end = text.find("} ", at), v = text.find(key, at);
    if (end == std::string::npos || v == std::string::npos || v > end) continue;
    const size_t q = text.find('"', v + key.size());
    out[text.substr(v + key.size(), q - v - key.size())] = std::atof(text.c_str() + end + 2);
  }
  return out;
}

// Acceptance over time: for each interval between two readings of /metrics, the mean
// acceptance length, the version serving at its end, and each version's own over the interval.
nlohmann::json acceptance_windows(const nlohmann::json& timeline) {
  nlohmann::json out = nlohmann::json::array();
  nlohmann::json prev = {{"requests", 0}, {"drafts", 0.0}, {"accepted_tokens", 0.0},
                         {"versions", nlohmann::json::object()}};
  for (const nlohmann::json& x : timeline) {
    const double drafts = x["drafts"].get<double>() - prev["drafts"].get<double>();
    nlohmann::json w = {{"from_requests", prev["requests"]}, {"to_requests", x["requests"]},
                        {"drafts", drafts}, {"draft_version", x["draft_version"]}};
    if (drafts > 0) w["acceptance_length"] = 1 + (x["accepted_tokens"].get<double>() - prev["accepted_tokens"].get<double>()) / drafts;
    nlohmann::json per = nlohmann::json::object();
    for (const auto& [v, c] : x["versions"].items()) {
      const nlohmann::json before = prev["versions"].value(v, nlohmann::json{{"drafts", 0.0}, {"accepted_tokens", 0.0}});
      const double d = c["drafts"].get<double>() - before["drafts"].get<double>();
      if (d > 0)
        per[v] = {{"drafts", d}, {"acceptance_length", 1 + (c["accepted_tokens"].get<double>() -
                                                           before["accepted_tokens"].get<double>()) / d}};
    }
    w["by_version"] = per;
    out.push_back(std::move(w));
    prev = x;
  }
  return out;
}

// "acceptance length per 100 requests: 2.45 2.47 | v3 2.61 ...": a bar where the version changed.
void print_acceptance_windows(const nlohmann::json& windows) {
  std::string line = fmt::format("acceptance length per {} requests:", windows[0]["to_requests"].get<int>());
  nlohmann::json version = windows[0]["draft_version"];
  for (const nlohmann::json& w : windows) {
    if (w["draft_version"] != version) line += fmt::format(" | v{}", w["draft_version"].get<double>());
    version = w["draft_version"];
    line += w.contains("acceptance_length") ? fmt::format(" {:.2f}", w["acceptance_length"].get<double>()) : " -";
  }
  std::printf("%s\n", line.c_str());
}

// One streamed completion: time to the first event, the gaps between later ones, their count and
// (when kept) the text.
struct Streamed {
  bool ok = false;
  double first = -1;
  std::vector<double> gaps;
  int64_t tokens = 0;
  std::string text;
};

Streamed stream_one(httplib::Client& cli, const LoadOptions& o, const std::string& prompt, const httplib::Headers& h) {
  Streamed r;
  const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", o.max_tokens}, {"temperature", o.temperature},
                               {"stream", true}, {"ignore_eos", true}};
  auto last = clock_type::now();
  const auto start = last;
  std::string buf;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = h;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buf.append(data, len);
    size_t p;
    while ((p = buf.find("\n\n")) != std::string::npos) {
      const std::string ev = buf.substr(0, p);
      buf.erase(0, p + 2);
      if (ev.rfind("data: {", 0) != 0) continue;
      const auto now = clock_type::now();
      if (r.first < 0) r.first = std::chrono::duration<double>(now - start).count();
      else r.gaps.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
      ++r.tokens;
      if (!o.outputs.empty()) {
        const auto j = nlohmann::json::parse(ev.substr(6), nullptr, false);
        if (j.is_object() && j.contains("choices") && !j["choices"].empty()) r.text += j["choices"][0].value("text", "");
      }
    }
    return true;
  };
  auto res = cli.send(req);
  r.ok = res && res->status == 200;
  return r;
}

// What the requests of one concurrency level add up to (shared by its client threads, under mu).
struct Level {
  std::mutex mu;
  std::vector<double> ttft, itl;
  int64_t tokens = 0;
  int failures = 0, finished = 0;
  std::vector<std::pair<int, std::string>> texts;
  nlohmann::json timeline = nlohmann::json::array();
};

// The server's cumulative counters after `at` requests: acceptance over time.
nlohmann::json timeline_point(httplib::Client& cli, const httplib::Headers& h, int at, double seconds, int64_t tokens) {
  auto m = cli.Get("/metrics", h);
  const std::string text = m && m->status == 200 ? m->body : "";
  // Each draft version's cumulative counters (servers with online training).
  const nlohmann::json drafts = by_version(text, "eaglet:spec_decode_num_drafts_by_version"),
                       accepted = by_version(text, "eaglet:spec_decode_num_accepted_tokens_by_version");
  nlohmann::json versions = nlohmann::json::object();
  for (const auto& [v, d] : drafts.items()) versions[v] = {{"drafts", d}, {"accepted_tokens", accepted.value(v, 0.0)}};
  return {{"requests", at}, {"seconds", seconds}, {"output_tokens", tokens}, {"versions", versions},
          {"drafts", metric_value(text, ":spec_decode_num_drafts_total")},
          {"accepted_tokens", metric_value(text, ":spec_decode_num_accepted_tokens_total")},
          {"draft_version", metric_value(text, "eaglet:draft_version")},
          {"online_train_steps", metric_value(text, "eaglet:online_train_steps_total")}};
}

// `conc` clients sending requests until o.requests or the time limit; prints the level's line and
// returns its report.
nlohmann::json run_level(const LoadOptions& o, const std::vector<std::string>& prompts, int conc) {
  std::atomic<int> next{0};
  Level L;
  const auto t0 = clock_type::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock_type::now() - t0).count(); };
  auto worker = [&] {
    httplib::Client cli(o.host, o.port);
    cli.set_read_timeout(std::chrono::seconds(int(o.time_limit_s) + 5));
    httplib::Headers h;
    if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
    for (;;) {
      const int i = next++;
      if (i >= o.requests || elapsed() > o.time_limit_s) return;
      if (o.rate > 0)  // request i is due at i / rate seconds, as vLLM's benchmark --request-rate paces them
        std::this_thread::sleep_until(t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(i / o.rate)));
      Streamed r = stream_one(cli, o, prompts[size_t(i) % prompts.size()], h);
      std::unique_lock<std::mutex> lk(L.mu);
      if (!r.ok) {
        ++L.failures;
        continue;
      }
      if (r.first >= 0) L.ttft.push_back(r.first);
      L.itl.insert(L.itl.end(), r.gaps.begin(), r.gaps.end());
      L.tokens += r.tokens;
      if (!o.outputs.empty()) L.texts.emplace_back(i, std::move(r.text));
      ++L.finished;
      if (o.metrics_every > 0 && L.finished % o.metrics_every == 0) {
        const int at = L.finished;
        const int64_t tok = L.tokens;
        lk.unlock();
        nlohmann::json point = timeline_point(cli, h, at, elapsed(), tok);
        lk.lock();
        L.timeline.push_back(std::move(point));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < conc; ++c) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  const double wall = elapsed();
  const int done = int(L.ttft.size());
  std::printf("%11d %9d %12.1f %9.1fms %9.1fms %9.1fms %9.1fms%s\n", conc, done, L.tokens / wall,
              1e3 * percentile(L.ttft, 0.5), 1e3 * percentile(L.ttft, 0.99), 1e3 * percentile(L.itl, 0.5),
              1e3 * percentile(L.itl, 0.99), L.failures ? fmt::format("  ({} failed)", L.failures).c_str() : "");
  std::sort(L.timeline.begin(), L.timeline.end(),  // (clients append their readings as they finish)
            [](const nlohmann::json& a, const nlohmann::json& b) { return a["requests"] < b["requests"]; });
  const nlohmann::json windows = acceptance_windows(L.timeline);
  if (!windows.empty()) print_acceptance_windows(windows);
  if (!o.outputs.empty()) {
    std::sort(L.texts.begin(), L.texts.end());
    std::ofstream f(o.outputs);
    for (auto& [i, t] : L.texts)
      f << nlohmann::json{{"index", i}, {"prompt", prompts[size_t(i) % prompts.size()]}, {"text", t}}.dump() << "\n";
  }
  return {{"concurrency", conc}, {"requests", done}, {"failed", L.failures}, {"output_tokens_per_second", L.tokens / wall},
          {"ttft_p50_s", percentile(L.ttft, 0.5)}, {"ttft_p99_s", percentile(L.ttft, 0.99)},
          {"itl_p50_s", percentile(L.itl, 0.5)}, {"itl_p99_s", percentile(L.itl, 0.99)}, {"wall_s", wall},
          {"timeline", L.timeline}, {"acceptance_over_time", windows}};
}

void run_load(const LoadOptions& o) {
  EAGLET_CHECK(o.host == "127.0.0.1" || o.host == "localhost" || o.host == "::1",
               "loadtest only targets this machine's loopback addresses (got {})", o.host);
  const std::vector<std::string> prompts =
      o.dataset.empty() ? std::vector<std::string>{"Once upon a time", "Lily and Tom went", "The little dog", "One day, a girl"}
                        : load_prompts(o.dataset, o.max_prompts);
  nlohmann::json report = nlohmann::json::array();
  std::printf("%11s %9s %12s %10s %10s %10s %10s\n", "concurrency", "requests", "output tok/s", "TTFT p50", "TTFT p99",
              "ITL p50", "ITL p99");
  for (int conc : o.concurrency) report.push_back(run_level(o, prompts, conc));
  if (!o.json_out.empty()) std::ofstream(o.json_out) << report.dump(2) << "\n";
}
}  // namespace

void add_loadtest(CLI::App& app) {
  auto o = std::make_shared<LoadOptions>();
  CLI::App* cmd = app.add_subcommand("loadtest", "bounded streaming load test of a local `eaglet serve`");
  cmd->add_option("--host", o->host, "server address (loopback only)");
  cmd->add_option("--port", o->port, "server port");
  cmd->add_option("--api-key", o->api_key, "API key, if the server wants one");
  cmd->add_option("--dataset", o->dataset, "prompts (.txt/.jsonl/.json)");
  cmd->add_option("--concurrency", o->concurrency, "concurrency levels, e.g. 1,4,16")->delimiter(',');
  cmd->add_option("--requests", o->requests, "requests per level")->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per request")->check(CLI::PositiveNumber);
  cmd->add_option("--time-limit", o->time_limit_s, "seconds per level (no new requests after)");
  cmd->add_option("--temperature", o->temperature, "sampling temperature");
  cmd->add_option("--json", o->json_out, "write the results as JSON");
  cmd->add_option("--rate", o->rate, "requests per second, evenly spaced (0: as fast as --concurrency allows)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-prompts", o->max_prompts, "prompts read from --dataset")->check(CLI::PositiveNumber);
  cmd->add_option("--metrics-every", o->metrics_every, "read the server's /metrics after every N requests (acceptance over time, in --json)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--outputs", o->outputs, "write each request's prompt and text (JSONL, by request index)");
  cmd->callback([o] { run_load(*o); });
}

}  // namespace eaglet::cli
