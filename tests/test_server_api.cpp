// What vLLM and OpenAI-client users bring to `eaglet serve` works unchanged: vLLM's metric names
// and labels, lm-evaluation-harness-style prompt scoring (echo + logprobs, max_tokens 0), several
// prompts per request, penalties and logit_bias, /tokenize and /detokenize, chat_template_kwargs
// and --chat-template, --seed, --generation-config, llama-server's option names, model ids from
// the local Hugging Face cache; every other OpenAI field is a 400 that names it. These run on a
// tiny random target over the byte vocabulary, so they need nothing from ../shared.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "io/hf_cache.h"
#include "io/mapped_file.h"
#include "support/raw_http.h"
#include "support/server_process.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using json = nlohmann::json;

json post(httplib::Client& c, const std::string& path, const json& body, int* status = nullptr) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  if (!r) return json{{"transport_error", true}};
  if (status) *status = r->status;
  return json::parse(r->body, nullptr, false);
}

struct Target {
  test::TempDir dir;
  std::string path = dir.file("model");
  Target() { test::write_byte_vocab_target(path, /*chat_template=*/true); }
};

// A random EAGLE-3 draft over the byte target's whole vocabulary, in the target's folder.
std::string random_draft(const Target& t) {
  test::DraftSpec ds;
  ds.vocab = ds.draft_vocab = 259;
  ds.scale = 0.3f;
  test::write_draft(t.dir.file("draft"), ds);
  return t.dir.file("draft");
}

std::vector<int> tokenize(httplib::Client& c, const std::string& text, bool special = true) {
  const json t = post(c, "/tokenize", {{"prompt", text}, {"add_special_tokens", special}});
  return t["tokens"].get<std::vector<int>>();
}

TEST(ServerApi, VllmMetricNamesLabelsAndFamilies) {
  Target t;
  test::ServerProcess s("-m " + t.path + " --served-model-name 'we\"ird\\name'");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  httplib::Client c(s.url());
  int status = 0;
  const json r = post(c, "/v1/completions", {{"prompt", "the cat"}, {"max_tokens", 7}, {"temperature", 0}, {"ignore_eos", true}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const std::string m = c.Get("/metrics")->body;
  const std::string l = "{model_name=\"we\\\"ird\\\\name\",engine=\"0\"";  // escaped label values
  for (const char* family : {"e2e_request_latency_seconds", "request_queue_time_seconds", "request_prefill_time_seconds",
                             "request_decode_time_seconds", "request_time_per_output_token_seconds"})
    EXPECT_EQ(test::metric(m, std::string("vllm:") + family + "_count" + l + "}"), 1) << family << "\n" << m;
  EXPECT_EQ(test::metric(m, "vllm:request_prompt_tokens_sum" + l + "}"), r["usage"]["prompt_tokens"].get<double>());
  EXPECT_EQ(test::metric(m, "vllm:request_generation_tokens_sum" + l + "}"), 7);
  EXPECT_EQ(test::metric(m, "vllm:time_per_output_token_seconds_count" + l + "}"), 6);  // 7 tokens, 6 gaps
  EXPECT_GE(test::metric(m, "vllm:iteration_tokens_total_count" + l + "}"), 7);
  EXPECT_EQ(test::metric(m, "vllm:num_preemptions_total" + l + "}"), 0);
  EXPECT_EQ(test::metric(m, "vllm:cache_config_info" + l + ",block_size=\"16\""), 1) << m;
  // CPU-sized buckets: a two-hour request still lands in a finite bucket.
  EXPECT_EQ(test::metric(m, "vllm:e2e_request_latency_seconds_bucket" + l + ",le=\"7680\"}"), 1);
  EXPECT_EQ(m.find("eaglet:"), std::string::npos);
  EXPECT_EQ(s.terminate(), 0);

  test::ServerProcess e("-m " + t.path + " --metrics-prefix eaglet");
  ASSERT_TRUE(e.ready());
  const std::string em = httplib::Client(e.url()).Get("/metrics")->body;
  EXPECT_NE(em.find("eaglet:e2e_request_latency_seconds_bucket"), std::string::npos);
  EXPECT_EQ(em.find("vllm:"), std::string::npos);
}

// lm-evaluation-harness scores a continuation by sending context + continuation with echo,
// logprobs and max_tokens 0: the continuation's scores must be the ones generation reported.
TEST(ServerApi, EchoWithLogprobsScoresThePromptAsGenerationDoes) {
  Target t;
  test::ServerProcess s("-m " + t.path + " --spec-method ngram");
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  httplib::Client c(s.url());
  const std::vector<int> context = tokenize(c, "once upon a");
  // The random target's continuation biased onto lower-case letters, so each token's text maps
  // back to its id; logprobs are the model's own (raw) ones either way, as vLLM reports them.
  json letters = json::object();
  for (char ch = 'a'; ch <= 'z'; ++ch) letters[std::to_string(tokenize(c, std::string(1, ch), false).at(0))] = 30;
  int status = 0;
  const json gen = post(c, "/v1/completions",
                        {{"prompt", context}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 2}, {"ignore_eos", true},
                         {"logit_bias", letters}}, &status);
  ASSERT_EQ(status, 200) << gen.dump();
  const json& glp = gen["choices"][0]["logprobs"];
  ASSERT_EQ(glp["tokens"].size(), 6u);
  std::vector<int> full = context;
  for (auto& tok : glp["tokens"]) full.push_back(tokenize(c, tok.get<std::string>(), false).at(0));

  const json sc = post(c, "/v1/completions", {{"prompt", full}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}, {"temperature", 0}},
                       &status);
  ASSERT_EQ(status, 200) << sc.dump();
  const json& lp = sc["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), full.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(sc["usage"]["completion_tokens"], 0);
  EXPECT_EQ(sc["choices"][0]["finish_reason"], "length");
  for (size_t i = 0; i < 6; ++i) {
    const size_t at = context.size() + i;
    EXPECT_NEAR(lp["token_logprobs"][at].get<double>(), glp["token_logprobs"][i].get<double>(), 1e-4) << i;
    EXPECT_EQ(lp["tokens"][at], glp["tokens"][i]);
    // The alternatives lm-eval's is_greedy reads: the same as generation's (two byte tokens that
    // are not UTF-8 on their own can share a key, so compare by key).
    EXPECT_EQ(lp["top_logprobs"][at].size(), glp["top_logprobs"][i].size());
    for (auto& [tok, v] : glp["top_logprobs"][i].items())
      EXPECT_NEAR(lp["top_logprobs"][at].value(tok, 0.0), v.get<double>(), 1e-4) << i << " " << tok;
  }
  for (size_t i = 1; i < full.size(); ++i) EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0) << i;
  EXPECT_EQ(lp["text_offset"][1].get<size_t>(), lp["tokens"][0].get<std::string>().size());

  // echo without logprobs: the prompt text, then the completion; streaming too.
  const json e = post(c, "/v1/completions", {{"prompt", "the dog"}, {"max_tokens", 3}, {"echo", true}, {"temperature", 0}});
  const json plain = post(c, "/v1/completions", {{"prompt", "the dog"}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_TRUE(e["choices"][0]["text"].get<std::string>().ends_with("the dog" + plain["choices"][0]["text"].get<std::string>()))
      << e.dump() << plain.dump();
  post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}, &status);
  EXPECT_EQ(status, 400);  // max_tokens 0 only with echo
}

TEST(ServerApi, SeveralPromptsPerRequest) {
  Target t;
  test::ServerProcess s("-m " + t.path);
  ASSERT_TRUE(s.ready());
  httplib::Client c(s.url());
  int status = 0;
  const json many = post(c, "/v1/completions",
                         {{"prompt", {"the cat", "a dog ran"}}, {"n", 2}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}}, &status);
  ASSERT_EQ(status, 200) << many.dump();
  ASSERT_EQ(many["choices"].size(), 4u);
  int prompt_tokens = 0;
  for (int p = 0; p < 2; ++p) {
    const std::string text = p ? "a dog ran" : "the cat";
    const json one = post(c, "/v1/completions", {{"prompt", text}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}});
    prompt_tokens += one["usage"]["prompt_tokens"].get<int>();
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(many["choices"][p * 2 + i]["index"], p * 2 + i);
      EXPECT_EQ(many["choices"][p * 2 + i]["text"], one["choices"][0]["text"]) << p << " " << i;
    }
  }
  EXPECT_EQ(many["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(many["usage"]["completion_tokens"], 16);
  const json ids = post(c, "/v1/completions", {{"prompt", {{1, 70, 71}, {1, 72}}}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 200) << ids.dump();
  EXPECT_EQ(ids["choices"].size(), 2u);
  const json bad = post(c, "/v1/completions", {{"prompt", {"ok", {1, 99999}}}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "prompt[1]");
}

TEST(ServerApi, PenaltiesAndLogitBiasShapeTheOutput) {
  Target t;
  // With n-gram drafting on: sequences with penalties decode without drafts, so they stay exact.
  test::ServerProcess s("-m " + t.path + " --spec-method ngram");
  ASSERT_TRUE(s.ready());
  httplib::Client c(s.url());
  const int a = tokenize(c, "a", false).at(0), b = tokenize(c, "b", false).at(0);
  auto text_of = [&](json extra) {
    json body = {{"prompt", "x"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
    body.update(extra);
    int status = 0;
    const json r = post(c, "/v1/completions", body, &status);
    EXPECT_EQ(status, 200) << r.dump();
    return r["choices"][0]["text"].get<std::string>();
  };
  EXPECT_EQ(text_of({{"logit_bias", {{std::to_string(a), 100}}}}), "aaaaaaaa");  // the bias wins every step
  // Both biased alike: the model's own small preference picks one; a frequency penalty of 2 per
  // use makes the other win before long. (The exact formulas: Sampling.PenaltiesAndLogitBias.)
  const json both = {{std::to_string(a), 100}, {std::to_string(b), 100}};
  const std::string free = text_of({{"logit_bias", both}}), penalised = text_of({{"logit_bias", both}, {"frequency_penalty", 2.0}});
  EXPECT_EQ(free.find_first_not_of("ab"), std::string::npos) << free;
  EXPECT_EQ(penalised.find_first_not_of("ab"), std::string::npos) << penalised;
  EXPECT_NE(penalised.find('a'), std::string::npos) << penalised;
  EXPECT_NE(penalised.find('b'), std::string::npos) << penalised;
  int status = 0;
  post(c, "/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"100000", 5}}}}, &status);
  EXPECT_EQ(status, 400);
  post(c, "/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"7", 500}}}}, &status);
  EXPECT_EQ(status, 400);
  post(c, "/v1/completions", {{"prompt", "x"}, {"presence_penalty", 3}}, &status);
  EXPECT_EQ(status, 400);
}

TEST(ServerApi, TokenizeDetokenizeAndChatTemplateKwargs) {
  Target t;
  const std::string tmpl = t.dir.file("t.jinja");
  test::write_text(tmpl, "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
                         "{% if enable_thinking %}[think]{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}");
  test::ServerProcess s("-m " + t.path + " --chat-template " + tmpl);
  ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
  httplib::Client c(s.url());
  int status = 0;
  const json tk = post(c, "/tokenize", {{"prompt", "hello"}, {"add_special_tokens", false}}, &status);
  ASSERT_EQ(status, 200) << tk.dump();
  EXPECT_EQ(tk["count"], tk["tokens"].size());
  EXPECT_GT(tk["max_model_len"].get<int>(), 0);
  EXPECT_EQ(post(c, "/detokenize", {{"tokens", tk["tokens"]}})["prompt"], "hello");
  auto chat_text = [&](json kwargs) {
    json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    if (!kwargs.is_null()) body["chat_template_kwargs"] = kwargs;
    const json r = post(c, "/tokenize", body);
    return post(c, "/detokenize", {{"tokens", r["tokens"]}})["prompt"].get<std::string>();
  };
  EXPECT_EQ(chat_text(nullptr), "<user>hi<assistant>");  // --chat-template replaced the tokenizer's
  EXPECT_EQ(chat_text({{"enable_thinking", true}}), "<user>hi[think]<assistant>");
  post(c, "/tokenize", {{"prompt", "a"}, {"messages", json::array()}}, &status);
  EXPECT_EQ(status, 400);
  const json bad = post(c, "/detokenize", {{"tokens", {1, 1 << 20}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "tokens");
}

// Every field of OpenAI's request schemas, with a plausible value: honoured (200), or a 400
// whose `param` names it. Unknown fields are refused the same way, never silently ignored.
TEST(ServerApi, EveryOpenAiFieldIsHonouredOrRefusedByName) {
  Target t;
  test::ServerProcess s("-m " + t.path);
  ASSERT_TRUE(s.ready());
  httplib::Client c(s.url());
  const std::vector<std::pair<std::string, json>> common = {
      {"frequency_penalty", 0.5}, {"presence_penalty", 0.5}, {"logit_bias", {{"5", 1}}}, {"seed", 3}, {"stop", "zz"},
      {"stream", false}, {"temperature", 0.7}, {"top_p", 0.9}, {"n", 2}, {"user", "u"}, {"max_tokens", 3},
      {"stream_options", nullptr}, {"metadata", {{"k", "v"}}}, {"store", false}, {"service_tier", "auto"}};
  const std::vector<std::pair<std::string, json>> completion_only = {
      {"echo", true}, {"best_of", 2}, {"logprobs", 2}, {"suffix", "tail"}, {"prompt_logprobs", 1}};
  const std::vector<std::pair<std::string, json>> chat_only = {
      {"logprobs", true}, {"top_logprobs", 2}, {"max_completion_tokens", 3}, {"response_format", {{"type", "json_object"}}},
      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", json::object()}}}}},
      {"response_format", {{"type", "text"}}}, {"tool_choice", "none"}, {"parallel_tool_calls", true}, {"functions", {{{"name", "f"}}}}, {"function_call", "auto"},
      {"modalities", {"text", "audio"}}, {"audio", {{"voice", "alloy"}, {"format", "wav"}}}, {"prediction", {{"type", "content"}, {"content", "x"}}},
      {"reasoning_effort", "low"}, {"web_search_options", json::object()}, {"chat_template_kwargs", {{"enable_thinking", false}}},
      {"verbosity", "low"}, {"prompt_cache_key", "k"}, {"safety_identifier", "s"}};
  const std::set<std::string> refused = {"definitely_not_a_field", "best_of", "suffix", "prompt_logprobs", "functions", "function_call",
                                         "modalities", "audio", "prediction", "reasoning_effort", "web_search_options",
                                         "verbosity", "prompt_cache_key", "safety_identifier"};
  auto check = [&](bool chat, const std::string& k, const json& v) {
    json body = chat ? json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}}
                     : json{{"prompt", "hi"}, {"max_tokens", 3}};
    body[k] = v;
    int status = 0;
    const json r = post(c, chat ? "/v1/chat/completions" : "/v1/completions", body, &status);
    if (refused.count(k)) {
      EXPECT_EQ(status, 400) << k << "=" << v.dump() << " -> " << r.dump();
      EXPECT_EQ(r["error"]["param"], k) << r.dump();
    } else {
      EXPECT_EQ(status, 200) << k << "=" << v.dump() << " -> " << r.dump();
    }
  };
  for (bool chat : {false, true}) {
    for (auto& [k, v] : common) check(chat, k, v);
    for (auto& [k, v] : chat ? chat_only : completion_only) check(chat, k, v);
    check(chat, "definitely_not_a_field", 1);
  }
  // Structured outputs: a schema keyword eaglet cannot enforce is refused with its JSON path.
  int status = 0;
  const json r = post(c, "/v1/completions", {{"prompt", "hi"}, {"guided_json", {{"type", "number"}, {"minimum", 1}}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "guided_json") << r.dump();
  test::expect_mentions(r["error"]["message"].get<std::string>(), {"guided_json", "$.minimum"});
}

// Every spelling of structured output (OpenAI, vLLM's new and old fields, llama-server's) through
// a server that speculates with an EAGLE-3 draft: each answer obeys its constraint and equals the
// answer of a server without the draft; two constraints at once are refused.
TEST(ServerApi, StructuredOutputsInEverySpellingUnderSpeculation) {
  Target t;
  const std::string draft = random_draft(t);
  test::ServerProcess spec("-m " + t.path + " --draft " + draft + " -k 3");
  test::ServerProcess plain("-m " + t.path);
  ASSERT_TRUE(spec.ready() && plain.ready());
  httplib::Client cs(spec.url()), cp(plain.url());
  const json schema = {{"type", "object"},
                       {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}, {"ok", {{"type", "boolean"}}}}},
                       {"required", {"n", "ok"}}};
  const std::vector<std::pair<std::string, json>> asks = {
      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "r"}, {"schema", schema}, {"strict", true}}}}},
      {"response_format", {{"type", "json_object"}}},
      {"structured_outputs", {{"json", schema}}},
      {"structured_outputs", {{"regex", "[a-c]{2,4}-[0-9]{3}"}}},
      {"structured_outputs", {{"choice", {"yes", "no", "maybe"}}}},
      {"structured_outputs", {{"grammar", "root ::= \"x\" [0-9]{2}"}}},
      {"guided_choice", {"left", "right"}},
      {"guided_regex", "z{3}"},
      {"json_schema", schema},
      {"grammar", "root ::= (\"ab\" | \"cd\"){3}"}};
  for (bool chat : {true, false}) {
    for (const auto& [k, v] : asks) {
      json body = chat ? json{{"messages", {{{"role", "user"}, {"content", "give"}}}}} : json{{"prompt", "give"}};
      body["max_tokens"] = 200;
      body["temperature"] = 0;
      body[k] = v;
      int status = 0, plain_status = 0;
      const json r = post(cs, chat ? "/v1/chat/completions" : "/v1/completions", body, &status);
      const json want = post(cp, chat ? "/v1/chat/completions" : "/v1/completions", body, &plain_status);
      ASSERT_EQ(status, 200) << k << " " << v.dump() << " -> " << r.dump();
      const std::string text = chat ? r["choices"][0]["message"]["content"] : r["choices"][0]["text"];
      const std::string plain_text = chat ? want["choices"][0]["message"]["content"] : want["choices"][0]["text"];
      EXPECT_EQ(text, plain_text) << k << " " << v.dump();
      EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << k << " " << v.dump() << " -> " << text;
      if (k == "structured_outputs" && v.contains("choice")) {
        EXPECT_TRUE(text == "yes" || text == "no" || text == "maybe") << text;
      }
      if (v.dump().find("json") != std::string::npos || k == "json_schema" || k == "response_format") {
        const json parsed = json::parse(text, nullptr, false);
        ASSERT_TRUE(parsed.is_object()) << k << " -> " << text;
        if (v.dump().find("\"n\"") != std::string::npos) {
          EXPECT_TRUE(parsed["n"].is_number_integer() && parsed["n"] >= 0 && parsed["n"] <= 99 && parsed["ok"].is_boolean()) << text;
        }
      }
    }
  }
  // Metrics: every constrained request, its masks and the draft tokens its grammar refused.
  auto m = cs.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(test::metric(m->body, "eaglet:structured_output_requests_total"), double(2 * asks.size())) << m->body;
  EXPECT_GT(test::metric(m->body, "eaglet:structured_output_masks_total"), double(2 * asks.size()));
  EXPECT_GT(test::metric(m->body, "eaglet:structured_output_mask_seconds_total"), 0);
  // The draft is held to the grammar: verification never meets a token it refuses. Without that
  // (--no-constrain-draft) it does, and the answers stay the same.
  EXPECT_EQ(test::metric(m->body, "eaglet:structured_output_refused_draft_tokens_total"), 0);
  test::ServerProcess loose("-m " + t.path + " --draft " + draft + " -k 3 --no-constrain-draft");
  ASSERT_TRUE(loose.ready());
  httplib::Client cl(loose.url());
  for (const auto& [k, v] : asks) {
    const json body = {{"prompt", "give"}, {"max_tokens", 200}, {"temperature", 0}, {k, v}};
    EXPECT_EQ(post(cl, "/v1/completions", body)["choices"][0]["text"], post(cp, "/v1/completions", body)["choices"][0]["text"]) << k;
  }
  auto lm = cl.Get("/metrics");
  ASSERT_TRUE(lm);
  EXPECT_GT(test::metric(lm->body, "eaglet:structured_output_refused_draft_tokens_total"), 0) << lm->body;
  int status = 0;
  const json both = post(cs, "/v1/completions", {{"prompt", "x"}, {"guided_regex", "a"}, {"grammar", "root ::= \"a\""}}, &status);
  EXPECT_EQ(status, 400);
  test::expect_mentions(both["error"]["message"].get<std::string>(), {"guided_regex", "grammar"});
  const json bad = post(cs, "/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= item"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "grammar");
  test::expect_mentions(bad["error"]["message"].get<std::string>(), {"item", "not defined"});
}

// 200 generated schemas (tests/structured/schema_fuzz.py) through a speculating server, sampled:
// every finished output validates with python3-jsonschema; every fourth schema greedy, with and
// without the draft: the same output.
TEST(ServerApi, GeneratedSchemasValidateWithAnIndependentValidator) {
  if (test::run_command("/usr/bin/python3 -c 'import jsonschema' 2>&1").exit_code != 0)
    GTEST_SKIP() << "needs python3-jsonschema (apt; scripts/install-deps.sh installs it)";
  Target t;
  const std::string draft = random_draft(t);
  test::ServerProcess spec("-m " + t.path + " --draft " + draft + " --max-num-seqs 4");
  test::ServerProcess plain("-m " + t.path + " --max-num-seqs 4");
  ASSERT_TRUE(spec.ready() && plain.ready());
  const auto r = test::run_command("/usr/bin/python3 " + test::source_dir() + "/tests/structured/schema_fuzz.py " +
                                   spec.url() + " " + plain.url() + " --count 200 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t start = r.output.find('{');
  ASSERT_NE(start, std::string::npos) << r.output;
  json summary = json::parse(r.output.substr(start), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << r.output;
  summary.erase("failures");
  std::printf("schema fuzz: %s\n", summary.dump().c_str());
  EXPECT_GE(summary["finished"].get<int>(), 100) << r.output;  // most outputs complete, so validation means something
  EXPECT_EQ(summary["greedy_equal"], summary["greedy_compared"]) << r.output;
}

TEST(ServerApi, SeedGenerationConfigAndLlamaServerNames) {
  Target t;
  // --seed: requests without a seed are reproducible from run to run.
  auto sampled = [&](const std::string& args) {
    test::ServerProcess s("-m " + t.path + " " + args);
    EXPECT_TRUE(s.ready()) << read_text_file(s.log_path());
    httplib::Client c(s.url());
    return post(c, "/v1/completions", {{"prompt", "the"}, {"max_tokens", 12}, {"temperature", 1.0}, {"ignore_eos", true}})["choices"][0]["text"];
  };
  EXPECT_EQ(sampled("--seed 11"), sampled("--seed 11"));
  EXPECT_NE(sampled("--seed 11"), sampled("--seed 12"));

  // --generation-config auto: the model's sampling defaults (here greedy) apply to requests that
  // leave them out; vllm: OpenAI's defaults.
  test::write_text(t.path + "/generation_config.json", R"({"temperature": 0.0, "eos_token_id": 2})");
  {
    test::ServerProcess s("-m " + t.path + " -np 3 -c 200");
    ASSERT_TRUE(s.ready()) << read_text_file(s.log_path());
    httplib::Client c(s.url());
    const json a = post(c, "/v1/completions", {{"prompt", "the"}, {"max_tokens", 12}, {"ignore_eos", true}, {"n", 3}});
    EXPECT_EQ(a["choices"][0]["text"], a["choices"][1]["text"]);
    EXPECT_EQ(a["choices"][0]["text"], a["choices"][2]["text"]);
    EXPECT_EQ(c.Get("/v1/models") ? json::parse(c.Get("/v1/models")->body)["data"][0]["max_model_len"] : json(), 200);  // -c
  }
  test::write_text(t.path + "/generation_config.json", R"({"temperature": -1})");
  auto r = test::run_command(test::eaglet_binary() + " serve " + t.path + " --port 0 2>&1");
  EXPECT_NE(r.exit_code, 0);
  test::expect_mentions(r.output, {"generation_config.json", "temperature"});

  r = test::run_command(test::eaglet_binary() + " serve --port 0 2>&1");  // no model: not the random one silently
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--builtin"), std::string::npos) << r.output;
}

TEST(ServerApi, ModelIdsResolveThroughTheLocalHuggingFaceCache) {
  test::TempDir d;
  const std::string snap = d.file("hub/models--tiny-org--tiny-model/snapshots/0123abcd");
  std::filesystem::create_directories(snap);
  std::filesystem::create_directories(d.file("hub/models--tiny-org--tiny-model/refs"));
  test::write_text(d.file("hub/models--tiny-org--tiny-model/refs/main"), "0123abcd");
  test::write_byte_vocab_target(snap);
  ::setenv("HF_HUB_CACHE", d.file("hub").c_str(), 1);
  EXPECT_EQ(resolve_model_path("tiny-org/tiny-model"), snap);
  EXPECT_EQ(resolve_model_path("tiny-org/tiny-model@0123abcd"), snap);
  EXPECT_EQ(resolve_model_path(d.path()), d.path());  // paths are taken as they are
  test::expect_mentions(test::error_of([] { resolve_model_path("tiny-org/other"); }), {"Hugging Face cache", "models--tiny-org--other"});
  test::expect_mentions(test::error_of([] { resolve_model_path("tiny-org/tiny-model@v2"); }), {"revision 'v2'"});
  auto r = test::run_command("HF_HUB_CACHE=" + d.file("hub") + " " + test::eaglet_binary() +
                             " generate -m tiny-org/tiny-model -p hi -n 3 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ::unsetenv("HF_HUB_CACHE");
}

}  // namespace
}  // namespace eaglet
