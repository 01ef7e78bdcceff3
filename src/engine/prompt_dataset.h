// Prompts for benchmarks and training data: `.txt` (one prompt per line, or blocks separated by
// blank lines when the file has any), `.jsonl`/`.json` records with `prompt`, `text`,
// `question`, `turns`, or chat `messages` / `conversations` (the first user turn is the prompt).
#pragma once
#include <string>
#include <vector>

#include "core/bad_records.h"

namespace eaglet {

// `bad`: malformed JSON records are counted there and skipped (else they are errors).
std::vector<std::string> load_prompts(const std::string& path, int limit = -1, BadRecords* bad = nullptr);

}  // namespace eaglet
