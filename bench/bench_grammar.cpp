// Structured output's cost per token: the time to compute which tokens a grammar allows next
// (constrain::TokenTrie::allowed) over the Llama-3 (128k) and Qwen3 (152k) vocabularies of
// ../shared/tokenizers, for any-JSON-object and a JSON schema, at several points of a document,
// and over whole documents (a nested schema; prose with tool calls under a structural tag).
//   ./build/bench/eaglet_bench_grammar [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "constrain/grammar.h"
#include "constrain/json_schema.h"
#include "constrain/structural_tag.h"
#include "constrain/token_mask.h"
#include "io/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace eaglet;

const std::string kShared = "../shared/tokenizers/hf/";

const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[name];
  if (!t) {
    const auto tj = nlohmann::json::parse(read_text_file(kShared + name + "_tokenizer.json.gz"));
    const auto cfg = nlohmann::json::parse(read_text_file(kShared + name + "_tokenizer_config.json"));
    t = std::make_unique<Tokenizer>(Tokenizer::from_json(tj, name, cfg));
  }
  return *t;
}

std::shared_ptr<const constrain::TokenTrie> trie(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const constrain::TokenTrie>> cache;
  auto& t = cache[name];
  if (!t) t = std::make_shared<const constrain::TokenTrie>(tokenizer(name));
  return t;
}

std::string schema_gbnf() {
  return constrain::json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}}}, "required": ["name", "age"]})"));
}

// `cold`: every iteration a grammar the mask cache has not seen (the first token in a state);
// warm: the state's mask from the cache (every later token in the same state).
void mask(benchmark::State& st, const std::string& vocab, bool schema, const std::string& prefix, bool cold) {
  if (!file_exists(kShared + vocab + "_tokenizer.json.gz")) {
    st.SkipWithError("needs ../shared/tokenizers");
    return;
  }
  const auto t = trie(vocab);
  const std::string gbnf = schema ? schema_gbnf() : constrain::json_object_gbnf();
  auto at = [&] {
    constrain::Matcher m(constrain::Grammar::parse(gbnf));
    if (!m.accept(prefix)) throw std::runtime_error("prefix refused");
    return m;
  };
  constrain::Matcher m = at();
  constrain::TokenTrie::Mask allowed;
  for (auto _ : st) {
    if (cold) {
      st.PauseTiming();
      m = at();
      st.ResumeTiming();
    }
    allowed = t->allowed(m);
    benchmark::DoNotOptimize(allowed->data());
  }
  size_t n = 0;
  for (uint8_t a : *allowed) n += a;
  st.counters["allowed"] = double(n);
}

// The nested-schema document: a book record.
std::pair<std::string, std::string> nested_schema_case() {
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "title": {"type": "string", "maxLength": 80},
      "author": {"type": "object", "properties": {"name": {"type": "string"}, "born": {"type": "integer", "minimum": 1000, "maximum": 2100},
                 "country": {"enum": ["UK", "US", "FR", "JP", "CN"]}}, "required": ["name", "born"]},
      "chapters": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
          "title": {"type": "string"}, "pages": {"type": "integer", "minimum": 1},
          "characters": {"type": "array", "items": {"type": "string", "maxLength": 30}}}, "required": ["title", "pages"]}},
      "rating": {"type": "integer", "minimum": 1, "maximum": 5}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["title", "author", "chapters"]})");
  const std::string doc = R"({"title": "The Garden of Small Things", "author": {"name": "Ana Souza", "born": 1978, "country": "FR"}, )"
                          R"("chapters": [{"title": "Seeds", "pages": 12, "characters": ["Lily", "Mr. Tom", "the old cat"]}, )"
                          R"({"title": "Rain — 雨の日", "pages": 9, "characters": ["Lily", "Zoë"]}, {"title": "Harvest", "pages": 21}], )"
                          R"("rating": 4, "tags": ["children", "nature", "friendship"]})";
  return {constrain::json_schema_to_gbnf(schema), doc};
}

// The structural-tag document: prose with two tool calls, each held to its tool's schema.
std::pair<std::string, std::string> structural_tag_case() {
  const auto tag = nlohmann::ordered_json::parse(R"({"format": {"type": "triggered_tags", "triggers": ["<function="], "tags": [
      {"begin": "<function=get_weather>", "end": "</function>", "content": {"type": "json_schema", "json_schema": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
                       "units": {"enum": ["metric", "imperial"]}}, "required": ["city", "days"]}}},
      {"begin": "<function=search>", "end": "</function>", "content": {"type": "json_schema", "json_schema": {"type": "object",
        "properties": {"query": {"type": "string", "maxLength": 100}, "top_k": {"type": "integer", "minimum": 1}}, "required": ["query"]}}}]}})");
  const std::string doc = "Let me check the forecast for both cities first, then look for events that fit the weather.\n"
                          R"(<function=get_weather>{"city": "Lisbon", "days": 3, "units": "metric"}</function>)"
                          "\nAnd now the events:\n"
                          R"(<function=search>{"query": "outdoor concerts in Lisbon this weekend", "top_k": 5}</function>)"
                          "\nI will summarise once both results are back.";
  return {constrain::structural_tag_to_gbnf(tag), doc};
}

// A whole document under a constraint, token by token as a model would write it, from a grammar
// the cache has never seen (each iteration parses it anew): the mask time of every token, its
// median, 90th percentile and maximum (the cold walks), and the total per document.
void document(benchmark::State& st, const std::string& vocab, const std::string& kind) {
  if (!file_exists(kShared + vocab + "_tokenizer.json.gz")) {
    st.SkipWithError("needs ../shared/tokenizers");
    return;
  }
  const auto [gbnf, doc] = kind == "structural_tag" ? structural_tag_case() : nested_schema_case();
  const auto t = trie(vocab);
  const std::vector<int> ids = tokenizer(vocab).encode(doc, 0);
  std::vector<double> per_token;
  for (auto _ : st) {
    constrain::Matcher m(constrain::Grammar::parse(gbnf));
    for (int id : ids) {
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(t->allowed(m)->data());
      per_token.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!m.accept(t->bytes(id))) throw std::runtime_error("the document leaves the schema at token " + std::to_string(id));
    }
  }
  std::sort(per_token.begin(), per_token.end());
  auto at = [&](double q) { return per_token[size_t(q * double(per_token.size() - 1))]; };
  st.counters["tokens"] = double(ids.size());
  st.counters["median_ms"] = at(0.5);
  st.counters["p90_ms"] = at(0.9);
  st.counters["max_ms"] = per_token.back();
}

}  // namespace

BENCHMARK_CAPTURE(document, llama3_nested_schema, "llama3", "nested_schema")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(document, qwen3_nested_schema, "qwen3", "nested_schema")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(document, llama3_structural_tag, "llama3", "structural_tag")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_object_start_cold, "llama3", false, "", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_object_start_warm, "llama3", false, "", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_object_in_string_cold, "llama3", false, "{\"story\": \"Once upon", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_object_in_string_warm, "llama3", false, "{\"story\": \"Once upon", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_schema_key_cold, "llama3", true, "{\"name\": \"Lily\", ", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_schema_key_warm, "llama3", true, "{\"name\": \"Lily\", ", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_schema_in_string_cold, "llama3", true, "{\"name\": \"Li", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, llama3_schema_in_string_warm, "llama3", true, "{\"name\": \"Li", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, qwen3_object_in_string_cold, "qwen3", false, "{\"story\": \"Once upon", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, qwen3_object_in_string_warm, "qwen3", false, "{\"story\": \"Once upon", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, qwen3_schema_number_cold, "qwen3", true, "{\"name\": \"Lily\", \"age\": 1", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, qwen3_schema_number_warm, "qwen3", true, "{\"name\": \"Lily\", \"age\": 1", false)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
