// Tool calls and reasoning through `eaglet serve`, speculating with an EAGLE-3 draft: forced tool
// choices ("required", a named function) give calls that follow the tools' schemas, the same as a
// server without the draft, streamed in OpenAI's shape (id, type and name first, then argument
// fragments, finish_reason "tool_calls"); "auto" with --tool-call-parser hermes finds the calls in
// the text; the conversation's calls and results go back through the chat template; and
// --reasoning-parser splits the thinking off while a constraint holds the answer only. On a tiny
// random target over the byte vocabulary with Qwen3's published template: nothing from ../shared.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "support/server_process.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using json = nlohmann::json;

json post(httplib::Client& c, const json& body, int* status = nullptr, const std::string& path = "/v1/chat/completions") {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  if (!r) return json{{"transport_error", true}};
  if (status) *status = r->status;
  return json::parse(r->body, nullptr, false);
}

// A streamed response's chunks.
std::vector<json> post_stream(httplib::Client& c, json body) {
  body["stream"] = true;
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  std::vector<json> chunks;
  if (!r) return chunks;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("data: {", 0) == 0) chunks.push_back(json::parse(line.substr(6)));
  return chunks;
}

struct ToolServers {
  test::TempDir dir;
  std::string model = dir.file("model"), draft = dir.file("draft");
  std::string tmpl = test::source_dir() + "/tests/data/chat_templates/Qwen-Qwen3-0.6B.jinja";
  ToolServers() {
    test::write_byte_vocab_target(model, /*chat_template=*/true, /*max_position=*/2048);
    test::DraftSpec ds;
    ds.vocab = ds.draft_vocab = 259;
    ds.scale = 0.3f;
    test::write_draft(draft, ds);
  }
  std::string flags(const std::string& more, bool spec) const {
    return "-m " + model + " --chat-template " + tmpl + (spec ? " --draft " + draft + " -k 3 " : " ") + more;
  }
};

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                  "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}])");

json ask(const json& extra) {
  json b = {{"messages", {{{"role", "user"}, {"content", "weather?"}}}}, {"max_tokens", 300}, {"temperature", 0}, {"tools", kTools}};
  if (extra.is_object()) b.update(extra);
  return b;
}

// maxLength counts characters, not bytes.
size_t code_points(const json& s) {
  size_t n = 0;
  for (unsigned char c : s.get<std::string>()) n += (c & 0xC0) != 0x80;
  return n;
}

void expect_valid_call(const json& call) {
  ASSERT_TRUE(call.is_object()) << call;
  EXPECT_EQ(call["type"], "function");
  EXPECT_FALSE(call["id"].get<std::string>().empty());
  const json a = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(a.is_object()) << call;
  if (call["function"]["name"] == "get_weather")
    EXPECT_TRUE(a["city"].is_string() && code_points(a["city"]) <= 8 && a["days"].is_number_integer() &&
                a["days"] >= 1 && a["days"] <= 7) << a;
  else
    EXPECT_EQ(a, json::object()) << call;
}

// The streamed chunks gathered as the SDKs do: per call index, the first fragment's id, type and
// name, then the arguments appended.
json gather_calls(const std::vector<json>& chunks, std::string* finish) {
  json calls = json::array();
  for (const json& c : chunks) {
    const json& ch = c["choices"][0];
    if (!ch["finish_reason"].is_null()) *finish = ch["finish_reason"];
    if (!ch["delta"].contains("tool_calls")) continue;
    for (const json& d : ch["delta"]["tool_calls"]) {
      const size_t i = d["index"];
      if (i == calls.size()) {
        EXPECT_TRUE(d.contains("id") && d["type"] == "function" && d["function"].contains("name")) << "a call's first delta: " << d;
        calls.push_back({{"id", d["id"]}, {"type", "function"}, {"function", {{"name", d["function"]["name"]}, {"arguments", ""}}}});
      } else {
        EXPECT_LT(i, calls.size()) << d;
        EXPECT_FALSE(d.contains("id")) << "only the first delta names the call: " << d;
      }
      calls[i]["function"]["arguments"] = calls[i]["function"]["arguments"].get<std::string>() + d["function"].value("arguments", "");
    }
  }
  return calls;
}

json without_ids(json calls) {
  for (auto& c : calls) c.erase("id");
  return calls;
}

TEST(ServerTools, ForcedToolChoicesUnderSpeculationEqualPlainAndStream) {
  ToolServers s;
  test::ServerProcess spec(s.flags("", true)), plain(s.flags("", false));
  ASSERT_TRUE(spec.ready() && plain.ready()) << read_text_file(spec.log_path());
  httplib::Client cs(spec.url()), cp(plain.url());
  const std::vector<json> choices = {{{"tool_choice", "required"}},
                                     {{"tool_choice", "required"}, {"parallel_tool_calls", false}},
                                     {{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
                                     {{"tool_choice", {{"type", "function"}, {"function", {{"name", "now"}}}}}}};
  int called = 0;
  for (const json& c : choices) {
    for (const char* prompt : {"weather?", "What is it like in Oslo tomorrow", "now"}) {
      json body = ask(c);
      body["messages"][0]["content"] = prompt;
      int status = 0;
      const json r = post(cs, body, &status), want = post(cp, body);
      ASSERT_EQ(status, 200) << c << " -> " << r;
      const json& choice = r["choices"][0];
      EXPECT_TRUE(choice["message"]["content"].is_null()) << choice;
      EXPECT_EQ(without_ids(choice["message"]["tool_calls"]), without_ids(want["choices"][0]["message"]["tool_calls"])) << c;
      if (choice["finish_reason"] != "tool_calls") {
        EXPECT_EQ(choice["finish_reason"], "length") << choice;
        continue;
      }
      ++called;
      ASSERT_GE(choice["message"]["tool_calls"].size(), 1u) << choice;
      for (const json& call : choice["message"]["tool_calls"]) expect_valid_call(call);
      if (c.contains("parallel_tool_calls")) {
        EXPECT_EQ(choice["message"]["tool_calls"].size(), 1u);
      }
      if (c["tool_choice"].is_object()) {
        EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], c["tool_choice"]["function"]["name"]);
      }
      std::string finish;
      const json streamed = gather_calls(post_stream(cs, body), &finish);
      EXPECT_EQ(finish, "tool_calls");
      EXPECT_EQ(without_ids(streamed), without_ids(choice["message"]["tool_calls"])) << c;
    }
  }
  EXPECT_GE(called, 9) << "forced calls finish within max_tokens (a random model may keep adding parallel ones)";
  // A tool_choice naming no tool, and a constraint on top of a forced call, are 400s naming the field.
  int status = 0;
  json bad = post(cs, ask({{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "tool_choice.function.name");
  bad = post(cs, ask({{"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "response_format");
  // "auto" (the default with tools) needs a parser the server was not started with.
  bad = post(cs, ask({}), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "tool_choice");
  test::expect_mentions(bad["error"]["message"].get<std::string>(), {"--enable-auto-tool-choice", "--tool-call-parser"});
}

// vLLM's structural_tag, both spellings: free text may hold <function=NAME>{args}</function>
// regions whose arguments follow that tool's schema; the draft changes nothing.
TEST(ServerTools, StructuralTagsUnderSpeculationEqualPlain) {
  ToolServers s;
  test::ServerProcess spec(s.flags("", true)), plain(s.flags("", false));
  ASSERT_TRUE(spec.ready() && plain.ready()) << read_text_file(spec.log_path());
  httplib::Client cs(spec.url()), cp(plain.url());
  json tags = json::array();
  for (const json& t : kTools)
    tags.push_back({{"type", "tag"}, {"begin", "<function=" + t["function"]["name"].get<std::string>() + ">"},
                    {"content", {{"type", "json_schema"}, {"json_schema", t["function"]["parameters"]}}}, {"end", "</function>"}});
  const json format = {{"type", "triggered_tags"}, {"triggers", {"<function="}}, {"tags", tags},
                       {"at_least_one", true}, {"stop_after_first", true}};
  const std::vector<json> extras = {
      {{"response_format", {{"type", "structural_tag"}, {"format", format}}}},
      {{"structured_outputs", {{"structural_tag", json({{"type", "structural_tag"}, {"format", format}}).dump()}}}}};
  int called = 0;
  for (const json& extra : extras)
    for (const char* prompt : {"weather?", "What time is it", "Lima"}) {
      json body = {{"messages", {{{"role", "user"}, {"content", prompt}}}}, {"max_tokens", 120}, {"temperature", 0}};
      body.update(extra);
      int status = 0;
      const json r = post(cs, body, &status), want = post(cp, body);
      ASSERT_EQ(status, 200) << r;
      const json& choice = r["choices"][0];
      EXPECT_EQ(choice["message"]["content"], want["choices"][0]["message"]["content"]) << extra;
      if (choice["finish_reason"] != "stop") continue;
      // One call, exactly: <function=NAME>{arguments}</function>, the arguments valid for NAME.
      const std::string text = choice["message"]["content"];
      const size_t open = text.find('>'), close = text.rfind("</function>");
      ASSERT_TRUE(text.rfind("<function=", 0) == 0 && open != std::string::npos && close == text.size() - 11) << text;
      const std::string name = text.substr(10, open - 10);
      EXPECT_TRUE(name == "now" || name == "get_weather") << text;
      expect_valid_call({{"id", "x"}, {"type", "function"},
                         {"function", {{"name", name}, {"arguments", text.substr(open + 1, close - open - 1)}}}});
      ++called;
    }
  EXPECT_GE(called, 3) << "calls finish within max_tokens";
  int status = 0;
  json bad = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
              {"response_format", {{"type", "structural_tag"}, {"format", {{"type", "token"}, {"token", 7}}}}}};
  json e = post(cs, bad, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "response_format");
  test::expect_mentions(e["error"]["message"].get<std::string>(), {"$.format.type", "token"});
  bad.erase("response_format");
  bad["structured_outputs"] = {{"structural_tag", "{not json"}};
  e = post(cs, bad, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "structured_outputs.structural_tag");
}

// "auto": the model's own <tool_call> blocks become calls. A grammar stands in for a model that
// was trained to call tools (the random target is not).
TEST(ServerTools, AutoChoiceParsesHermesCallsAndTheHistoryRendersThroughTheTemplate) {
  ToolServers s;
  test::ServerProcess spec(s.flags("--enable-auto-tool-choice --tool-call-parser hermes", true));
  test::ServerProcess plain(s.flags("--enable-auto-tool-choice --tool-call-parser hermes", false));
  ASSERT_TRUE(spec.ready() && plain.ready()) << read_text_file(spec.log_path());
  httplib::Client cs(spec.url()), cp(plain.url());
  const std::string gbnf = R"(root ::= [A-Za-z ]{0,12} "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" [a-z]{1,8} "\", \"days\": " [1-7] "}}\n</tool_call>")";
  json body = ask({{"structured_outputs", {{"grammar", gbnf}}}});
  const json r = post(cs, body), want = post(cp, body);
  const json& choice = r["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "tool_calls") << r;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  expect_valid_call(choice["message"]["tool_calls"][0]);
  EXPECT_EQ(without_ids(choice["message"]["tool_calls"]), without_ids(want["choices"][0]["message"]["tool_calls"]));
  EXPECT_EQ(choice["message"]["content"], want["choices"][0]["message"]["content"]);
  const auto chunks = post_stream(cs, body);
  std::string finish, content;
  const json streamed = gather_calls(chunks, &finish);
  for (const json& c : chunks) content += c["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(without_ids(streamed), without_ids(choice["message"]["tool_calls"]));
  EXPECT_EQ(content, choice["message"]["content"].is_null() ? "" : choice["message"]["content"].get<std::string>());
  size_t fragments = 0;  // byte tokens: the arguments arrive in many pieces, as they are written
  for (const json& c : chunks)
    if (c["choices"][0]["delta"].contains("tool_calls") && !c["choices"][0]["delta"]["tool_calls"][0].contains("id")) ++fragments;
  EXPECT_GT(fragments, 5u);
  // The call and its result go back: the template renders both (tools in the system prompt).
  json history = {{{"role", "user"}, {"content", "weather?"}}, choice["message"],
                  {{"role", "tool"}, {"tool_call_id", choice["message"]["tool_calls"][0]["id"]}, {"content", "{\"temp\": 21}"}}};
  const json tok = post(cs, {{"messages", history}, {"tools", kTools}}, nullptr, "/tokenize");
  const json text = post(cs, {{"tokens", tok["tokens"]}}, nullptr, "/detokenize");
  const std::string prompt = text["prompt"];
  const json args = json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  const std::string printed = "{\"city\": \"" + args["city"].get<std::string>() + "\", \"days\": " + args["days"].dump() + "}";  // tojson
  test::expect_mentions(prompt, {"<tools>", "\"name\": \"get_weather\"", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + printed,
                                 "<tool_response>\n{\"temp\": 21}\n</tool_response>"});
  int status = 0;
  post(cs, {{"messages", history}, {"tools", kTools}, {"max_tokens", 4}}, &status);
  EXPECT_EQ(status, 200);
}

// --reasoning-parser: the thinking goes to `reasoning` (and `reasoning_content`); a constraint
// holds only the answer, and speculation changes nothing.
TEST(ServerTools, ReasoningIsSplitOffAndTheConstraintHoldsTheAnswer) {
  ToolServers s;
  // A template whose generation prompt opens the thinking, as DeepSeek-R1's and MiniMax-M2's do.
  const std::string open = s.dir.file("open.jinja");
  test::write_text(open, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant: <think>\n");
  test::ServerProcess spec("-m " + s.model + " --chat-template " + open + " --draft " + s.draft + " -k 3 --reasoning-parser deepseek_r1");
  test::ServerProcess plain("-m " + s.model + " --chat-template " + open + " --reasoning-parser deepseek_r1");
  test::ServerProcess qwen(s.flags("--reasoning-parser qwen3", true));
  ASSERT_TRUE(spec.ready() && plain.ready() && qwen.ready());
  httplib::Client cs(spec.url()), cp(plain.url()), cq(qwen.url());
  // Inside the thinking, the grammar waits for </think>: the reasoning is free text, cut by max_tokens here.
  const json body = {{"messages", {{{"role", "user"}, {"content", "count"}}}}, {"max_tokens", 40}, {"temperature", 0},
                     {"structured_outputs", {{"regex", "[0-9]{3}"}}}};
  const json r = post(cs, body), want = post(cp, body);
  const json& m = r["choices"][0]["message"];
  ASSERT_TRUE(m["reasoning"].is_string()) << r;
  EXPECT_EQ(m["reasoning"], m["reasoning_content"]);
  EXPECT_EQ(m["reasoning"], want["choices"][0]["message"]["reasoning"]);
  EXPECT_EQ(m["content"], want["choices"][0]["message"]["content"]);
  std::string reasoning, content;
  for (const json& c : post_stream(cs, body)) {
    reasoning += c["choices"][0]["delta"].value("reasoning", "");
    content += c["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(reasoning, m["reasoning"]);
  EXPECT_EQ(content, m["content"].get<std::string>());
  // Thinking switched off by the template (Qwen3's enable_thinking): the constraint holds from the start.
  json off = body;
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  const json q = post(cq, off);
  EXPECT_TRUE(q["choices"][0]["message"]["reasoning"].is_null()) << q;
  EXPECT_EQ(q["choices"][0]["finish_reason"], "stop");
  const std::string digits = q["choices"][0]["message"]["content"];
  EXPECT_TRUE(digits.size() == 3 && std::all_of(digits.begin(), digits.end(), ::isdigit)) << digits;
  // Qwen3 left to decide: either it opens <think>, or its answer obeys the regex at once.
  const json d = post(cq, body);
  const json& dm = d["choices"][0]["message"];
  if (dm["reasoning"].is_null() && d["choices"][0]["finish_reason"] == "stop") {
    const std::string a = dm["content"];
    EXPECT_TRUE(a.size() == 3 && std::all_of(a.begin(), a.end(), ::isdigit)) << a;
  }
}

}  // namespace
}  // namespace eaglet
