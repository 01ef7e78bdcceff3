// Random DFlash drafts in z-lab's published layout, for the tests of the loader, the proposer and
// verification.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace eaglet::test {

// A 2-layer DFlash draft of block 8 over write_tiny_model's default shape (hidden 48, 3 layers),
// tapping target layers 0 and 2, with mask token `mask_token_id`.
nlohmann::json dflash_draft_config(int mask_token_id = 96);
// Writes `cfg` and seeded random weights (plus `extra_tensors`, 4 floats each) to `dir`.
void write_dflash_draft(const std::string& dir, const nlohmann::json& cfg, const std::vector<std::string>& extra_tensors = {});

}  // namespace eaglet::test
