// The real `eaglet serve` over loopback: OpenAI responses, streaming, batching under load, bad
// requests (including fuzzed bodies), API keys, disconnects, metrics and shutdown. The official
// OpenAI Node SDK drives it in tests/node/openai_sdk_test.mjs.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "io/mapped_file.h"
#include "support/server_process.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using json = nlohmann::json;

// stories260K plus a simple chat template, so the chat endpoint has something to render.
std::string chat_model_dir(const test::TempDir& d) {
  const std::string src = test::shared_dir() + "/models/stories260K-hf", dst = d.file("model");
  std::filesystem::create_directories(dst);
  for (auto f : {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"})
    std::filesystem::create_symlink(src + "/" + f, dst + "/" + f);
  auto cfg = json::parse(read_text_file(src + "/tokenizer_config.json"));
  cfg["chat_template"] =
      "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] | trim }}{% endif %}{% endfor %}";
  test::write_text(dst + "/tokenizer_config.json", cfg.dump());
  return dst;
}

std::string random_draft(const test::TempDir& d) {
  test::DraftSpec ds;
  ds.hidden = ds.target_hidden = 64;
  ds.vocab = ds.draft_vocab = 512;
  ds.heads = ds.kv_heads = 4;
  ds.head_dim = 16;
  test::write_draft(d.file("draft"), ds);
  return d.file("draft");
}

json post(httplib::Client& c, const std::string& path, const std::string& body, int* status = nullptr,
          const httplib::Headers& h = {}) {
  auto r = c.Post(path.c_str(), h, body, "application/json");
  if (!r) return json{{"transport_error", true}};
  if (status) *status = r->status;
  try {
    return json::parse(r->body);
  } catch (...) {
    return json{{"raw", r->body}};
  }
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::shared_dir().empty()) GTEST_SKIP() << "../shared is not present; the server tests use stories260K";
  }
};

TEST_F(ServerTest, CompletionsChatStreamingAndGreedyEqualsGenerate) {
  test::TempDir d;
  const std::string model = chat_model_dir(d);
  test::ServerProcess s("-m " + model + " --served-model-name stories --draft " + random_draft(d) + " -k 3");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60);
  auto gen = test::run_command(test::eaglet_binary() + " generate -m " + model +
                               " -p 'Once upon a time' -n 40 --temperature 0 --json 2>/dev/null");
  const std::string want = json::parse(gen.output)["text"];
  int status = 0;
  json r = post(c, "/v1/completions", R"({"model":"stories","prompt":"Once upon a time","max_tokens":40,"temperature":0})", &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], want);
  EXPECT_EQ(r["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(r["usage"]["completion_tokens"], 40);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");

  // Chat: the template renders the user turn, so the reply equals the completion of that text.
  r = post(c, "/v1/chat/completions",
           R"({"model":"stories","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":40,"temperature":0})",
           &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], want);

  // Streaming: deltas concatenate to the same text; usage comes last; then [DONE].
  std::string body;
  auto res = c.Post("/v1/completions",
                    R"({"prompt":"Once upon a time","max_tokens":40,"temperature":0,"stream":true,"stream_options":{"include_usage":true}})",
                    "application/json");
  ASSERT_TRUE(res) << "transport error " << int(res.error());
  std::string streamed;
  json usage;
  bool done = false;
  std::istringstream lines(res->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    if (line == "data: [DONE]") { done = true; continue; }
    auto chunk = json::parse(line.substr(6));
    if (!chunk["usage"].is_null()) usage = chunk["usage"];
    for (auto& ch : chunk["choices"]) streamed += ch["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(streamed, want);
  EXPECT_EQ(usage["completion_tokens"], 40);

  // Stop strings cut the text; n gives independent choices; equal seeds give equal samples.
  r = post(c, "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":40,"temperature":0,"stop":["Lily"]})");
  EXPECT_EQ(r["choices"][0]["text"], want.substr(0, want.find("Lily")));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  const std::string sampled = R"({"prompt":"Once upon a time","max_tokens":30,"temperature":1.0,"seed":7,"n":3})";
  json a = post(c, "/v1/completions", sampled), b = post(c, "/v1/completions", sampled);
  ASSERT_EQ(a["choices"].size(), 3u);
  EXPECT_EQ(a["choices"], b["choices"]);
  EXPECT_NE(a["choices"][0]["text"], a["choices"][1]["text"]);

  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("vllm:spec_decode_num_drafts_total"), std::string::npos);
  EXPECT_NE(m->body.find("vllm:spec_decode_num_accepted_tokens_per_pos_total"), std::string::npos);
  EXPECT_NE(m->body.find("vllm:time_to_first_token_seconds_bucket"), std::string::npos);
  EXPECT_EQ(s.terminate(), 0);
}

TEST_F(ServerTest, StartsFromAPastedVllmCommandLine) {
  // `vllm serve MODEL --speculative-config '{...}'` with eaglet in place of vllm: the model is
  // positional, the draft and k come from vLLM's JSON.
  test::TempDir d;
  const std::string model = chat_model_dir(d);
  ::setenv("VLLM_API_KEY", "vllm-key", 1);  // vLLM's variable sets the key too (the child inherits it)
  test::ServerProcess s(model + R"( --speculative-config '{"method": "eagle3", "model": ")" + random_draft(d) +
                        R"(", "num_speculative_tokens": 3}')");
  ::unsetenv("VLLM_API_KEY");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60);
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  c.set_bearer_token_auth("vllm-key");
  const json models = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], model);
  const json out = post(c, "/v1/completions", R"({"model": ")" + model + R"(", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})");
  EXPECT_EQ(out["usage"]["completion_tokens"], 8) << out.dump();
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("spec_decode_num_drafts"), std::string::npos);
  auto ping = c.Get("/ping");
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->status, 200);
  EXPECT_EQ(c.Post("/ping", "", "application/json")->status, 200);
  auto version = c.Get("/version");
  ASSERT_TRUE(version);
  EXPECT_FALSE(json::parse(version->body)["version"].get<std::string>().empty());
}

TEST_F(ServerTest, BadRequestsGetOpenAiErrorsAndTheServerKeepsServing) {
  test::ServerProcess s("-m " + test::shared_dir() + "/models/stories260K-hf --served-model-name stories --api-key sekrit "
                        "--max-model-len 128 --max-body-bytes 65536 --spec-method ngram");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(30);
  const httplib::Headers auth = {{"Authorization", "Bearer sekrit"}};
  auto expect_error = [&](const std::string& body, int want, const std::string& param = "") {
    int status = 0;
    json r = post(c, "/v1/completions", body, &status, auth);
    EXPECT_EQ(status, want) << body << " -> " << r.dump();
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_TRUE(r["error"]["message"].is_string());
    EXPECT_TRUE(r["error"]["type"].is_string());
    if (!param.empty()) {
      EXPECT_EQ(r["error"]["param"], param) << body;
    }
  };
  expect_error("{not json", 400);
  expect_error("[1, 2]", 400);
  expect_error(R"({"prompt": 5})", 400, "prompt");
  expect_error(R"({"prompt": "hi", "max_tokens": -3})", 400, "max_tokens");
  expect_error(R"({"prompt": "hi", "max_tokens": 100000000})", 400, "max_tokens");
  expect_error(R"({"prompt": "hi", "max_tokens": "10"})", 400, "max_tokens");
  expect_error(R"({"prompt": "hi", "temperature": "hot"})", 400, "temperature");
  expect_error(R"({"prompt": "hi", "top_p": 0})", 400, "top_p");
  expect_error(R"({"prompt": "hi", "stop": [1]})", 400, "stop");
  expect_error(R"({"prompt": "hi", "n": 0})", 400, "n");
  expect_error(R"({"prompt": [1, 99999]})", 400, "prompt");
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "Once upon a time ";
  expect_error(json{{"prompt", long_prompt}}.dump(), 400, "prompt");
  expect_error(R"({"model": "gpt-4", "prompt": "hi"})", 404, "model");
  int status = 0;
  post(c, "/v1/completions", R"({"prompt": "hi"})", &status);
  EXPECT_EQ(status, 401);
  post(c, "/v1/completions", R"({"prompt": "hi"})", &status, {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(status, 401);
  post(c, "/v1/completions", json{{"prompt", std::string(100000, 'a')}}.dump(), &status, auth);
  EXPECT_EQ(status, 413);
  json chat = post(c, "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})", &status, auth);
  EXPECT_EQ(status, 400);  // stories260K has no chat template
  EXPECT_NE(chat["error"]["message"].get<std::string>().find("chat_template"), std::string::npos);

  // A client that disconnects mid-stream: its request is cancelled and the server carries on.
  {
    httplib::Client quitter("127.0.0.1", s.port());
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = auth;
    req.body = R"({"prompt":"Once upon a time","max_tokens":100,"stream":true,"ignore_eos":true})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
    quitter.send(req);
    EXPECT_GE(chunks, 1);
  }
  // Fuzzed bodies: random bytes, random JSON values, mutated valid requests.
  std::mt19937 rng(42);
  const std::vector<std::string> keys = {"prompt", "max_tokens", "temperature", "top_p", "top_k", "n", "stop", "seed",
                                         "stream", "logprobs", "model", "min_p", "stream_options", "ignore_eos"};
  const std::vector<json> values = {nullptr, true, -1, 0, 1, 7, 1e300, -0.5, "x", "", json::array(), json::array({1, "a"}),
                                    json::object(), json{{"include_usage", "yes"}}, std::string(300, 'z')};
  int ok = 0, client_errors = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string body;
    if (i % 4 == 0) {
      for (int n = int(rng() % 40); n > 0; --n) body += char(rng() % 256);
    } else {
      json j = {{"prompt", "Once"}, {"max_tokens", 2}};
      for (int n = int(rng() % 4); n > 0; --n) j[keys[rng() % keys.size()]] = values[rng() % values.size()];
      body = j.dump();
    }
    int st = 0;
    json r = post(c, "/v1/completions", body, &st, auth);
    ASSERT_FALSE(r.contains("transport_error")) << "server died on body: " << body;
    ASSERT_TRUE(st == 200 || (st >= 400 && st < 500)) << st << " for " << body << " -> " << r.dump();
    (st == 200 ? ok : client_errors)++;
  }
  EXPECT_GT(ok, 100);
  EXPECT_GT(client_errors, 100);
  json r = post(c, "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":5,"temperature":0})", &status, auth);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(r["choices"][0]["text"], ", there was a little");
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(s.terminate(), 0);
}

TEST_F(ServerTest, OfficialOpenAiNodeSdk) {
  const std::string node_dir = test::source_dir() + "/tests/node";
  if (!std::filesystem::exists(node_dir + "/node_modules/openai"))
    GTEST_SKIP() << "the OpenAI Node SDK is not installed (cd tests/node && npm install)";
  test::TempDir d;
  const std::string model = chat_model_dir(d);
  test::ServerProcess s("-m " + model + " --served-model-name stories --draft " + random_draft(d) +
                        " -k 3 --max-num-seqs 16 --api-key node-key --enable-auto-tool-choice --tool-call-parser hermes");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  auto r = test::run_command("cd " + node_dir + " && OPENAI_BASE_URL=" + s.url() + "/v1 OPENAI_API_KEY=node-key EAGLET=" +
                             test::eaglet_binary() + " MODEL_DIR=" + model + " node openai_sdk_test.mjs 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all OpenAI SDK checks passed"), std::string::npos) << r.output;
  EXPECT_EQ(s.terminate(), 0);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

TEST(LoadTest, ReportsLatencyAndThroughputPerConcurrency) {
  if (test::shared_dir().empty()) GTEST_SKIP() << "../shared is not present; uses stories260K";
  test::ServerProcess s("-m " + test::shared_dir() + "/models/stories260K-hf --spec-method ngram");
  ASSERT_TRUE(s.ready());
  test::TempDir d;
  auto r = test::run_command(test::eaglet_binary() + " loadtest --port " + std::to_string(s.port()) +
                             " --concurrency 1,3 --requests 6 --max-tokens 8 --json " + d.file("out.json") + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = json::parse(read_text_file(d.file("out.json")));
  ASSERT_EQ(j.size(), 2u);
  for (auto& level : j) {
    EXPECT_EQ(level["requests"], 6);
    EXPECT_EQ(level["failed"], 0);
    EXPECT_GT(level["output_tokens_per_second"].get<double>(), 0);
    EXPECT_LE(level["ttft_p50_s"].get<double>(), level["ttft_p99_s"].get<double>());
  }
  r = test::run_command(test::eaglet_binary() + " loadtest --host 10.0.0.1 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("loopback"), std::string::npos);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

TEST(ServerCurl, CompletionStreamErrorAndFullQueue) {
  if (test::shared_dir().empty()) GTEST_SKIP() << "../shared is not present; uses stories260K";
  test::ServerProcess s("-m " + test::shared_dir() + "/models/stories260K-hf --served-model-name stories "
                        "--max-num-seqs 1 --max-waiting 1");
  ASSERT_TRUE(s.ready());
  const std::string url = s.url() + "/v1/completions";
  auto r = test::run_command("curl -s " + url + " -H 'Content-Type: application/json' -d "
                             "'{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":5,\"temperature\":0}'");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(json::parse(r.output)["choices"][0]["text"], ", there was a little");
  r = test::run_command("curl -sN " + url + " -H 'Content-Type: application/json' -d "
                        "'{\"prompt\":\"Once upon a time\",\"max_tokens\":3,\"temperature\":0,\"stream\":true}'");
  EXPECT_NE(r.output.find("data: [DONE]"), std::string::npos) << r.output;
  r = test::run_command("curl -s -o /dev/null -w '%{http_code}' " + url + " -d '{\"prompt\": true}'");
  EXPECT_EQ(r.output, "400");
  // One running and one waiting request fill the server: further requests get 503, not a hang.
  r = test::run_command("for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\\n' " + url +
                        " -H 'Content-Type: application/json' -d '{\"prompt\":\"Once\",\"max_tokens\":300,\"ignore_eos\":true}' & "
                        "done; wait");
  EXPECT_NE(r.output.find("503"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("200"), std::string::npos) << r.output;
  EXPECT_EQ(s.terminate(), 0);
}

}  // namespace
}  // namespace eaglet
