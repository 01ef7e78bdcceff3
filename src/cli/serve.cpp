// `eaglet serve`: the OpenAI-compatible server with continuous batching and speculative decoding.
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/online_train.h"
#include "core/error.h"
#include "io/hf_cache.h"
#include "io/mapped_file.h"
#include "engine/model_bundle.h"
#include "runtime/scheduler.h"
#include "server/openai_server.h"

namespace eaglet::cli {

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

struct ServeOptions {
  CommonOptions common;
  SpecOptions spec;
  SchedulerOptions sched;
  ServerOptions server;
  double kv_cache_gib = 0;
  bool builtin = false;
  std::string metrics_prefix = "vllm";
  std::string generation_config = "auto";
  std::optional<uint64_t> seed;
  OnlineTrainCliOptions online;
  bool api_key_given = false;
};


// The API key from --api-key, else EAGLET_API_KEY or VLLM_API_KEY (vLLM's variable too, so its
// deployments carry over). A key given but empty would silently run an open server: refused.
void resolve_api_key(ServeOptions& o) {
  if (o.api_key_given) {
    if (o.server.api_key.empty()) fail("--api-key is empty: give a key, or leave the option out to serve without one");
    return;
  }
  for (const char* var : {"EAGLET_API_KEY", "VLLM_API_KEY"})
    if (const char* k = std::getenv(var)) {
      if (!*k) fail("{} is set but empty: give a key, or unset it to serve without one", var);
      o.server.api_key = k;
      return;
    }
}

void run_serve(ServeOptions o) {
  apply_common_options(o.common);
  resolve_api_key(o);
  const auto pool = make_thread_pool(o.common.threads);
  o.sched.kv_cache_bytes = int64_t(o.kv_cache_gib * double(1 << 30));
  if (o.common.model_dir.empty() && !o.builtin)
    fail("no model: give one (eaglet serve MODEL, or -m MODEL), or --builtin for the random-weight built-in model");
  o.server.seed = o.seed;
  o.server.chat_template = template_source(o.server.chat_template);
  ModelBundle b = load_target(o.common);
  o.server.sampling_defaults = sampling_defaults_for(o.generation_config, resolve_model_path(o.common.model_dir));
  spdlog::info("model: {}", b.label());
  DraftHistory history;  // with online training, a restart serves what was serving
  const std::unique_ptr<SpecSetup> spec_setup = load_serving_spec(o.online, o.spec, *b.model, &history);
  SpecSetup& spec = *spec_setup;
  spdlog::info("speculation: {}", spec.describe());
  if (o.server.served_model_name.empty()) o.server.served_model_name = o.common.model_dir.empty() ? "eaglet-builtin" : o.common.model_dir;
  if (o.metrics_prefix != "vllm" && o.metrics_prefix != "eaglet") fail("--metrics-prefix: '{}' is not vllm or eaglet", o.metrics_prefix);
  ServingMetrics metrics(o.metrics_prefix);
  Scheduler scheduler(*pool, b, spec, o.sched, metrics);
#ifdef EAGLET_WITH_TRAINER
  std::unique_ptr<OnlineSession> online;
  if (o.online.enabled)
    online = start_online_training(o.online, b, spec, history, scheduler, *pool, metrics, &o.server);
#else
  EAGLET_CHECK(!o.online.enabled, "--online-train needs the trainer: this eaglet was built with EAGLET_WITH_TRAINER=OFF");
#endif
  OpenAiServer server(b, scheduler, metrics, o.server);
  server.bind();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  // Signal handlers may only set a flag; this thread turns it into a graceful shutdown.
  std::thread watcher([&] {
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    spdlog::info("shutting down");
    server.shutdown();
  });
  server.run();
  g_stop = true;
  watcher.join();
  spdlog::info("server stopped");
}
}  // namespace

void add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible server (continuous batching, speculative decoding)");
  add_common_options(cmd, &o->common);
  cmd->add_option("model", o->common.model_dir, "the model, as vLLM takes it (`eaglet serve MODEL`; same as -m)");
  cmd->add_flag("--builtin", o->builtin, "serve the random-weight built-in model (for tests; no -m needed)");
  cmd->add_option("--metrics-prefix", o->metrics_prefix, "vllm (vLLM's metric names) | eaglet");
  cmd->add_option("--seed", o->seed, "seed the draws of requests that give none (reproducible runs)");
  cmd->add_option("--chat-template", o->server.chat_template, "a Jinja chat template (file or text) replacing the tokenizer's");
  cmd->add_option("--generation-config", o->generation_config,
                  "auto (sampling defaults from the model's generation_config.json) | vllm (OpenAI's defaults) | a folder "
                  "holding generation_config.json");
  cmd->add_flag("--enable-auto-tool-choice", o->server.enable_auto_tool_choice,
                "serve tool_choice \"auto\": tool calls are parsed out of the text (needs --tool-call-parser)");
  cmd->add_option("--tool-call-parser", o->server.tool_call_parser, "hermes | llama3_json | minimax_m2 | minimax_m3 | qwen3_coder");
  cmd->add_option("--reasoning-parser", o->server.reasoning_parser,
                  "deepseek_r1 | qwen3 | minimax_m2 | minimax_m3: thinking goes to the `reasoning` field");
  add_spec_options(cmd, &o->spec);
  add_online_train_options(cmd, &o->online);
  auto& lim = o->server.limits;
  cmd->add_option("--host", o->server.host, "address to bind");
  cmd->add_option("--port", o->server.port, "port (0 = any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", o->server.served_model_name, "model name clients use (default: the -m path)");
  CLI::Option* api_key = cmd->add_option("--api-key", o->server.api_key,
                                         "require 'Authorization: Bearer KEY', /metrics included (also from EAGLET_API_KEY or VLLM_API_KEY)");
  cmd->add_flag("--metrics-public", o->server.metrics_public, "serve /metrics without the API key");
  cmd->add_option("--max-num-seqs,--parallel", o->sched.max_num_seqs, "sequences batched together")->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-len,-c,--ctx-size", o->sched.max_model_len, "context length (0: the model's; -c/--ctx-size: llama-server's names)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-waiting", o->sched.max_waiting, "queued requests before 503")->check(CLI::PositiveNumber);
  cmd->add_option("--prefill-chunk", o->sched.prefill_chunk, "prompt tokens per step")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-blocks", o->sched.kv_blocks, "KV-cache blocks of 16 tokens (default: max-num-seqs full contexts, within --kv-cache-memory)");
  cmd->add_option("--kv-cache-memory", o->kv_cache_gib, "GiB for the KV cache (default: half the memory available)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-body-bytes", lim.max_body_bytes, "largest request body accepted (413 beyond)");
  cmd->add_option("--request-timeout", lim.request_timeout_s, "seconds a request may take to arrive, from its first byte to its last")->check(CLI::PositiveNumber);
  cmd->add_option("--keep-alive-timeout", lim.idle_timeout_s, "seconds an idle keep-alive connection stays open")->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", lim.max_connections, "open connections before new ones get 503 (lowered to fit the open-file limit)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-response-bytes", o->server.max_response_bytes, "largest response held whole (400 beyond; echoed prompt logprobs are refused before any work)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-unsent-bytes", lim.max_unsent_bytes, "a stream whose client leaves this many bytes unread is closed")->check(CLI::PositiveNumber);
  cmd->add_option("--handler-threads", lim.handler_threads, "threads parsing, tokenizing and templating requests")->check(CLI::Range(1, 256));
  cmd->add_option("--chat-template-timeout", o->server.chat_template_timeout_s, "seconds one chat-template render may take (400 beyond)")->check(CLI::PositiveNumber);
  cmd->add_option("--drain-timeout", o->server.drain_timeout_s, "on SIGTERM, seconds running requests may still finish before they are aborted")->check(CLI::NonNegativeNumber);
  cmd->callback([o, api_key] {
    o->api_key_given = api_key->count() > 0;
    run_serve(*o);
  });
}

}  // namespace eaglet::cli
