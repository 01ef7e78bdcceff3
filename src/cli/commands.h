// Each subcommand lives in its own file and adds itself to the CLI11 app here.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>

#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "speculation/spec_setup.h"

namespace eaglet::cli {

void add_generate(CLI::App& app);
void add_bench(CLI::App& app);
void add_train(CLI::App& app);
void add_regen(CLI::App& app);
void add_infer_worker(CLI::App& app);
void add_demo(CLI::App& app);
void add_serve(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_loadtest(CLI::App& app);
void add_widen(CLI::App& app);

// Options every model-running command shares.
struct CommonOptions {
  std::string model_dir;
  int threads = 0;  // 0 = cores available to the process
  bool no_mmap = false;
  std::string quantize;  // --quantize q8_0 | q4_0
  std::string tokenizer;  // --tokenizer DIR (vLLM's)
  std::string dtype = "auto";  // --dtype: vLLM's; only the stored dtype is accepted
};
// A Jinja chat template given on the command line: a file, or the template text itself.
std::string template_source(const std::string& file_or_text);
void add_common_options(CLI::App* cmd, CommonOptions* o);
// The target of -m (the built-in model without it), quantised when --quantize says so.
ModelBundle load_target(const CommonOptions& o);
// --draft, -k/--num-speculative-tokens, --spec-method, --aux-numbering
void add_spec_options(CLI::App* cmd, SpecOptions* o);
// Applies --no-mmap and logs the kernels in use.
void apply_common_options(const CommonOptions& o);
// The command's kernel threads (--threads; 0 = the cores available), logged.
std::unique_ptr<ThreadPool> make_thread_pool(int threads);

}  // namespace eaglet::cli
