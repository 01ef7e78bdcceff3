// `eaglet widen`: a small Llama (and an EAGLE-3 or DFlash draft trained against it) widened to a larger shape
// that computes the same function (convert/widen.h): a memory-bound target with real token
// behaviour for speed work, made from what a 2-core machine can train.
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "core/error.h"
#include "convert/widen.h"

namespace eaglet::cli {

namespace {
struct WidenOptions {
  std::string model, output, dtype = "bf16";
  std::vector<std::string> drafts, draft_outputs;  // pairwise
  WidenShape shape;
};

DType widen_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "f16" || s == "float16") return DType::F16;
  if (s == "f32" || s == "float32") return DType::F32;
  fail("--dtype: '{}' is not one of bf16, f16, f32", s);
}
}  // namespace

void add_widen(CLI::App& app) {
  auto o = std::make_shared<WidenOptions>();
  CLI::App* cmd = app.add_subcommand(
      "widen", "widen a small Llama (and its EAGLE-3 or DFlash draft) to a larger shape that computes the same function");
  cmd->add_option("-m,--model", o->model, "the small LlamaForCausalLM directory")->required();
  cmd->add_option("-o,--output", o->output, "directory for the wide target")->required();
  cmd->add_option("--draft", o->drafts,
                  "an EAGLE-3 or DFlash draft trained against the small target, widened to pair with the wide one (repeatable)");
  cmd->add_option("--draft-output", o->draft_outputs, "directory for the wide draft, one per --draft");
  cmd->add_option("--hidden", o->shape.hidden, "hidden size")->check(CLI::PositiveNumber);
  cmd->add_option("--heads", o->shape.heads, "attention heads")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-heads", o->shape.kv_heads, "key/value heads")->check(CLI::PositiveNumber);
  cmd->add_option("--head-dim", o->shape.head_dim, "head dimension")->check(CLI::PositiveNumber);
  cmd->add_option("--intermediate", o->shape.intermediate, "MLP width")->check(CLI::PositiveNumber);
  cmd->add_option("--layers", o->shape.layers, "layers")->check(CLI::PositiveNumber);
  cmd->add_option("--dtype", o->dtype, "bf16 | f16 | f32");
  cmd->add_option("--noise", o->shape.noise, "standard deviation of the cancelled filler weights");
  cmd->add_option("--seed", o->shape.seed, "filler seed");
  cmd->callback([o] {
    if (o->drafts.size() != o->draft_outputs.size())
      fail("--draft given {} times and --draft-output {}: each draft needs its output directory", o->drafts.size(),
           o->draft_outputs.size());
    o->shape.dtype = widen_dtype(o->dtype);
    widen_llama(o->model, o->output, o->shape);
    spdlog::info("widen: wrote {}", o->output);
    for (size_t i = 0; i < o->drafts.size(); ++i) {
      widen_draft(o->drafts[i], o->output, o->draft_outputs[i], o->shape);
      spdlog::info("widen: wrote {}", o->draft_outputs[i]);
    }
  });
}

}  // namespace eaglet::cli
