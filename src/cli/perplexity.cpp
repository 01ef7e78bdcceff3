// `eaglet perplexity`: how well the target predicts a text file (llama-perplexity's windows),
// e.g. to report what --quantize costs against the unquantised model.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/perplexity.h"
#include "io/mapped_file.h"

namespace eaglet::cli {

namespace {
struct PerplexityOptions {
  CommonOptions common;
  std::string file;
  int context = 256;
  int max_windows = 0;
  std::string json;
};

void run_perplexity(const PerplexityOptions& o) {
  apply_common_options(o.common);
  const auto pool = make_thread_pool(o.common.threads);
  ModelBundle b = load_target(o.common);
  spdlog::info("model: {}", b.label());
  const std::vector<int> ids = b.tokenizer.encode(read_text_file(o.file));
  const PerplexityResult r = perplexity(*pool, *b.model, ids, o.context, o.max_windows);
  std::printf("%s: perplexity %.4f over %lld tokens (%lld windows of %d, second halves scored), %.1f tokens/s\n",
              b.label().c_str(), r.perplexity(), (long long)r.scored, (long long)r.windows, o.context,
              double(r.windows) * o.context / r.seconds);
  if (!o.json.empty()) {
    const nlohmann::json j = {{"model", b.label()},          {"file", o.file},          {"context", o.context},
                              {"windows", r.windows},        {"scored_tokens", r.scored}, {"perplexity", r.perplexity()},
                              {"mean_nll", r.nll_sum / double(std::max<int64_t>(1, r.scored))}, {"seconds", r.seconds}};
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
}
}  // namespace

void add_perplexity(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of the target on a text file");
  add_common_options(cmd, &o->common);
  cmd->add_option("-f,--file", o->file, "text file")->required();
  cmd->add_option("-c,--context", o->context, "tokens per window (the second half of each is scored)")
      ->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--max-windows", o->max_windows, "stop after N windows (0 = the whole file)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", o->json, "write the result as JSON to this file");
  cmd->callback([o] { run_perplexity(*o); });
}

}  // namespace eaglet::cli
