// The trainer's draft settings (no libtorch here: the CLI and trainer.h include them), each as
// inference resolves it, so the module trains exactly what the engine serves and the export
// writes these same settings to config.json.
//  - EAGLE-3: sizes, vocabularies, aux layers and, of the flavour flags, the two of EAGLE-3.1 the
//    module trains (fc_norm, norm_output); one Llama layer.
//  - DFlash: the block draft's config (layers, block size, mask token, target layer ids).
// Both with their RoPE as inference computes it (the target's scaling inherited).
#pragma once
#include "models/dflash.h"
#include "models/eagle3_config.h"
#include "models/rope.h"

namespace eaglet {

struct DraftModuleOptions {
  Eagle3Config config;
  Rope rope;
};

struct DFlashModuleOptions {
  DFlashConfig config;
  Rope rope;
};

}  // namespace eaglet
