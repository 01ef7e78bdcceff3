// The trainer's configuration: a YAML file (sections model, data, regen, training, inference,
// export) plus `section.key=value` (or top-level `key=value`) overrides from the command line.
#pragma once
#include <string>
#include <vector>

namespace eaglet {

struct DraftShape {
  int hidden = 0;  // 0: the target's hidden size
  int intermediate = 0;  // 0: the target's intermediate size
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;  // 0: the target's
  int draft_vocab = 0;   // 0: the target's vocabulary (no pruning)
};

struct TrainConfig {
  std::string output_dir = "runs/eagle3";
  uint64_t seed = 0;
  // model
  std::string target;                  // HF directory; empty = built-in model
  std::vector<int> aux_layers;         // eaglet/vLLM numbering; empty = (2, L/2, L-3)
  DraftShape draft;
  std::string lm_head = "init-from-target";  // train | init-from-target | frozen-target
  // data
  std::string data_path;
  int num_samples = 0;                 // 0 = all
  int max_length = 512;
  int eval_samples = 64;               // held out from the end of the data
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
  double lr = 1e-4;
  double warmup_ratio = 0.02;
  double grad_clip = 0.5;
  double step_weight = 0.8;            // loss weight of TTT step i is step_weight^i
  int save_every = 250;
  int log_every = 25;
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

  std::string regen_path() const { return output_dir + "/regen.jsonl"; }
  std::string checkpoint_dir() const { return output_dir + "/checkpoint"; }
  std::string export_dir() const { return output_dir + "/export"; }

  static TrainConfig load(const std::string& yaml_path, const std::vector<std::string>& overrides);
  void validate() const;
  std::string to_yaml() const;
};

}  // namespace eaglet
