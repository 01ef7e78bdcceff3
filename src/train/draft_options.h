// The trainer's EAGLE-3 draft settings (no libtorch here: the CLI and trainer.h include it): the
// draft's config as inference resolves it (sizes, vocabularies, aux layers; the trainer's module
// is plain EAGLE-3, one Llama layer, so the flavour flags stay off) and its RoPE as inference
// computes it (the target's scaling inherited). The export writes these same two to config.json.
#pragma once
#include "models/eagle3_config.h"
#include "models/rope.h"

namespace eaglet {

struct DraftModuleOptions {
  Eagle3Config config;
  Rope rope;
};

}  // namespace eaglet
