#include "engine/model_bundle.h"

#include <algorithm>

#include "core/error.h"
#include "io/json_config.h"
#include "io/mapped_file.h"

namespace eaglet {

std::string ModelBundle::label() const {
  const auto& c = model->config();
  if (builtin) return "built-in model (RANDOM weights, output is noise; pass -m DIR for a real model)";
  std::string name = c.dir;
  while (!name.empty() && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') + 1);
  return name + " (" + c.architecture + ", " + c.dtype_name + ")";
}

ModelBundle load_bundle(const std::string& dir, kernels::QuantScheme quantize, const std::string& tokenizer_dir) {
  ModelBundle b;
  if (dir.empty()) {
    b.model = make_builtin_model();
    b.builtin = true;
  } else {
    b.model = load_model(dir);
    b.tokenizer = !tokenizer_dir.empty() ? Tokenizer::from_dir(tokenizer_dir)
                  : is_gguf_path(dir)      ? Tokenizer::from_gguf(dir)
                                           : Tokenizer::from_dir(dir);
  }
  b.model->quantize_weights(quantize);
  const int V = b.model->config().vocab;
  // A token the tokenizer can produce but the model has no embedding row for would be read past
  // the embedding table. (Models often have more rows than tokens; never fewer.)
  for (int id = V; id < b.tokenizer.vocab_size(); ++id)
    if (!b.tokenizer.token_bytes(id).empty())
      fail("{}/tokenizer.json: token '{}' has id {}, but the model's vocab_size is {} (config.json)", tokenizer_dir.empty() ? dir : tokenizer_dir,
           b.tokenizer.token_bytes(id), id, V);
  auto add = [&](int id) {
    if (id >= 0 && std::find(b.eos_ids.begin(), b.eos_ids.end(), id) == b.eos_ids.end()) b.eos_ids.push_back(id);
  };
  for (int id : b.model->config().eos_tokens) add(id);
  for (int id : b.tokenizer.eos_ids()) add(id);
  if (!dir.empty() && file_exists(dir + "/generation_config.json")) {
    JsonConfig g = JsonConfig::load(dir + "/generation_config.json");
    if (g.has("eos_token_id"))
      for (auto id : g.get_int_list("eos_token_id")) {
        EAGLET_CHECK(id >= 0 && id < V, "{}: eos_token_id {} is outside the vocabulary [0, {})", g.where(), id, V);
        add(int(id));
      }
  }
  return b;
}

}  // namespace eaglet
