// `eaglet generate`: one prompt through the target (optionally with speculative decoding),
// printing text and speed, or one JSON object with --json.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/report.h"
#include "engine/model_bundle.h"
#include "engine/generator.h"
#include "speculation/spec_setup.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace eaglet::cli {

namespace {
struct GenerateOptions {
  CommonOptions common;
  SpecOptions spec;
  std::string prompt = "Once upon a time";
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false;
  bool chat = false;  // -p is a user message, rendered with the chat template
  std::string system, chat_template;
};

// The prompt's token ids: the text itself, or with --chat the model's chat template around it.
std::vector<int> prompt_ids(const GenerateOptions& o, const ModelBundle& b) {
  if (!o.chat) return b.tokenizer.encode(o.prompt);
  std::unique_ptr<ChatTemplate> t = o.chat_template.empty() ? ChatTemplate::from_tokenizer_config(b.tokenizer.config())
                                                            : std::make_unique<ChatTemplate>(template_source(o.chat_template));
  if (!t) fail("--chat: {} has no chat_template (tokenizer_config.json); give one with --chat-template", o.common.model_dir);
  std::vector<ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  messages.push_back({"user", o.prompt});
  // The template writes the BOS itself where the model wants one, as the chat endpoint does.
  return b.tokenizer.encode(t->render(messages, true, b.tokenizer), 0);
}

void run_generate(const GenerateOptions& o) {
  apply_common_options(o.common);
  const auto pool = make_thread_pool(o.common.threads);
  ModelBundle b = load_target(o.common);
  spdlog::info("model: {}", b.label());
  SpecSetup spec(o.spec, *b.model);
  spdlog::info("speculation: {}", spec.describe());
  auto req = std::make_shared<Request>();
  req->prompt = prompt_ids(o, b);
  req->sampling = o.sampling;
  req->stop.max_tokens = o.max_tokens;
  req->stop.stop_tokens = b.eos_ids;
  req->stop.stop_strings = o.stop;
  req->stop.ignore_eos = o.ignore_eos;
  if (!o.json) {
    if (!o.chat) std::fputs(o.prompt.c_str(), stdout);  // a chat reply stands alone
    req->on_output = [](const std::string& s, const std::vector<TokenLogprob>&) {
      std::fputs(s.c_str(), stdout);
      std::fflush(stdout);
    };
  }
  SpecMetrics metrics;
  const GenerationResult r = generate(*pool, *b.model, b.tokenizer, req, &spec, &metrics);
  const auto& st = r.stats;
  if (o.json) {
    nlohmann::json stats = stats_json(st);
    if (spec.enabled()) {
      stats["spec_decode"] = spec_json(metrics);
      stats["spec_decode"]["method"] = spec.method();
      stats["spec_decode"]["num_speculative_tokens"] = spec.k();
      stats["spec_decode"]["draft_shape"] = spec.describe();
    }
    nlohmann::json j = {{"model", b.label()},       {"prompt_token_ids", r.prompt_ids}, {"token_ids", r.token_ids},
                        {"text", r.text},           {"finish_reason", r.finish_reason}, {"stats", stats}};
    std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n\n[%s] prefill: %lld tokens, %.1f tok/s | decode: %lld tokens, %.1f tok/s\n", r.finish_reason.c_str(),
                (long long)st.prompt_tokens, st.prefill_tokens_per_second(), (long long)st.generated_tokens,
                st.decode_tokens_per_second());
    if (spec.enabled())
      std::printf("%s\ntime: target %.3fs, draft %.3fs, verify %.3fs\n", metrics.summary().c_str(), metrics.target_seconds,
                  metrics.draft_seconds, metrics.verify_seconds);
  }
}
}  // namespace

void add_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a prompt");
  add_common_options(cmd, &o->common);
  add_spec_options(cmd, &o->spec);
  cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", o->sampling.temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", o->sampling.top_p, "nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", o->sampling.top_k, "keep the k most likely tokens (0 = off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-p", o->sampling.min_p, "drop tokens below min_p * max prob")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", o->sampling.seed, "sampling seed");
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "subtracted once from every generated token's logit")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "subtracted per use from generated tokens' logits")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--repetition-penalty,--repeat-penalty", o->sampling.repetition_penalty,
                  "vLLM's repetition penalty over prompt and output tokens (1 = off; --repeat-penalty: llama.cpp's name)")
      ->check(CLI::Range(0.01, 2.0));
  cmd->add_flag("--chat", o->chat, "treat -p as a user message and apply the model's chat template");
  cmd->add_option("--system", o->system, "with --chat: a system message first");
  cmd->add_option("--chat-template", o->chat_template, "with --chat: a Jinja template (file or text) replacing the tokenizer's");
  cmd->add_option("--stop", o->stop, "stop string (repeatable)");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past EOS");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace eaglet::cli
