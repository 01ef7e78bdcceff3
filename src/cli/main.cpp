// eaglet: EAGLE-3 speculative decoding. Subcommands are registered from cli/commands.h.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "io/hf_cache.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/version.h"
#include "io/mapped_file.h"
#include "kernels/isa_table.h"

namespace eaglet::cli {

void add_common_options(CLI::App* cmd, CommonOptions* o) {
  cmd->add_option("-m,--model", o->model_dir, "Hugging Face model directory or llama.cpp .gguf file (default: built-in random model)");
  cmd->add_option("--threads", o->threads, "worker threads (default: cores available)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-mmap", o->no_mmap, "read weights into memory at load instead of mapping the files");
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer directory or cached Hugging Face id (default: the model's)");
  cmd->add_option("--dtype", o->dtype,
                  "auto | bfloat16 | float16 | float32: weights run in the dtype they are stored in; another value is an "
                  "error (use --quantize for smaller weights)");
  cmd->add_option("--quantize", o->quantize,
                  "q8_0 | q4_0 | q4_k: quantise the layers' matrices on load (GGUF blocks, round to nearest)");
}

ModelBundle load_target(const CommonOptions& o) {
  ModelBundle b = load_bundle(resolve_model_path(o.model_dir), parse_quantize_option(o.quantize), resolve_model_path(o.tokenizer));
  static const std::map<std::string, std::string> names = {
      {"auto", ""},     {"bfloat16", "BF16"}, {"bf16", "BF16"},  {"float16", "F16"},
      {"half", "F16"},  {"fp16", "F16"},      {"float32", "F32"}, {"float", "F32"}, {"fp32", "F32"}};
  const auto it = names.find(o.dtype);
  if (it == names.end()) fail("--dtype: '{}' is not one of auto, bfloat16, float16, float32", o.dtype);
  if (!it->second.empty() && it->second != b.model->config().dtype_name)
    fail("--dtype {}: {} stores its weights as {}, and eaglet runs weights in their stored dtype (--dtype auto; "
         "--quantize q8_0|q4_0|q4_k for smaller ones)", o.dtype, o.model_dir.empty() ? "the built-in model" : o.model_dir,
         b.model->config().dtype_name);
  return b;
}

std::string template_source(const std::string& v) {
  if (v.empty() || v.find("{%") != std::string::npos || v.find("{{") != std::string::npos) return v;
  if (!file_exists(v)) fail("--chat-template: '{}' is neither a file nor a Jinja template", v);
  return read_text_file(v);
}

// llama-server's --spec-type values as eaglet's methods; its other drafters are refused by name.
std::string spec_method_of_llama_type(const std::string& v) {
  static const std::map<std::string, std::string> methods = {
      {"none", "none"}, {"draft-eagle3", "eagle3"}, {"draft-dflash", "dflash"}, {"ngram-simple", "ngram"}};
  const auto it = methods.find(v);
  if (it == methods.end())
    throw CLI::ValidationError("--spec-type", "'" + v + "' is not one eaglet runs (none, draft-eagle3, draft-dflash, ngram-simple)");
  return it->second;
}

void add_spec_options(CLI::App* cmd, SpecOptions* o) {
  cmd->add_option("--draft,--model-draft,--spec-draft-model", o->draft_dir, "the draft: an EAGLE-3 Hugging Face directory (LlamaForCausalLMEagle3 / Eagle3Speculator) or llama.cpp's eagle3 .gguf, or a DFlash directory (DFlashDraftModel) with --spec-method dflash (--model-draft: llama-server's name)");
  cmd->add_option_function<std::string>(
      "--speculative-config", [o](const std::string& v) { apply_speculative_config(*o, v); },
      "vLLM's JSON, e.g. '{\"method\":\"eagle3\",\"model\":\"DRAFT\",\"num_speculative_tokens\":3}' (also ngram with "
      "prompt_lookup_max/min; applied after the other options)");
  cmd->add_option("--spec-method", o->method, "eagle3 | dflash | ngram | none (default: eagle3 with --draft, else none)");
  cmd->add_option_function<std::string>(
      "--spec-type", [o](const std::string& v) { o->method = spec_method_of_llama_type(v); },
      "llama-server's name for --spec-method: none | draft-eagle3 | draft-dflash | ngram-simple");
  cmd->add_option("-k,--num-speculative-tokens,--draft-max,--spec-draft-n-max", o->num_speculative_tokens,
                  "draft a chain of k tokens per step (0 = off; default: --draft-shape auto; --draft-max: llama-server's name)")
      ->check(CLI::Range(0, 16));
  cmd->add_option("--draft-shape", o->draft_shape,
                  "auto (cost model picks the tree each step; the default) | auto:topk=N,depth=N,budget=N (auto "
                  "within those caps; default 4, 8, 31) | chain (with -k) | topk=N,depth=N,budget=N (a fixed EAGLE-3 tree)");
  cmd->add_flag("--allow-unused-draft-tensors", o->allow_unused_draft_tensors,
                "load a draft whose checkpoint holds tensors its flavour does not read (else an error naming them)");
  cmd->add_option("--draft-quantize", o->draft_quantize,
                  "none | q8_0 | q4_0 | q4_k: quantise the draft's matrices on load (its own; not the target's "
                  "embedding or lm_head): fewer bytes per draft level; the output stays the target's");
  cmd->add_option("--draft-min", o->draft_min,
                  "llama-server's: a step whose draft has fewer tokens decodes without it (0 = use any draft)")
      ->check(CLI::Range(0, 64));
  cmd->add_flag("!--no-constrain-draft", o->constrain_draft,
                "structured output: let the draft (EAGLE-3, DFlash) propose tokens the grammar refuses (verification still masks "
                "the target; to measure what constraining the draft gains)");
  cmd->add_option("--ngram-max", o->ngram_max, "n-gram lookup: longest n tried")->check(CLI::Range(1, 64));
  cmd->add_option("--ngram-min", o->ngram_min, "n-gram lookup: shortest n tried")->check(CLI::Range(1, 64));
  cmd->add_option("--cost-model-cache", o->cost_model_cache,
                  "file caching the measured forward costs (default: ~/.cache/eaglet/cost_model.json; off = measure)");
  cmd->add_option("--draft-semantics", o->draft_semantics,
                  "what the draft's norm_output means: auto = vllm (vLLM, SGLang, speculators, TorchSpec, SpecForge "
                  "since PR #879) | specforge-legacy (drafts trained with SpecForge PR #568 to #879)");
  cmd->add_option("--aux-numbering", o->aux_numbering,
                  "how the draft config numbers aux layers: auto (top-level ids as vLLM reads them, ids only under "
                  "eagle_config as SGLang does) | input (vLLM) | output (SGLang/SpecForge/TorchSpec)");
}

void apply_common_options(const CommonOptions& o) {
  MappedFile::set_read_into_memory(o.no_mmap);
  spdlog::info("kernels: {}", kernels::active_table().name);
}

std::unique_ptr<ThreadPool> make_thread_pool(int threads) {
  auto pool = std::make_unique<ThreadPool>(threads);
  spdlog::info("threads: {}", pool->size());
  return pool;
}

}  // namespace eaglet::cli

int main(int argc, char** argv) {
  CLI::App app{"eaglet: EAGLE-3 speculative decoding on CPU"};
  app.require_subcommand(1);
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_default_logger(spdlog::stderr_color_mt("eaglet"));
  // -v before or after the subcommand (fallthrough), applied as soon as it is read.
  app.add_flag_callback("-v,--verbose", [] { spdlog::set_level(spdlog::level::debug); }, "debug logging")
      ->trigger_on_parse();
  app.fallthrough();
  // Every --help shows each option's default (subcommands inherit this when they are added).
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("eaglet ") + eaglet::kVersion);
  eaglet::cli::add_generate(app);
  eaglet::cli::add_bench(app);
  eaglet::cli::add_perplexity(app);
  eaglet::cli::add_regen(app);
  eaglet::cli::add_infer_worker(app);
#ifdef EAGLET_WITH_TRAINER
  eaglet::cli::add_train(app);
  eaglet::cli::add_demo(app);
#endif
  eaglet::cli::add_serve(app);
  eaglet::cli::add_loadtest(app);
  eaglet::cli::add_widen(app);
  // llama-server's two-letter short options, which CLI11 (one-letter short options) cannot declare.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args) {
    if (a == "-np") a = "--parallel";
    else if (a == "-md") a = "--model-draft";
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const eaglet::Error& e) {
    spdlog::error("{}", e.what());
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("unexpected error: {}", e.what());
    return 2;
  }
  return 0;
}
