// The trainer's EAGLE-3 draft settings (no libtorch here: the CLI and trainer.h include it): the
// draft's config as inference resolves it (sizes, vocabularies, aux layers, and of the flavour
// flags the two of EAGLE-3.1 that the module trains: fc_norm, norm_output; it is one Llama layer)
// and its RoPE as inference computes it (the target's scaling inherited). The export writes these same two to config.json.
#pragma once
#include "models/eagle3_config.h"
#include "models/rope.h"

namespace eaglet {

struct DraftModuleOptions {
  Eagle3Config config;
  Rope rope;
};

}  // namespace eaglet
