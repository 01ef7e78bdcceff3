// The trainer's configuration: a YAML file (sections model, data, regen, training, inference,
// export) plus `section.key=value` (or top-level `key=value`) overrides from the command line.
// TorchSpec / SpecForge key names (learning_rate, train_data_path, ttt_length, ...) are accepted
// as aliases in any section, with hyphens or underscores; an unknown key names the nearest one.
#pragma once
#include <string>
#include <vector>

namespace eaglet {

struct DraftShape {
  int hidden = 0;  // 0: the target's hidden size
  int intermediate = 0;  // 0: the target's intermediate size
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;  // 0: the target's
  int draft_vocab = 0;   // 0: the target's vocabulary (no pruning)
  double rope_theta = 0;  // 0: the target's RoPE base, as TorchSpec and SpecForge inherit it
  // "eagle3", "eagle3.1" (fc_norm and norm_output both on: the MiniMax-M3 draft's flavour), or
  // "dflash" (a block draft: the fields below).
  std::string type = "eagle3";
  bool fc_norm = false;      // RMSNorm on each tap before fc
  bool norm_output = false;  // the state fed back is norm(out)
  // DFlash: Qwen3 layers, the block (one forward drafts block_size - 1 tokens), the token the
  // block's positions 1.. hold (-1: the target tokenizer's unk, else 0), and the target layers
  // read (0-based, as the checkpoint numbers them; empty: z-lab's spread).
  int num_layers = 1;
  int block_size = 16;
  int mask_token_id = -1;
  std::vector<int> target_layer_ids;
  // DFlash attention, resolved as a published config.json's (parse_dflash_config, vLLM's order;
  // over draft_model_config's own keys): per layer full_attention or sliding_attention (empty:
  // as the config says, else all full), the sliding window, and whether layers are causal
  // ("true", "false", or "auto": as the config says, else exactly the sliding ones).
  std::vector<std::string> layer_types;
  int sliding_window = 0;
  std::string causal = "auto";
  bool eagle31() const { return type == "eagle3.1"; }
  bool dflash() const { return type == "dflash"; }
};

struct TrainConfig {
  std::string output_dir = "runs/eagle3";
  uint64_t seed = 0;
  // model
  std::string target;                  // HF directory; empty = built-in model
  std::vector<int> aux_layers;         // eaglet/vLLM numbering; empty = (2, L/2, L-3)
  DraftShape draft;
  std::string draft_config;            // an HF draft config.json (SpecForge's draft_model_config): shape
  std::string lm_head = "init-from-target";  // train | init-from-target | frozen-target
  // data
  std::string data_path;               // files or globs, comma-separated (a YAML list also works)
  int num_samples = 0;                 // 0 = all
  int max_length = 512;
  int eval_samples = 64;               // held out from the end of the data (when eval_path is empty)
  std::string eval_path;               // a separate evaluation file (same formats as path)
  int max_bad_records = 100;           // malformed records skipped (and counted) before giving up
  std::string chat_template;           // a Jinja file for chat data; empty: the target tokenizer's
  // regen
  bool regen = true;
  float regen_temperature = 0.8f;
  int regen_max_new_tokens = 120;
  int regen_prefix_tokens = 8;         // plain text: tokens of each sample kept as the prompt
  int regen_batch = 8;
  int regen_samples_per_prompt = 1;
  // training
  int ttt_steps = 7;
  int batch_size = 16;
  int steps = 1000;
  double num_epochs = 0;               // > 0: steps = ceil(num_epochs * training samples / batch_size)
  double lr = 1e-4;
  double warmup_ratio = 0.02;
  double grad_clip = 0.5;
  double step_weight = 0.8;            // loss weight of TTT step i is step_weight^i
  int num_anchors = 512;               // DFlash: blocks drawn per sequence per step (at most)
  double loss_decay_gamma = 0;         // DFlash: slot k weighs exp(-(k - 1) / gamma); 0: 7 at block 16, scaled
  // Which loss-mask entry scores TTT index t: "torchspec" (loss_mask[t], TorchSpec and SpecForge)
  // or "next-token" (loss_mask[t + 1], eaglet before). See LossMaskAlignment.
  std::string loss_mask = "torchspec";
  int save_every = 250;
  int log_every = 25;
  int eval_every = 0;                  // evaluate every N steps (0: at the end only)
  int micro_batch_size = 0;            // per rank; 0 = batch_size / ranks (else batch_size = it x ranks)
  int zero_stage = 1;                  // 1: optimiser state sharded over ranks (ZeRO-1); 0: replicated
  int dist_timeout_s = 60;             // a collective that waits longer names the stuck rank and stops
  int train_threads = 1;
  std::string device = "cpu";
  bool bf16 = false;
  // inference (hidden-state producers)
  std::string inference_mode = "thread";  // thread | zmq
  int inference_workers = 1;
  int inference_threads = 1;
  int queue_size = 64;
  std::string zmq_endpoint = "tcp://127.0.0.1:5557";
  int worker_timeout_s = 60;
  // export
  std::string key_style = "midlayer";  // midlayer | vllm

  // Regenerated data of input file `i` of `n` (one input keeps the plain name).
  std::string regen_path(size_t i = 0, size_t n = 1) const {
    return output_dir + (n == 1 ? std::string("/regen.jsonl") : "/regen." + std::to_string(i) + ".jsonl");
  }
  std::string checkpoint_dir() const { return output_dir + "/checkpoint"; }
  std::string export_dir() const { return output_dir + "/export"; }

  static TrainConfig load(const std::string& yaml_path, const std::vector<std::string>& overrides);
  void validate() const;
  std::string to_yaml() const;
};

}  // namespace eaglet
