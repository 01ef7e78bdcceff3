// Random DFlash drafts in z-lab's published layout, for the tests of the loader, the proposer and
// verification.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>

#include <string>
#include <vector>

namespace eaglet::test {

// A 2-layer DFlash draft of block 8 over write_tiny_model's default shape (hidden 48, 3 layers;
// `target_layers` for a deeper target such as write_byte_vocab_target's 4), tapping target
// layers 0 and 2, with mask token `mask_token_id`.
nlohmann::json dflash_draft_config(int mask_token_id = 96, int target_layers = 3);
// dflash_draft_config() as published drafts vary its attention: full (first), then layer 0
// sliding with window 4, every layer sliding (use_swa, window 3) and not causal, every layer causal.
std::vector<nlohmann::json> dflash_attention_variants(int mask_token_id = 96, int target_layers = 3);
// Writes `cfg` and random weights drawn from `seed` (plus `extra_tensors`, 4 floats each) to `dir`.
void write_dflash_draft(const std::string& dir, const nlohmann::json& cfg, const std::vector<std::string>& extra_tensors = {},
                        uint64_t seed = 11);

}  // namespace eaglet::test
