// The server against adversarial clients, one test per failure found in issue 12: malformed
// content parts, huge prompts, clients that leave, out-of-range token ids, stale gauges, slow
// clients, shutdown mid-stream, deeply nested bodies, form content types, and /metrics access.
// Most run on the built-in model (no ../shared needed); every request goes to 127.0.0.1.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "io/mapped_file.h"
#include "server/openai_server.h"
#include "support/raw_http.h"
#include "support/server_process.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

struct Reply {
  int status = 0;
  json body;
};

Reply post(int port, const std::string& path, const std::string& body, const httplib::Headers& h = {},
           const std::string& type = "application/json") {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  auto r = c.Post(path.c_str(), h, body, type.c_str());
  if (!r) return {-1, json()};
  Reply out{r->status, json()};
  try {
    out.body = json::parse(r->body);
  } catch (...) {
    out.body = r->body;
  }
  return out;
}

std::string metrics_text(int port, const httplib::Headers& h = {}) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics", h);
  return r && r->status == 200 ? r->body : "";
}

// Polls /metrics until `done(text)` or `seconds` pass; returns the last text.
std::string wait_for_metrics(int port, const std::function<bool(const std::string&)>& done, double seconds) {
  const auto t0 = clock_type::now();
  std::string text;
  while (since(t0) < seconds) {
    text = metrics_text(port);
    if (done(text)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return text;
}

double running(const std::string& m) { return test::metric(m, "vllm:num_requests_running{"); }

// Failure 1: {"type": 5} in a content part threw a JSON type error that became a 500.
TEST(ServerHardening, ContentPartsWithNonStringTypeAre400) {
  test::ServerProcess s("--builtin");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  for (const char* part : {R"({"type": 5, "text": "x"})", R"({"type": null, "text": "x"})", R"(["text"])",
                           R"({"type": "image_url", "image_url": {}})", R"({"type": "text", "text": 7})"}) {
    const std::string body = std::string(R"({"messages": [{"role": "user", "content": [)") + part + "]}]}";
    Reply r = post(s.port(), "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << part << " -> " << r.body.dump();
    EXPECT_EQ(r.body["error"]["param"], "messages[0].content[0]") << r.body.dump();
  }
  EXPECT_EQ(s.terminate(), 0);
}

// Failure 2: a 3.9 MB prompt took 99.5 s of CPU before the context-length check answered.
TEST(ServerHardening, HugePromptIsRefusedBeforeTokenizing) {
  EAGLET_REQUIRE_SHARED();  // stories260K's SentencePiece normalizer was the quadratic part
  test::ServerProcess s("-m " + test::shared_dir() + "/models/stories260K-hf");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  std::string prompt;
  while (prompt.size() < 3'900'000) prompt += "ab ";
  const auto t0 = clock_type::now();
  Reply r = post(s.port(), "/v1/completions", json{{"prompt", prompt}}.dump());
  EXPECT_EQ(r.status, 400) << r.body.dump().substr(0, 300);
  EXPECT_EQ(r.body["error"]["param"], "prompt");
  EXPECT_LT(since(t0), 10.0);
  // A prompt just over the context is tokenized (no lower bound refuses it) and refused too.
  std::string over;
  while (over.size() < 3000) over += "Once upon a time ";
  r = post(s.port(), "/v1/completions", json{{"prompt", over}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("maximum context length"), std::string::npos);
  EXPECT_EQ(s.terminate(), 0);
}

// Failure 3: two n=16 requests whose client left after 0.3 s still generated 16,000 tokens.
TEST(ServerHardening, NonStreamingRequestsAreCancelledWhenTheClientLeaves) {
  test::ServerProcess s("--builtin --max-num-seqs 32");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  const std::string body = R"({"prompt": "Once", "n": 16, "max_tokens": 2000, "ignore_eos": true, "temperature": 1})";
  {
    test::RawConnection a(s.port()), b(s.port());
    ASSERT_TRUE(a.send(test::http_post("/v1/completions", body)));
    ASSERT_TRUE(b.send(test::http_post("/v1/completions", body)));
    wait_for_metrics(s.port(), [](const std::string& m) { return running(m) == 32; }, 10);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }  // both clients close their connections here
  const auto t0 = clock_type::now();
  const std::string m = wait_for_metrics(s.port(), [](const std::string& m) { return running(m) == 0; }, 20);
  EXPECT_EQ(running(m), 0);
  EXPECT_LT(since(t0), 5.0) << "the sequences ran on after their clients left";
  EXPECT_LT(test::metric(m, "vllm:generation_tokens_total{"), 2 * 16 * 2000 / 2);
  EXPECT_EQ(test::metric(m, "vllm:request_success_total{model_name=\"eaglet-builtin\",engine=\"0\",finished_reason=\"abort\"}"), 32);
  EXPECT_EQ(s.terminate(), 0);
}

// Failure 4: prompt [4294967296] was accepted and behaved like [0].
TEST(ServerHardening, TokenIdsOutsideTheVocabularyAreRefusedNotWrapped) {
  test::ServerProcess s("--builtin");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  for (const char* ids : {"[4294967296]", "[-4294967295]", "[18446744073709551615]", "[1, 259]", "[-1]"}) {
    Reply r = post(s.port(), "/v1/completions", std::string(R"({"max_tokens": 1, "prompt": )") + ids + "}");
    EXPECT_EQ(r.status, 400) << ids << " -> " << r.body.dump();
    EXPECT_EQ(r.body["error"]["param"], "prompt") << ids;
  }
  EXPECT_EQ(post(s.port(), "/v1/completions", R"({"max_tokens": 1, "prompt": [1, 258]})").status, 200);
  EXPECT_EQ(s.terminate(), 0);
}

// Failure 5: num_requests_running and kv_cache_usage_perc kept their busy values on an idle server.
TEST(ServerHardening, GaugesReturnToZeroWhenIdle) {
  test::ServerProcess s("--builtin");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      post(s.port(), "/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 40 + 10 * i}, {"stream", i % 2 == 0}}.dump());
    });
  for (auto& t : clients) t.join();
  const std::string m = wait_for_metrics(s.port(), [](const std::string& m) {
    return running(m) == 0 && test::metric(m, "vllm:kv_cache_usage_perc{") == 0;
  }, 5);
  EXPECT_EQ(running(m), 0);
  EXPECT_EQ(test::metric(m, "vllm:num_requests_waiting{"), 0);
  EXPECT_EQ(test::metric(m, "vllm:kv_cache_usage_perc{"), 0);
  EXPECT_GT(test::metric(m, "vllm:generation_tokens_total{"), 0);
  EXPECT_GT(test::metric(m, "process_resident_memory_bytes"), 0);
  EXPECT_EQ(s.terminate(), 0);
}

// Failure 6: eight clients sending a header byte every 4 s blocked everyone else.
TEST(ServerHardening, SlowClientsNeitherStallOthersNorStayForever) {
  test::ServerProcess s("--builtin --request-timeout 3");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  std::vector<std::unique_ptr<test::RawConnection>> slow;
  for (int i = 0; i < 24; ++i) slow.push_back(std::make_unique<test::RawConnection>(s.port()));
  std::atomic<bool> stop{false};
  std::thread trickle([&] {  // one more header byte per connection every second
    const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa";
    for (size_t i = 0; i < head.size() && !stop; ++i) {
      for (auto& c : slow) c->send(head.substr(i, 1));
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = clock_type::now();
  Reply r = post(s.port(), "/v1/completions", R"({"prompt": "Hi", "max_tokens": 4})");
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(since(t0), 5.0) << "a normal request waited behind the slow clients";  // it waited 60 s before
  // The request deadline closes them although they keep sending.
  int closed = 0;
  for (auto& c : slow) closed += c->closed_by_server(6.0);
  EXPECT_EQ(closed, 24);
  stop = true;
  trickle.join();
  // A body that trickles in is cut off the same way.
  test::RawConnection body(s.port());
  body.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");
  EXPECT_TRUE(body.closed_by_server(6.0));
  EXPECT_EQ(s.terminate(), 0);
}

// Failure 7: on SIGTERM with streams in flight, 2 of 4 clients got no [DONE].
TEST(ServerHardening, ShutdownEndsEveryStreamWithAbortAndDone) {
  test::ServerProcess s("--builtin --drain-timeout 0.5");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  std::vector<std::unique_ptr<test::RawConnection>> streams;
  const std::string body = R"({"prompt": "Once", "max_tokens": 2000, "ignore_eos": true, "stream": true})";
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::make_unique<test::RawConnection>(s.port()));
    ASSERT_TRUE(streams.back()->send(test::http_post("/v1/completions", body)));
  }
  std::vector<std::string> got(4);
  for (int i = 0; i < 4; ++i) got[size_t(i)] = streams[size_t(i)]->read(10, "data: {");
  ::kill(s.pid(), SIGTERM);
  for (int i = 0; i < 4; ++i) {
    got[size_t(i)] += streams[size_t(i)]->read(30, "0\r\n\r\n");
    EXPECT_NE(got[size_t(i)].find("\"finish_reason\":\"abort\""), std::string::npos) << "stream " << i;
    EXPECT_NE(got[size_t(i)].find("data: [DONE]\n\n\r\n0\r\n\r\n"), std::string::npos) << "stream " << i << " was cut";
  }
  EXPECT_EQ(s.terminate(), 0);
}

// Failure 13: a 4 MB body of '[' allocated ~140 MB (eight at once peaked at 1.3 GB and left the
// process at 610 MB); a JSON body over 8 KB sent as a form got 413 although the limit is 4 MB.
TEST(ServerHardening, DeepBodiesAreRefusedCheaplyAndFormsAreJson) {
  test::ServerProcess s("--builtin");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  const int64_t rss_before = test::process_rss(s.pid());
  std::vector<std::thread> clients;
  std::atomic<int> refused{0};
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      Reply r = post(s.port(), "/v1/completions", std::string(4'000'000, '['));
      refused += r.status == 400 && r.body["error"]["message"].get<std::string>().find("nests deeper") != std::string::npos;
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(refused, 8);
  const int64_t rss_after = test::process_rss(s.pid());
  if (!test::kSanitized) {
    EXPECT_LT(rss_after - rss_before, int64_t(100) << 20) << rss_before << " -> " << rss_after;
  }
  // Deep but legal nesting inside the limit still parses.
  std::string nested = "1";
  for (int i = 0; i < 30; ++i) nested = "[" + nested + "]";
  EXPECT_EQ(post(s.port(), "/v1/completions", R"({"prompt": "Hi", "max_tokens": 1, "user": )" + nested + "}").status, 200);
  // curl -d sends form-encoded content types: the body is still the JSON request.
  const std::string big = json{{"prompt", "Hi"}, {"max_tokens", 1}, {"user", std::string(100'000, 'u')}}.dump();
  EXPECT_EQ(post(s.port(), "/v1/completions", big, {}, "application/x-www-form-urlencoded").status, 200);
  EXPECT_EQ(post(s.port(), "/v1/completions", std::string(5 << 20, ' ')).status, 413);
  EXPECT_EQ(s.terminate(), 0);
}

// Also found: /metrics was open without the API key; the key comparison was not constant-time.
TEST(ServerHardening, MetricsNeedTheKeyUnlessPublic) {
  test::ServerProcess s("--builtin --api-key sekrit");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  httplib::Client c("127.0.0.1", s.port());
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  EXPECT_EQ(c.Get("/metrics", {{"Authorization", "Bearer sekri"}})->status, 401);
  EXPECT_EQ(c.Get("/metrics", {{"Authorization", "Bearer sekrit"}})->status, 200);
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(s.terminate(), 0);
  test::ServerProcess p("--builtin --api-key sekrit --metrics-public");
  ASSERT_TRUE(p.ready());
  EXPECT_EQ(httplib::Client("127.0.0.1", p.port()).Get("/metrics")->status, 200);
  EXPECT_EQ(p.terminate(), 0);
}

TEST(ServerHardening, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("Bearer abc", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal("Bearer abd", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal("Bearer ab", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal("Bearer abcd", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal("", "Bearer abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

}  // namespace
}  // namespace eaglet
