// Training samples: token ids with a loss mask. Read from regenerated JSONL (`input_ids` +
// `loss_mask`), plain text (`.txt`, one sample per line or per blank-line-separated block; every
// token counts), or JSONL/JSON records with `text`.
#pragma once
#include <string>
#include <vector>

#include "core/bad_records.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {

struct TrainSample {
  int64_t index = 0;
  std::vector<int> ids;
  std::vector<uint8_t> loss_mask;  // 1 where the token is a training target
};

// Raw texts of a data file (for regeneration prompts and plain-text training). With `bad`,
// malformed records are counted there and skipped, in every loader here.
std::vector<std::string> load_texts(const std::string& path, int limit, BadRecords* bad = nullptr);
std::vector<TrainSample> tokenize_texts(const std::vector<std::string>& texts, const Tokenizer& tok, int max_length);
// Regenerated samples written by `eaglet regen` (sorted by index); token ids must be below
// `vocab` (the target's vocabulary size; 0 checks only that they fit an int).
std::vector<TrainSample> load_regenerated(const std::string& path, int max_length, int vocab,
                                         BadRecords* bad = nullptr);
// True for JSONL whose first record has `input_ids` (already regenerated: trained on as is).
bool is_regenerated_file(const std::string& path);
// data.path / eval_path: comma-separated files or glob patterns, expanded in order (a pattern that
// matches nothing is an error naming it).
std::vector<std::string> expand_data_paths(const std::string& spec);

}  // namespace eaglet
