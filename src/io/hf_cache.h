// Model arguments as vLLM and transformers take them: a local path, or a Hugging Face model id
// ("org/name", optionally "org/name@revision") found in the local Hugging Face cache without any
// network: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub, in the layout
// huggingface_hub writes (models--org--name/refs/<revision> names a snapshots/<commit> folder).
#pragma once
#include <string>

namespace eaglet {

// `arg` itself when it exists (or is empty); the snapshot folder when it is a cached model id.
// Throws eaglet::Error naming the places looked in when it is neither.
std::string resolve_model_path(const std::string& arg);

}  // namespace eaglet
