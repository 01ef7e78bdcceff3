// `eaglet serve`: the OpenAI-compatible server with continuous batching and speculative decoding.
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"
#include "engine/model_bundle.h"
#include "runtime/scheduler.h"
#include "server/http_server.h"

namespace eaglet::cli {

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

struct ServeOptions {
  CommonOptions common;
  SpecOptions spec;
  SchedulerOptions sched;
  ServerOptions server;
};

void run_serve(ServeOptions o) {
  apply_common_options(o.common);
  if (o.server.api_key.empty())
    if (const char* k = std::getenv("EAGLET_API_KEY")) o.server.api_key = k;
  ModelBundle b = load_bundle(o.common.model_dir);
  spdlog::info("model: {}", b.label());
  SpecSetup spec(o.spec, *b.model);
  spdlog::info("speculation: {}", spec.describe());
  if (o.server.served_model_name.empty()) o.server.served_model_name = o.common.model_dir.empty() ? "eaglet-builtin" : o.common.model_dir;
  ServingMetrics metrics;
  Scheduler scheduler(b, spec, o.sched, metrics);
  OpenAiServer server(b, scheduler, metrics, o.server);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  std::thread watcher([&] {
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    spdlog::info("shutting down: aborting in-flight requests");
    scheduler.shutdown();
    server.stop();
  });
  const bool ok = server.listen();
  g_stop = true;
  watcher.join();
  if (!ok) fail("cannot listen on {}:{}", o.server.host, o.server.port);
  spdlog::info("server stopped");
}
}  // namespace

void add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible server (continuous batching, speculative decoding)");
  add_common_options(cmd, &o->common);
  add_spec_options(cmd, &o->spec);
  cmd->add_option("--host", o->server.host, "address to bind");
  cmd->add_option("--port", o->server.port, "port (0 = any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", o->server.served_model_name, "model name clients use (default: the -m path)");
  cmd->add_option("--api-key", o->server.api_key, "require 'Authorization: Bearer KEY' (also from EAGLET_API_KEY)");
  cmd->add_option("--max-num-seqs", o->sched.max_num_seqs, "sequences batched together")->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-len", o->sched.max_model_len, "context length (default: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-waiting", o->sched.max_waiting, "queued requests before 503")->check(CLI::PositiveNumber);
  cmd->add_option("--prefill-chunk", o->sched.prefill_chunk, "prompt tokens per step")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-blocks", o->sched.kv_blocks, "KV-cache blocks of 16 tokens (default: max-num-seqs full contexts)");
  cmd->add_option("--max-body-bytes", o->server.max_body_bytes, "largest request body accepted");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace eaglet::cli
