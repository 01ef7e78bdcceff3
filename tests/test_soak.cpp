// A bounded soak of `eaglet serve`: client threads send a random mix of streaming, non-streaming,
// greedy, cancelled (mid-stream and mid-generation), malformed and half-sent requests over
// loopback for EAGLET_SOAK_SECONDS (default 20; CI runs 120). It checks that every answer is a
// success or a client error (never a 500 or a broken connection), that greedy output under load
// equals greedy output alone, that the gauges return to zero, and that memory stays bounded.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "io/mapped_file.h"
#include "support/raw_http.h"
#include "support/server_process.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double soak_seconds() {
  const char* s = std::getenv("EAGLET_SOAK_SECONDS");
  return s ? std::atof(s) : 20.0;
}

struct Tally {
  std::mutex mu;
  std::map<std::string, int> done;  // kind -> completed
  std::vector<std::string> failures;
  void ok(const std::string& kind) {
    std::lock_guard<std::mutex> lk(mu);
    ++done[kind];
  }
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lk(mu);
    if (failures.size() < 20) failures.push_back(what);
  }
};

class Soak {
 public:
  Soak(int port, std::string greedy_body, std::string greedy_text)
      : port_(port), greedy_body_(std::move(greedy_body)), greedy_text_(std::move(greedy_text)) {}

  void client(uint64_t seed, clock_type::time_point end, Tally& t) {
    std::mt19937_64 rng(seed);
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120);
    auto pick = [&](int n) { return int(rng() % uint64_t(n)); };
    while (clock_type::now() < end) {
      switch (pick(7)) {
        case 0: {  // sampled, non-streaming, maybe n > 1
          const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 1 + pick(48)}, {"temperature", 0.2 + pick(10) / 10.0},
                             {"n", 1 + pick(3)}, {"seed", pick(1000)}};
          check(c.Post("/v1/completions", body.dump(), "application/json"), "sampled", {200, 503}, t);
          break;
        }
        case 1: {  // streamed to the end
          const json body = {{"prompt", "The little dog"}, {"max_tokens", 1 + pick(64)}, {"stream", true},
                             {"stream_options", {{"include_usage", true}}}};
          auto r = c.Post("/v1/completions", body.dump(), "application/json");
          if (r && r->status == 200 && r->body.find("data: [DONE]") == std::string::npos) t.fail("stream without [DONE]");
          else check(r, "streamed", {200, 503}, t);
          break;
        }
        case 2: {  // greedy under load must equal greedy alone
          auto r = c.Post("/v1/completions", greedy_body_, "application/json");
          if (r && r->status == 200 && json::parse(r->body)["choices"][0]["text"] != greedy_text_)
            t.fail("greedy output changed under load: " + r->body);
          else check(r, "greedy", {200, 503}, t);
          break;
        }
        case 3: {  // client leaves mid-stream
          test::RawConnection raw(port_);
          raw.send(test::http_post("/v1/completions", R"({"prompt": "Once", "max_tokens": 400, "ignore_eos": true, "stream": true})"));
          raw.read(0.05 + pick(20) / 100.0, "data: {");
          t.ok("left mid-stream");
          break;
        }
        case 4: {  // client leaves while a non-streaming request generates
          test::RawConnection raw(port_);
          raw.send(test::http_post("/v1/completions", R"({"prompt": "Once", "max_tokens": 400, "ignore_eos": true, "n": 4})"));
          std::this_thread::sleep_for(std::chrono::milliseconds(pick(150)));
          t.ok("left mid-generation");
          break;
        }
        case 5: {  // malformed bodies and parameters
          static const std::vector<std::string> bad = {
              "{", "[1,2]", R"({"prompt": 5})", R"({"prompt": "x", "max_tokens": -1})", R"({"prompt": [4294967296]})",
              R"({"prompt": "x", "n": 99})", R"({"prompt": "x", "stop": [1]})", std::string(2000, '['),
              R"({"messages": [{"role": "user", "content": [{"type": 5}]}]})", "\xff\xfe\x00garbage"};
          const std::string& body = bad[size_t(pick(int(bad.size())))];
          const bool chat = body.find("messages") != std::string::npos;
          check(c.Post(chat ? "/v1/chat/completions" : "/v1/completions", body, "application/json"), "malformed", {400}, t);
          break;
        }
        default: {  // half a request, then gone
          test::RawConnection raw(port_);
          const std::string req = test::http_post("/v1/completions", R"({"prompt": "Hello", "max_tokens": 5})");
          raw.send(req.substr(0, size_t(pick(int(req.size())))));
          t.ok("half-sent");
          break;
        }
      }
    }
  }

 private:
  void check(const httplib::Result& r, const std::string& kind, std::initializer_list<int> ok, Tally& t) {
    if (!r) return t.fail(kind + ": no response (" + httplib::to_string(r.error()) + ")");
    for (int s : ok)
      if (r->status == s) return t.ok(kind);
    t.fail(kind + ": status " + std::to_string(r->status) + " " + r->body.substr(0, 200));
  }

  int port_;
  std::string greedy_body_, greedy_text_;
};

TEST(Soak, MixedTrafficLeavesNoTrace) {
  const bool stories = !test::shared_dir().empty();
  const std::string model = stories ? "-m " + test::shared_dir() + "/models/stories260K-hf " : "--builtin ";
  test::ServerProcess s(model + "--max-num-seqs 8 --max-waiting 64 --request-timeout 5 --spec-method ngram");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  const std::string greedy = R"({"prompt": "Once upon a time", "max_tokens": 48, "temperature": 0})";
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60);
  auto first = c.Post("/v1/completions", greedy, "application/json");
  ASSERT_TRUE(first && first->status == 200);
  const std::string greedy_text = json::parse(first->body)["choices"][0]["text"];

  Soak soak(s.port(), greedy, greedy_text);
  Tally tally;
  const double seconds = soak_seconds();
  auto run_clients = [&](double secs, uint64_t seed) {
    const auto end = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(secs));
    std::vector<std::thread> clients;
    for (int i = 0; i < 6; ++i) clients.emplace_back([&, i] { soak.client(seed + uint64_t(i), end, tally); });
    for (auto& t : clients) t.join();
  };
  // A tenth of the time warms up (allocator arenas, caches); memory is measured from there.
  run_clients(seconds * 0.1, 1);
  const int64_t rss_warm = test::process_rss(s.pid());
  const auto t0 = clock_type::now();
  run_clients(seconds * 0.9, 100);
  const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();

  // Idle again: nothing running, nothing waiting, no KV block held.
  std::string m;
  for (int i = 0; i < 200; ++i) {
    httplib::Client mc("127.0.0.1", s.port());
    auto r = mc.Get("/metrics");
    m = r ? r->body : "";
    if (test::metric(m, "vllm:num_requests_running{") == 0 && test::metric(m, "vllm:kv_cache_usage_perc{") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(test::metric(m, "vllm:num_requests_running{"), 0);
  EXPECT_EQ(test::metric(m, "vllm:num_requests_waiting{"), 0);
  EXPECT_EQ(test::metric(m, "vllm:kv_cache_usage_perc{"), 0);
  auto last = c.Post("/v1/completions", greedy, "application/json");
  ASSERT_TRUE(last && last->status == 200);
  EXPECT_EQ(json::parse(last->body)["choices"][0]["text"], greedy_text);
  const int64_t rss_end = test::process_rss(s.pid());

  int total = 0;
  std::string summary;
  for (auto& [kind, n] : tally.done) {
    total += n;
    summary += fmt::format(" {} {},", kind, n);
  }
  std::printf("soak: %.0f s, %d requests (%.1f/s):%s RSS %.1f MB after warm-up, %.1f MB at the end\n", elapsed, total,
              total / elapsed, summary.c_str(), rss_warm / 1e6, rss_end / 1e6);
  for (auto& f : tally.failures) ADD_FAILURE() << f;
  EXPECT_GE(tally.done.size(), 7u) << "some kinds of traffic never completed";
  // Growth beyond allocator noise would be a leak per request: thousands of requests ran.
  // (Sanitizer builds check leaks with LeakSanitizer at exit instead.)
  if (!test::kSanitized) {
    EXPECT_LT(rss_end - rss_warm, int64_t(64) << 20) << rss_warm << " -> " << rss_end;
  }
  EXPECT_EQ(s.terminate(), 0);
}

// Hostile clients beside normal ones (issue 28): connections that announce 4 MB bodies and
// trickle them, streams nobody reads, chat requests whose template explodes through its kwargs or
// a 1 MB message, and clients that vanish mid-request. Normal requests must all succeed, with p99
// latency under 2 s in the dedicated run; memory must come back to within 10% of its warm level;
// SIGTERM must end the server within 5 s.
class Hostile {
 public:
  explicit Hostile(int port) : port_(port) {}
  void client(uint64_t seed, clock_type::time_point end) {
    std::mt19937_64 rng(seed);
    std::vector<std::unique_ptr<test::RawConnection>> held;  // slow bodies and unread streams
    const json msgs = {{{"role", "user"}, {"content", "boom"}}};
    while (clock_type::now() < end) {
      switch (rng() % 10) {
        case 0:
        case 1:
        case 2:  // announce a large body, send a little of it, keep the socket
          held.push_back(std::make_unique<test::RawConnection>(port_));
          held.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: 4194304\r\n\r\n{\"prompt\": \"");
          break;
        case 3:  // a long stream, never read (the engine still generates it: kept rare)
          held.push_back(std::make_unique<test::RawConnection>(port_));
          held.back()->send(test::http_post("/v1/completions", R"({"prompt": "Once", "max_tokens": 300, "ignore_eos": true, "stream": true, "logprobs": 5})"));
          break;
        case 4:
        case 5:
        case 6: {  // the template multiplied by the client's kwargs, or given a 1 MB message to rewrite
          httplib::Client c("127.0.0.1", port_);
          c.set_read_timeout(60);
          const json body = rng() % 2 ? json{{"messages", msgs}, {"chat_template_kwargs", {{"n", 1000000}, {"pad", std::string(64, 'x')}}}}
                                      : json{{"messages", {{{"role", "user"}, {"content", std::string(1 << 20, 'a')}}}}};
          auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
          if (r && r->status >= 500) failures++;
          break;
        }
        default: {  // gone mid-request
          test::RawConnection raw(port_);
          raw.send(test::http_post("/v1/completions", R"({"prompt": "Once", "max_tokens": 64})"));
          break;
        }
      }
      if (held.size() > 24) held.erase(held.begin(), held.begin() + 12);  // oldest go away
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80));
    }
  }
  std::atomic<int> failures{0};

 private:
  int port_;
};

TEST(Soak, HostileTrafficDoesNotHurtNormalTraffic) {
  test::TempDir d;
  test::write_text(d.file("t.jinja"),
                   "{% for m in messages %}{% if m['content'] == 'boom' %}{{ range(n)|unique|join(pad) }}{% endif %}"
                   "{{ m['content'].replace('a', 'bb') }}{% endfor %}");
  const bool stories = !test::shared_dir().empty();
  const std::string model = stories ? "-m " + test::shared_dir() + "/models/stories260K-hf " : "--builtin ";
  test::ServerProcess s(model + "--max-num-seqs 16 --request-timeout 5 --chat-template " + d.file("t.jinja"));
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  const std::string greedy = R"({"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0})";
  httplib::Client c0("127.0.0.1", s.port());
  auto first = c0.Post("/v1/completions", greedy, "application/json");
  ASSERT_TRUE(first && first->status == 200);
  const std::string want = json::parse(first->body)["choices"][0]["text"];

  std::mutex mu;
  std::vector<double> latencies;
  std::vector<std::string> failures;
  auto normal = [&](clock_type::time_point end) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_read_timeout(60);
    while (clock_type::now() < end) {
      const auto t0 = clock_type::now();
      auto r = c.Post("/v1/completions", greedy, "application/json");
      const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
      std::lock_guard<std::mutex> lk(mu);
      latencies.push_back(dt);
      if (!r || r->status != 200) failures.push_back(r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error()));
      else if (json::parse(r->body)["choices"][0]["text"] != want) failures.push_back("greedy output changed: " + r->body);
    }
  };
  Hostile hostile(s.port());
  auto run = [&](double secs, uint64_t seed) {
    const auto end = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(secs));
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i) ts.emplace_back([&, i] { hostile.client(seed + uint64_t(i), end); });
    for (int i = 0; i < 2; ++i) ts.emplace_back([&] { normal(end); });
    for (auto& t : ts) t.join();
  };
  const double seconds = soak_seconds();
  run(std::max(2.0, seconds * 0.2), 1);  // warm-up: arenas and caches reach their working size
  auto idle = [&] {
    for (int i = 0; i < 400; ++i) {
      httplib::Client mc("127.0.0.1", s.port());
      auto r = mc.Get("/metrics");
      if (r && test::metric(r->body, "vllm:num_requests_running{") == 0 && test::metric(r->body, "vllm:num_requests_waiting{") == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  idle();
  const int64_t rss_warm = test::process_rss(s.pid());
  {
    std::lock_guard<std::mutex> lk(mu);
    latencies.clear();
  }
  run(seconds * 0.8, 100);
  idle();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t rss_end = test::process_rss(s.pid());
  std::sort(latencies.begin(), latencies.end());
  ASSERT_FALSE(latencies.empty());
  const double p50 = latencies[latencies.size() / 2], p99 = latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)];
  std::printf("hostile soak: %zu normal requests beside hostile clients, p50 %.3f s, p99 %.3f s, max %.3f s; RSS %.1f MB warm, "
              "%.1f MB after\n", latencies.size(), p50, p99, latencies.back(), rss_warm / 1e6, rss_end / 1e6);
  for (auto& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(hostile.failures, 0) << "a hostile request got a 5xx";
  // Latency is a promise about an otherwise idle machine: checked in the dedicated soak run
  // (EAGLET_SOAK_SECONDS set, as CI's soak step does alone), reported when other tests share
  // the two cores.
  if (std::getenv("EAGLET_SOAK_SECONDS") && !test::kSanitized) {
    EXPECT_LT(p99, 2.0);
  }
  if (!test::kSanitized) {
    EXPECT_LT(double(rss_end), 1.1 * double(rss_warm)) << rss_warm << " -> " << rss_end;
  }
  test::RawConnection lingering(s.port());  // a slow client still connected at SIGTERM
  lingering.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");
  const auto t0 = clock_type::now();
  EXPECT_EQ(s.terminate(), 0);
  EXPECT_LT(std::chrono::duration<double>(clock_type::now() - t0).count(), test::kSanitized ? 20.0 : 5.0);
}

}  // namespace
}  // namespace eaglet
