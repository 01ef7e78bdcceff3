// Tool calling and reasoning, without a model: the tool-call parsers of every format (whole and
// streamed in every split of the text, which must agree), the reasoning splitter, the grammar that
// constrains only what follows the reasoning, and the request fields' checks and forced grammars.
#include <gtest/gtest.h>

#include <random>

#include "constrain/grammar.h"
#include "core/error.h"
#include "server/chat_output.h"
#include "server/openai_protocol.h"
#include "server/reasoning.h"
#include "server/tool_parser.h"
#include "server/tools.h"

namespace eaglet {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

struct Parsed {
  std::string reasoning, content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

// Feeds `text` in pieces cut at `cuts` and gathers what comes out; checks the stream's shape on
// the way (a call's first delta names it, later ones only add arguments).
Parsed run(ChatOutput& out, const std::string& text, const std::vector<size_t>& cuts) {
  Parsed p;
  size_t at = 0;
  auto take = [&](const OutputDelta& d) {
    p.reasoning += d.reasoning;
    p.content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      if (!c.name.empty()) {
        EXPECT_EQ(c.index, int(p.calls.size()));
        EXPECT_FALSE(c.id.empty());
        p.calls.emplace_back(c.name, c.arguments);
      } else {
        EXPECT_TRUE(c.id.empty());
        EXPECT_LT(c.index, int(p.calls.size()));
        p.calls[size_t(c.index)].second += c.arguments;
      }
    }
  };
  for (size_t c : cuts) {
    take(out.feed(text.substr(at, c - at)));
    at = c;
  }
  take(out.feed(text.substr(at)));
  take(out.finish());
  return p;
}

ToolRequest weather_tools() {
  const json body = json::parse(R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "array", "items": {"type": "string"}},
                     "where": {"type": "object", "properties": {"lat": {"type": "number"}, "code": {"type": "string"}}}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}],
    "tool_choice": "required"})");
  return parse_tools(body, nullptr, false);
}

// Parses `text` whole, one byte at a time and at random cuts: all must agree.
Parsed parse_every_way(const std::string& parser, const ToolRequest& tools, const std::string& text,
                       const ReasoningFormat* reasoning = nullptr, ReasoningStart start = ReasoningStart::Outside) {
  auto make = [&] {
    auto tp = parser.empty() ? nullptr : parser == "forced" ? make_forced_tool_call_parser(tools, "id-") : make_tool_call_parser(parser, tools, "id-");
    return ChatOutput(reasoning, start, std::move(tp));
  };
  ChatOutput whole = make();
  const Parsed w = run(whole, text, {});
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  ChatOutput one = make();
  const Parsed b = run(one, text, bytes);
  EXPECT_EQ(b.content, w.content) << text;
  EXPECT_EQ(b.reasoning, w.reasoning) << text;
  EXPECT_EQ(b.calls, w.calls) << text;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i)
      if (rng() % 5 == 0) cuts.push_back(i);
    ChatOutput r = make();
    const Parsed p = run(r, text, cuts);
    EXPECT_EQ(p.content, w.content);
    EXPECT_EQ(p.calls, w.calls);
  }
  return w;
}

json args(const Parsed& p, size_t i) { return json::parse(p.calls.at(i).second); }

TEST(ToolParsers, HermesCallsAfterContentStreamAsTheyAreWritten) {
  const ToolRequest t = weather_tools();
  const Parsed p = parse_every_way("hermes", t,
                                   "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
                                   "</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"now\"}\n</tool_call>\n");
  EXPECT_EQ(p.content, "Let me look.\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].first, "get_weather");
  EXPECT_EQ(args(p, 0), json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(p.calls[1].first, "now");  // name after the arguments: the call comes out whole
  EXPECT_EQ(args(p, 1), json::object());
  // The arguments of the first call come out before its block closes.
  auto out = make_tool_call_parser("hermes", t, "id-");
  OutputDelta d;
  out->feed("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa", &d);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[1].arguments, "{\"city\": \"Pa");
}

TEST(ToolParsers, HermesTextThatIsNotACallStaysContent) {
  const ToolRequest t = weather_tools();
  EXPECT_EQ(parse_every_way("hermes", t, "a <tool> b <tool_cal").content, "a <tool> b <tool_cal");
  const Parsed bad = parse_every_way("hermes", t, "x<tool_call>not json</tool_call>y");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "x<tool_call>not json</tool_call>y");
  // An arguments string of JSON (some models write one) is decoded.
  const Parsed s = parse_every_way("hermes", t, "<tool_call>{\"name\": \"now\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(args(s, 0), json({{"a", 1}}));
  // Cut off inside a block (max_tokens): what was written is still a call.
  const Parsed cut = parse_every_way("hermes", t, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par");
  ASSERT_EQ(cut.calls.size(), 1u);
  EXPECT_EQ(cut.calls[0].second, "{\"city\": \"Par");
}

TEST(ToolParsers, Llama3JsonCallsOrText) {
  const ToolRequest t = weather_tools();
  const Parsed p = parse_every_way("llama3_json", t,
                                   "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": \"now\", \"parameters\": {}}");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(args(p, 0), json({{"city", "Oslo"}}));
  EXPECT_EQ(p.calls[1].first, "now");
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(parse_every_way("llama3_json", t, "Hello {there}").content, "Hello {there}");
  // A second separator is where the calls end: content, however the text is cut (fuzz_tool_parser).
  const Parsed twice = parse_every_way("llama3_json", t, "{\"name\": \"now\", \"parameters\": {}}; ; more");
  ASSERT_EQ(twice.calls.size(), 1u);
  EXPECT_EQ(twice.content, "; more");
  const Parsed braces = parse_every_way("llama3_json", t, "{not a call}");
  EXPECT_TRUE(braces.calls.empty());
  EXPECT_EQ(braces.content, "{not a call}");
}

TEST(ToolParsers, MinimaxM2ValuesTypedByTheSchema) {
  const ToolRequest t = weather_tools();
  const Parsed p = parse_every_way("minimax_m2", t,
                                   "Checking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
                                   "<parameter name=\"city\">42</parameter>\n<parameter name=\"days\">3</parameter>\n"
                                   "<parameter name=\"units\">[\"C\"]</parameter>\n</invoke>\n<invoke name=\"now\">\n</invoke>\n"
                                   "</minimax:tool_call>");
  EXPECT_EQ(p.content, "Checking.\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(args(p, 0), json({{"city", "42"}, {"days", 3}, {"units", {"C"}}}));  // "42" is a string: the schema says so
  EXPECT_EQ(args(p, 1), json::object());
}

TEST(ToolParsers, MinimaxM3NestedElementsBecomeObjectsAndLists) {
  const ToolRequest t = weather_tools();
  const std::string ns = "]<]minimax[>[";
  const std::string text = "Sure." + ns + "<tool_call>\n" + ns + "<invoke name=\"get_weather\">" + ns + "<city>New York" + ns + "</city>" +
                           ns + "<days>2" + ns + "</days>" + ns + "<units>" + ns + "<item>C" + ns + "</item>" + ns + "<item>F" + ns +
                           "</item>" + ns + "</units>" + ns + "<where>" + ns + "<lat>40.7" + ns + "</lat>" + ns + "<code>10001" + ns +
                           "</code>" + ns + "</where>" + ns + "</invoke>\n" + ns + "</tool_call>";
  const Parsed p = parse_every_way("minimax_m3", t, text);
  EXPECT_EQ(p.content, "Sure.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(args(p, 0), json({{"city", "New York"}, {"days", 2}, {"units", {"C", "F"}}, {"where", {{"lat", 40.7}, {"code", "10001"}}}}));
}

TEST(ToolParsers, Qwen3CoderParametersTypedByTheSchemaAndUntypedOnesStayText) {
  const ToolRequest t = weather_tools();
  const Parsed p = parse_every_way("qwen3_coder", t,
                                   "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
                                   "<parameter=days>\n3\n</parameter>\n<parameter=units>\n[\"C\", \"F\"]\n</parameter>\n"
                                   "<parameter=where>\n{\"lat\": 1.5}\n</parameter>\n<parameter=extra>\n7\n</parameter>\n"
                                   "</function>\n</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>");
  EXPECT_EQ(p.content, "Let me look.\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].first, "get_weather");
  // "42" is a string and `extra` (not in the schema) stays text: vLLM's qwen3_coder reads them so.
  EXPECT_EQ(args(p, 0), json({{"city", "42"}, {"days", 3}, {"units", {"C", "F"}}, {"where", {{"lat", 1.5}}}, {"extra", "7"}}));
  EXPECT_EQ(args(p, 1), json::object());
  // Multi-line text keeps its inner newlines; a parameter left open ends where the next begins.
  const Parsed code = parse_every_way("qwen3_coder", t,
                                      "<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\n\nline 3\n"
                                      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(code.calls.size(), 1u);
  EXPECT_EQ(args(code, 0), json({{"city", "line 1\n\nline 3"}, {"days", 2}}));
  // A block with no whole function in it is content, markers and all.
  EXPECT_EQ(parse_every_way("qwen3_coder", t, "<tool_call>\n{\"name\": \"now\"}\n</tool_call>").content,
            "<tool_call>\n{\"name\": \"now\"}\n</tool_call>");
}

TEST(ToolParsers, ForcedOutputsOfRequiredAndNamedChoices) {
  ToolRequest t = weather_tools();
  const Parsed list = parse_every_way("forced", t,
                                      "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}, {\"name\": \"now\", \"parameters\": {}}]");
  ASSERT_EQ(list.calls.size(), 2u);
  EXPECT_EQ(args(list, 0), json({{"city", "Rome"}}));
  EXPECT_EQ(list.content, "");
  t.choice = ToolRequest::Choice::Named;
  t.named = "get_weather";
  const Parsed named = parse_every_way("forced", t, "{\"city\": \"Lima\"}");
  ASSERT_EQ(named.calls.size(), 1u);
  EXPECT_EQ(named.calls[0].first, "get_weather");
  EXPECT_EQ(args(named, 0), json({{"city", "Lima"}}));
}

// Whatever the text (other formats' calls, stray markers, reasoning around them), every parser
// settles it the same whole as in pieces (fuzz/fuzz_tool_parser.cpp checks the same on any bytes).
TEST(ToolParsers, EveryParserSettlesAnyTextAsItsPiecesDo) {
  const ToolRequest t = weather_tools();
  const std::vector<std::string> texts = {
      "<think>plan</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
      "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"b\": [1]}}; {\"name\": \"g\", \"parameters\": {}}",
      "x<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">7</parameter>\n</invoke>\n</minimax:tool_call>",
      "{\"name\": \"f\", \"parameters\": {}} trailing", "</think><tool_call>{\"name\": 1}</tool_call>", "<<tool_call>>",
      // Cut off inside the arguments by the closing marker: a piece that ends in part of the
      // marker must not stream that part as arguments (the body would then shrink).
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"azz\n</tool_call>",
      "\x03<think>\tplan</th\x82nk>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>, ",
      // Calls that name nothing are not calls (a call's first delta is the one with its name).
      "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", "<tool_call><function=></function></tool_call>",
      std::string("Checking.\n<tool_call>\n<function=>f\n\0\0ameter=a>\n7\n</paraf\", \"ameter>\n</function></to\n</tool_c\xe1ll>", 81),
      "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">7\n</minimax:tool_call>",
      "<tool_call>\n<function=f>\n<parameter=a>\n7\n</function>\n</tool_call>\n<tool_call>\n<function=g></tool_call>"};
  const ReasoningFormat* formats[] = {nullptr, &reasoning_format("qwen3"), &reasoning_format("deepseek_r1")};
  for (const std::string& name : tool_call_parser_names())
    for (const ReasoningFormat* f : formats)
      for (ReasoningStart start : {ReasoningStart::Open, ReasoningStart::Inside})
        for (const std::string& text : texts) {
          SCOPED_TRACE(name + " " + (f ? f->name : "none") + " " + text);
          parse_every_way(name, t, text, f, start);
        }
}

TEST(ToolParsers, UnknownNamesAreRefused) {
  EXPECT_THROW(make_tool_call_parser("pythonic", ToolRequest{}, ""), Error);
  EXPECT_THROW(reasoning_format("granite"), Error);
}

TEST(Reasoning, WhereTheOutputStartsComesFromThePrompt) {
  const ReasoningFormat& q = reasoning_format("qwen3");
  EXPECT_EQ(reasoning_start(q, "<|im_start|>assistant\n"), ReasoningStart::Open);
  EXPECT_EQ(reasoning_start(q, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), ReasoningStart::Outside);
  EXPECT_EQ(reasoning_start(reasoning_format("deepseek_r1"), "<｜Assistant｜><think>\n"), ReasoningStart::Inside);
  const ReasoningFormat& m3 = reasoning_format("minimax_m3");
  EXPECT_EQ(reasoning_start(m3, "]~b]ai\n<mm:think>"), ReasoningStart::Inside);
  EXPECT_EQ(reasoning_start(m3, "]~b]ai\n</mm:think>"), ReasoningStart::Outside);
}

TEST(Reasoning, SplitsThinkingFromTheAnswerInEveryFormat) {
  const ToolRequest none;
  const ReasoningFormat& q = reasoning_format("qwen3");
  Parsed p = parse_every_way("", none, "<think>\nstep 1</thin\n</think>\n\nThe answer.", &q, ReasoningStart::Open);
  EXPECT_EQ(p.reasoning, "\nstep 1</thin\n");
  EXPECT_EQ(p.content, "The answer.");
  p = parse_every_way("", none, "No thinking here.", &q, ReasoningStart::Open);
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "No thinking here.");
  const ReasoningFormat& r1 = reasoning_format("deepseek_r1");  // thinks without writing <think>
  p = parse_every_way("", none, "hmm</think>ok", &r1, ReasoningStart::Open);
  EXPECT_EQ(p.reasoning, "hmm");
  EXPECT_EQ(p.content, "ok");
  p = parse_every_way("", none, "still thinking when cut", &r1, ReasoningStart::Inside);
  EXPECT_EQ(p.reasoning, "still thinking when cut");
  const ReasoningFormat& m3 = reasoning_format("minimax_m3");
  p = parse_every_way("", none, "</mm:think>Direct.", &m3, ReasoningStart::Open);
  EXPECT_EQ(p.content, "Direct.");
  // Reasoning, then tool calls in the answer.
  const ToolRequest t = weather_tools();
  p = parse_every_way("hermes", t, "<think>need weather</think>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>", &q,
                      ReasoningStart::Open);
  EXPECT_EQ(p.reasoning, "need weather");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "");
}

bool accepts(const std::shared_ptr<const constrain::Grammar>& g, const std::string& text) {
  constrain::Matcher m(g);
  return m.accept(text) && m.complete();
}

TEST(Reasoning, TheConstraintAppliesAfterTheReasoningEnds) {
  const std::string inner = "root ::= \"{\\\"a\\\": \" [0-9]+ \"}\"\n";
  const ReasoningFormat& q = reasoning_format("qwen3");
  const ReasoningFormat& r1 = reasoning_format("deepseek_r1");
  auto open = constrain::Grammar::parse(after_reasoning_gbnf(inner, q, ReasoningStart::Open, "s"), "g", "s");
  EXPECT_TRUE(accepts(open, "<think>free {text} </thi </th</think>\n\n{\"a\": 12}"));
  EXPECT_TRUE(accepts(open, "{\"a\": 1}"));                           // no thinking at all
  EXPECT_TRUE(accepts(open, "</think>{\"a\": 1}"));
  EXPECT_FALSE(accepts(open, "<think>x</think>not json"));
  EXPECT_FALSE(accepts(open, "<think>x</think>{\"a\": 1}</think>"));  // the answer cannot hold more
  EXPECT_FALSE(accepts(open, "<think>never ends"));
  auto inside = constrain::Grammar::parse(after_reasoning_gbnf(inner, r1, ReasoningStart::Inside, "s"), "g", "s");
  EXPECT_TRUE(accepts(inside, "a<b</</think>{\"a\": 7}"));
  EXPECT_FALSE(accepts(inside, "{\"a\": 7}"));  // inside the reasoning, the answer comes after its end
  // The first end marker ends the reasoning: what the splitter calls the answer is what the
  // grammar constrained.
  const std::string text = "x</think</think>{\"a\": 3}";
  EXPECT_TRUE(accepts(inside, text));
  ChatOutput out(&r1, ReasoningStart::Inside, nullptr);
  OutputDelta d = out.feed(text);
  d.append(out.finish());
  EXPECT_EQ(d.reasoning, "x</think");
  EXPECT_EQ(d.content, "{\"a\": 3}");
  EXPECT_EQ(after_reasoning_gbnf(inner, q, ReasoningStart::Outside, "s"), inner);
}

int api_status(const json& body, bool auto_tools, std::string* param = nullptr) {
  try {
    parse_request(body, true, {}, nullptr, auto_tools);
  } catch (const ApiError& e) {
    if (param) *param = e.param;
    return e.status;
  }
  return 200;
}

TEST(ToolRequests, FieldsAreCheckedAndNamed) {
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}};
  std::string param;
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {tool}}}, false, &param), 400);  // auto by default: needs the parser
  EXPECT_EQ(param, "tool_choice");
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {tool}}}, true), 200);
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {tool}}, {"tool_choice", "required"}}, false), 200);
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {tool}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}, true, &param), 400);
  EXPECT_EQ(param, "tool_choice.function.name");
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {tool, tool}}}, true, &param), 400);  // two tools of one name
  EXPECT_EQ(param, "tools[1].function.name");
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {{{"type", "retrieval"}}}}}, true, &param), 400);
  EXPECT_EQ(param, "tools[0].type");
  EXPECT_EQ(api_status({{"messages", msgs}, {"tool_choice", "required"}}, true, &param), 400);
  EXPECT_EQ(param, "tool_choice");
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {tool}}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}, true, &param), 400);
  EXPECT_EQ(param, "response_format");
  EXPECT_EQ(api_status({{"messages", msgs}, {"tools", {tool}}, {"parallel_tool_calls", "yes"}}, true, &param), 400);
  EXPECT_EQ(param, "parallel_tool_calls");
  const json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{\"x\": 1}"}}}};
  const json history = json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}},
                                    {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}});
  const ApiRequest r = parse_request({{"messages", history}}, true);
  EXPECT_EQ(r.messages[1].fields["tool_calls"][0]["function"]["arguments"], ojson({{"x", 1}}));  // parsed for the template
  EXPECT_EQ(r.messages[2].fields["tool_call_id"], "c1");
  json broken = history;
  broken[1]["tool_calls"][0]["function"].erase("arguments");
  EXPECT_EQ(api_status({{"messages", broken}}, true, &param), 400);
  EXPECT_EQ(param, "messages[1].tool_calls[0].function.arguments");
}

TEST(ToolRequests, ForcedGrammarsTakeExactlyTheToolsCalls) {
  ToolRequest t = weather_tools();
  t.parallel = false;
  auto one = constrain::Grammar::parse(forced_tool_gbnf(t));
  EXPECT_TRUE(accepts(one, "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"days\": 2}}]"));
  EXPECT_TRUE(accepts(one, "[{\"name\": \"now\", \"parameters\": {}}]"));
  EXPECT_FALSE(accepts(one, "[{\"name\": \"now\", \"parameters\": {}}, {\"name\": \"now\", \"parameters\": {}}]"));  // not parallel
  EXPECT_FALSE(accepts(one, "[{\"name\": \"other\", \"parameters\": {}}]"));
  EXPECT_FALSE(accepts(one, "[{\"name\": \"get_weather\", \"parameters\": {\"days\": 2}}]"));  // city is required
  EXPECT_FALSE(accepts(one, "[]"));
  t.parallel = true;
  EXPECT_TRUE(accepts(constrain::Grammar::parse(forced_tool_gbnf(t)),
                      "[{\"name\": \"now\", \"parameters\": {}}, {\"name\": \"now\", \"parameters\": {}}]"));
  t.choice = ToolRequest::Choice::Named;
  t.named = "get_weather";
  auto named = constrain::Grammar::parse(forced_tool_gbnf(t));
  EXPECT_TRUE(accepts(named, "{\"city\": \"Rome\"}"));
  EXPECT_FALSE(accepts(named, "{\"days\": 1}"));
}

}  // namespace
}  // namespace eaglet
