// DFlash drafts from llama.cpp's GGUF files (architecture `dflash`, written by its converter's
// DFlashModel given --target-model-dir). The metadata becomes the draft's config.json fields, so
// the checks, RoPE and forward are the Hugging Face path's own; the tensors are read under
// llama.cpp's names.
//
// What differs from the Hugging Face checkpoint: `dflash.target_layers` lists the target layers
// whose *inputs* are tapped (llama.cpp's runtime taps layer inputs), i.e. the checkpoint's
// target_layer_ids + 1, which is eaglet's own tap numbering; the mask token is the vocabulary's
// `tokenizer.ggml.mask_token_id`; hidden_norm is `enc.output_norm`. Qwen3 layers use NEOX RoPE,
// so q and k rows are stored unpermuted.
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <set>

#include "core/error.h"
#include "io/gguf.h"
#include "models/dflash.h"
#include "models/gguf_weights.h"

namespace eaglet {

namespace {

int64_t integer(const GgufFile& f, const char* key) {
  const nlohmann::json& m = f.metadata();
  if (!m.contains(key) || !m[key].is_number_integer()) fail("{}: metadata '{}' is missing or not an integer", f.path(), key);
  return m[key].get<int64_t>();
}

// The config.json fields of a `dflash` GGUF file's metadata.
nlohmann::json draft_config(const GgufFile& f, int target_hidden) {
  const nlohmann::json& m = f.metadata();
  nlohmann::json hf = gguf_llama_config(f, "dflash");
  hf["architectures"] = {"DFlashDraftModel"};
  // llama.cpp runs sliding-window dflash layers non-causal, vLLM and SGLang causal: which one a
  // file's trainer meant is not in the file, so such files are refused rather than guessed at.
  for (const char* key : {"dflash.attention.sliding_window", "dflash.attention.sliding_window_pattern"})
    EAGLET_CHECK(!m.contains(key), "{}: metadata '{}': sliding-window layers are read from Hugging Face directories "
                 "only (layer_types), not from GGUF", f.path(), key);
  auto it = m.find("dflash.target_layers");
  if (it == m.end() || !it->is_array() || it->empty())
    fail("{}: metadata 'dflash.target_layers' must list the tapped target layers", f.path());
  std::vector<int64_t> ids;
  for (const auto& v : *it) {
    EAGLET_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1,
                 "{}: dflash.target_layers holds {}: llama.cpp numbers layer inputs, from 1", f.path(), v.dump());
    ids.push_back(v.get<int64_t>() - 1);
  }
  const char* mask_key = m.contains("tokenizer.ggml.mask_token_id") ? "tokenizer.ggml.mask_token_id" : "dflash.mask_token_id";
  hf["dflash_config"] = {{"target_layer_ids", ids}, {"mask_token_id", integer(f, mask_key)}};
  hf["block_size"] = m.contains("dflash.block_size") ? integer(f, "dflash.block_size") : 16;
  hf["target_hidden_size"] = m.contains("dflash.target_hidden_size") ? integer(f, "dflash.target_hidden_size") : target_hidden;
  return hf;
}

}  // namespace

std::unique_ptr<DFlashDraft> DFlashDraft::load_gguf(const std::string& path, const Model& target) {
  auto file = std::make_shared<const GgufFile>(path);
  const std::string arch = file->metadata().value("general.architecture", "");
  if (arch != "dflash") fail("{}: GGUF architecture '{}' is not a DFlash draft ('dflash')", path, arch);
  const JsonConfig cfg(draft_config(*file, target.config().hidden), path + " (GGUF metadata)");
  DFlashConfig c = parse_dflash_config(cfg, target.config().num_layers, target.config().hidden);
  EAGLET_CHECK(c.mask_token_id < target.config().vocab, "{}: mask token {} is outside the target's vocabulary of {}",
               path, c.mask_token_id, target.config().vocab);
  std::unique_ptr<DFlashDraft> d(new DFlashDraft(c, Rope::from_config(cfg, c.head_dim), target));
  GgufWeights w(file, &d->weights_);
  const std::set<std::string> used = d->read_weights(
      {"fc.weight", "enc.output_norm.weight", "output_norm.weight", "blk.", Naming::Gguf},
      [&](const std::string& name, int64_t rows, int64_t cols) { return w.matrix(name, rows, cols); },
      [&](const std::string& name, int64_t n) { return w.vector(name, n); });
  for (const GgufTensor& t : file->tensors())
    if (!used.count(t.name))
      fail("{}: tensor '{}' is not used by a DFlash draft (token_embd and output are the target's)", path, t.name);
  spdlog::info("DFlash draft {} (GGUF): {} layers, hidden {}, block {}, mask token {}, taps of target layers {}", path,
               c.num_layers, c.hidden, c.block_size, c.mask_token_id, fmt::join(c.target_layer_ids, ","));
  return d;
}

}  // namespace eaglet
