// The server against issue 28's hostile clients and careless operators, through real HTTP: body
// budgets taken by announcing, slow or exploding chat templates, fields of the wrong type,
// sockets past the descriptor limit, responses that grow without bound, an empty API key, and the
// small ones (bearer in lower case, /tokenize's model, chat logprobs' bytes, a dataset with a cut
// character). Each test failed before its fix. All on the built-in model, on 127.0.0.1.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "io/mapped_file.h"
#include "support/raw_http.h"
#include "support/server_process.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// A request that hung did so for minutes or forever; the bound is well above a loaded CI
// machine's time for the work (test_template_limits.cpp checks that work itself).
constexpr double kHang = 60.0;

struct Reply {
  int status = -1;
  json body;
  double seconds = 0;
};

Reply post(int port, const std::string& path, const json& body, const httplib::Headers& h = {}) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120);
  const auto t0 = clock_type::now();
  auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
  Reply out;
  out.seconds = since(t0);
  if (!r) return out;
  out.status = r->status;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

std::string error_message(const Reply& r) { return r.body.is_object() ? r.body["error"].value("message", "") : ""; }

// Item 1: the body budget was charged from the announced Content-Length before any byte came.
TEST(ServerLimits, AnnouncedBodiesDoNotTakeTheBudget) {
  test::ServerProcess s("--builtin");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  std::vector<std::unique_ptr<test::RawConnection>> announcers;  // 100 x 4 MB announced, ~6 KB sent
  for (int i = 0; i < 100; ++i) {
    announcers.push_back(std::make_unique<test::RawConnection>(s.port()));
    announcers.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: 4194304\r\n\r\n");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Reply r = post(s.port(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(s.terminate(), 0);
}

// Item 2: a 1 MB message through `replace` took 13 s, and slow renders held the only two handler
// threads, so /health stopped answering.
TEST(ServerLimits, SlowTemplatesNeitherHangNorBlockHealth) {
  test::TempDir d;
  test::write_text(d.file("replace.jinja"), "{{ messages[0]['content'].replace('a', 'bb') }}");
  test::ServerProcess s("--builtin --chat-template " + d.file("replace.jinja"));
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  const Reply r = post(s.port(), "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", std::string(1 << 20, 'a')}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("maximum context length"), std::string::npos) << r.body.dump().substr(0, 300);
  EXPECT_LT(r.seconds, kHang);
  EXPECT_EQ(s.terminate(), 0);

  // A template that runs to its step limit (about a second each), six at once, while /health is polled.
  test::write_text(d.file("slow.jinja"), "{% for i in range(2000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}");
  test::ServerProcess slow("--builtin --chat-template " + d.file("slow.jinja"));
  ASSERT_TRUE(slow.ready());
  std::vector<std::thread> clients;
  std::atomic<int> refused{0};
  for (int i = 0; i < 6; ++i)
    clients.emplace_back([&] {
      if (post(slow.port(), "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}).status == 400) ++refused;
    });
  double worst = 0;
  for (int i = 0; i < 30; ++i) {
    httplib::Client c("127.0.0.1", slow.port());
    const auto t0 = clock_type::now();
    auto h = c.Get("/health");
    EXPECT_TRUE(h && h->status == 200);
    worst = std::max(worst, since(t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(refused, 6);
  EXPECT_LT(worst, test::kSanitized ? 2.0 : 0.5) << "/health waited behind template renders";
  EXPECT_EQ(slow.terminate(), 0);
}

// Item 3: a client multiplied a template's string by its own kwarg (9e18 steps); every template
// operation now counts against the render's budget, and SIGTERM stops renders in flight.
TEST(ServerLimits, TemplateKwargsCannotExplodeAndShutdownIsPrompt) {
  test::TempDir d;
  test::write_text(d.file("kw.jinja"), "{{ pad * n }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
                                       "{% if k %}{{ range(k)|unique|join(',') }}{% endif %}");
  test::ServerProcess s("--builtin --chat-template " + d.file("kw.jinja"));
  ASSERT_TRUE(s.ready());
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  Reply r = post(s.port(), "/v1/chat/completions",
                 {{"messages", msgs}, {"max_tokens", 2}, {"chat_template_kwargs", {{"pad", ""}, {"n", 9000000000000000000LL}}}});
  EXPECT_EQ(r.status, 200) << r.body.dump();
  EXPECT_LT(r.seconds, kHang);
  r = post(s.port(), "/v1/chat/completions", {{"messages", msgs}, {"chat_template_kwargs", {{"pad", "x"}, {"n", 9000000000000000000LL}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("limit"), std::string::npos) << r.body.dump();
  EXPECT_EQ(r.body["error"]["param"], "messages");
  // Heavy renders in flight, then SIGTERM: the server exits within 5 s.
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&] {
      post(s.port(), "/v1/chat/completions", {{"messages", msgs}, {"chat_template_kwargs", {{"pad", ""}, {"n", 0}, {"k", 1000000}}}});
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = clock_type::now();
  EXPECT_EQ(s.terminate(), 0);
  EXPECT_LT(since(t0), test::kSanitized ? 15.0 : 5.0);
  for (auto& t : clients) t.join();
}

// Item 4: a field of the wrong type is a 400 naming it, never a 500.
TEST(ServerLimits, WrongFieldTypesAre400) {
  test::ServerProcess s("--builtin");
  ASSERT_TRUE(s.ready());
  for (const json& body : {json{{"prompt", "hi"}, {"add_special_tokens", 1}}, json{{"prompt", "hi"}, {"add_special_tokens", "yes"}}}) {
    const Reply r = post(s.port(), "/tokenize", body);
    EXPECT_EQ(r.status, 400) << body.dump();
    EXPECT_EQ(r.body["error"]["param"], "add_special_tokens");
  }
  EXPECT_EQ(post(s.port(), "/tokenize", {{"prompt", 5}}).status, 400);
  EXPECT_EQ(post(s.port(), "/detokenize", {{"tokens", {1, 2}}, {"model", 7}}).status, 400);
  EXPECT_EQ(s.terminate(), 0);
}

// Item 6: under `ulimit -n`, sockets past the descriptor limit could not even be accepted to be
// told 503; clients timed out and the log repeated "accept failed" ten times a second.
TEST(ServerLimits, ConnectionsFitTheDescriptorLimit) {
  test::ServerProcess s("--builtin", "ulimit -n 200;");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  EXPECT_NE(read_text_file(s.log_path()).find("--max-connections 1024 does not fit the open-file limit"), std::string::npos)
      << read_text_file(s.log_path());
  std::vector<std::unique_ptr<test::RawConnection>> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<test::RawConnection>(s.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  test::RawConnection late(s.port());
  ASSERT_TRUE(late.ok());
  late.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(late.read(5, "}").find("503"), std::string::npos);
  idle.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  httplib::Client c("127.0.0.1", s.port());
  auto h = c.Get("/health");
  EXPECT_TRUE(h && h->status == 200);
  const std::string log = read_text_file(s.log_path());
  size_t warnings = 0;
  for (size_t at = 0; (at = log.find("accept failed", at)) != std::string::npos; ++at) ++warnings;
  EXPECT_LE(warnings, 1u);
  EXPECT_EQ(s.terminate(), 0);
}

// Item 7: a 4 KB request (64 x 511 ids, echo, 20 logprobs, no new tokens) built 16.8 MB and took
// 5 s of engine time; responses now have a budget, checked before the work when it is known.
TEST(ServerLimits, ResponsesHaveABudget) {
  test::ServerProcess s("--builtin --max-num-seqs 16 --max-response-bytes 200000 --max-unsent-bytes 1000000");
  ASSERT_TRUE(s.ready());
  std::vector<int> ids(511);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int(3 + i % 250);
  json many = json::array();
  for (int p = 0; p < 64; ++p) many.push_back(ids);
  Reply r = post(s.port(), "/v1/completions", {{"prompt", many}, {"echo", true}, {"logprobs", 20}, {"max_tokens", 0}});
  EXPECT_EQ(r.status, 400) << r.body.dump().substr(0, 300);
  EXPECT_EQ(r.body["error"]["param"], "logprobs");
  EXPECT_NE(error_message(r).find("--max-response-bytes"), std::string::npos);
  // Refused before the engine scored the prompts (it did, for 5 s, before).
  const auto m = httplib::Client("127.0.0.1", s.port()).Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(test::metric(m->body, "vllm:prompt_tokens_total{"), 0);
  // Known only while generating: the request ends when its response passes the budget.
  r = post(s.port(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 1900}, {"ignore_eos", true}, {"logprobs", 5}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"], "max_tokens");
  EXPECT_NE(error_message(r).find("200000 bytes"), std::string::npos) << r.body.dump();
  EXPECT_EQ(post(s.port(), "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 8}, {"logprobs", 2}}).status, 200);
  // A stream nobody reads is closed once a megabyte waits, and its sequences stop.
  {
    test::RawConnection c(s.port());
    c.send(test::http_post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 1900}, {"ignore_eos", true}, {"n", 16},
                                                   {"logprobs", 20}, {"stream", true}}.dump()));
    bool stopped = false;
    for (int i = 0; i < 600 && !stopped; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      httplib::Client m("127.0.0.1", s.port());
      auto res = m.Get("/metrics");
      stopped = res && test::metric(res->body, "vllm:num_requests_running{") == 0 &&
                test::metric(res->body, "vllm:generation_tokens_total{") > 1000;
      if (stopped) {
        EXPECT_LT(test::metric(res->body, "vllm:generation_tokens_total{"), 16 * 1900 * 0.9);
      }
    }
    EXPECT_TRUE(stopped) << "the unread stream ran on";
  }
  EXPECT_EQ(s.terminate(), 0);
}

// Item 8: `--api-key ""` or an empty EAGLET_API_KEY ran an open server without a word.
TEST(ServerLimits, AnEmptyApiKeyIsRefused) {
  const std::string serve = test::eaglet_binary() + " serve --builtin --port 0";
  auto r = test::run_command("timeout 60 " + serve + " --api-key '' 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--api-key is empty"), std::string::npos) << r.output;
  r = test::run_command("EAGLET_API_KEY= timeout 60 " + serve + " 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("EAGLET_API_KEY is set but empty"), std::string::npos) << r.output;
}

// Item 11: the smaller ones.
TEST(ServerLimits, AuthSchemeModelCheckLogprobBytesAndDatasets) {
  test::TempDir d;
  test::write_text(d.file("t.jinja"), "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  test::ServerProcess s("--builtin --api-key k --chat-template " + d.file("t.jinja"));
  ASSERT_TRUE(s.ready());
  const json body = {{"prompt", "hi"}, {"max_tokens", 2}};
  EXPECT_EQ(post(s.port(), "/v1/completions", body, {{"Authorization", "bearer k"}}).status, 200);  // RFC 7235: any case
  EXPECT_EQ(post(s.port(), "/v1/completions", body, {{"Authorization", "BEARER k"}}).status, 200);
  EXPECT_EQ(post(s.port(), "/v1/completions", body, {{"Authorization", "Bearer K"}}).status, 401);  // the key is exact
  EXPECT_EQ(post(s.port(), "/v1/completions", body, {{"Authorization", "Basic k"}}).status, 401);
  httplib::Client c("127.0.0.1", s.port());
  for (const char* open : {"/health", "/ping", "/version"}) {  // probes stay open, as documented
    auto res = c.Get(open);
    EXPECT_TRUE(res && res->status == 200) << open;
  }
  const httplib::Headers auth = {{"Authorization", "Bearer k"}};
  Reply r = post(s.port(), "/tokenize", {{"prompt", "hi"}, {"model", "not-this-one"}}, auth);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body["error"]["param"], "model");
  EXPECT_EQ(post(s.port(), "/detokenize", {{"tokens", {104}}, {"model", "not-this-one"}}, auth).status, 404);
  // Chat logprobs carry each token's UTF-8 bytes (they were always []).
  r = post(s.port(), "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}, {"logprobs", true}, {"top_logprobs", 2}}, auth);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  for (const json& t : r.body["choices"][0]["logprobs"]["content"]) {
    ASSERT_TRUE(t["bytes"].is_array());
    std::string bytes;
    for (auto& b : t["bytes"]) bytes += char(b.get<int>());
    if (t["token"].get<std::string>().find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(bytes, t["token"].get<std::string>());
    }
    EXPECT_FALSE(t["bytes"].empty());
    for (const json& alt : t["top_logprobs"]) EXPECT_FALSE(alt["bytes"].empty());
  }
  // A dataset line cut mid-character: a clear error naming the line, not an uncaught type_error.
  test::write_text(d.file("prompts.txt"), "Once upon a time\nA caf\xC3\nThe end\n");
  const auto lt = test::run_command("timeout 120 " + test::eaglet_binary() + " loadtest --port " + std::to_string(s.port()) +
                                    " --api-key k --dataset " + d.file("prompts.txt") + " --requests 2 --max-tokens 2 2>&1");
  EXPECT_NE(lt.exit_code, 0);
  EXPECT_NE(lt.output.find("prompts.txt:2: invalid UTF-8"), std::string::npos) << lt.output;
  EXPECT_EQ(lt.output.find("type_error"), std::string::npos) << lt.output;
  EXPECT_EQ(s.terminate(), 0);
}

}  // namespace
}  // namespace eaglet
