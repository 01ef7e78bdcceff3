// Regeneration is deterministic per sample and resumable: an interrupted run (cut mid-line)
// finishes with exactly the lines an uninterrupted run writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/model_bundle.h"
#include "io/mapped_file.h"
#include "support/test_util.h"
#include "train/dataset.h"
#include "train/regen.h"

namespace eaglet {
namespace {

std::vector<std::string> sorted_lines(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Regen, ResumesAfterInterruptionWithIdenticalOutput) {
  test::TempDir d;
  std::string texts;
  for (int i = 0; i < 12; ++i) texts += "Story number " + std::to_string(i) + " begins here.\n";
  test::write_text(d.file("data.txt"), texts);
  ModelBundle b = load_bundle("");
  RegenOptions o;
  o.input = d.file("data.txt");
  o.output = d.file("full.jsonl");
  o.max_new_tokens = 10;
  o.prefix_tokens = 4;
  o.batch = 3;
  o.samples_per_prompt = 2;
  EXPECT_EQ(regenerate(*b.model, b.tokenizer, b.eos_ids, o), 24);
  // An interrupted run: the first 7 lines and half of the 8th.
  auto full = read_text_file(o.output);
  size_t cut = 0;
  for (int i = 0; i < 7; ++i) cut = full.find('\n', cut) + 1;
  test::write_text(d.file("part.jsonl"), full.substr(0, cut + 20));
  o.output = d.file("part.jsonl");
  EXPECT_EQ(regenerate(*b.model, b.tokenizer, b.eos_ids, o), 24);
  EXPECT_EQ(sorted_lines(d.file("part.jsonl")), sorted_lines(d.file("full.jsonl")));
  auto samples = load_regenerated(d.file("part.jsonl"), 512);
  std::set<int64_t> idx;
  for (auto& s : samples) idx.insert(s.index);
  EXPECT_EQ(idx.size(), 24u);
  EXPECT_EQ(samples[0].ids.size(), samples[0].loss_mask.size());
}

}  // namespace
}  // namespace eaglet
