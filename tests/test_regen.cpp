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
#include "train/chat_data.h"
#include "train/regen.h"
#include "tokenizer/chat_template.h"
#include <filesystem>

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

// `eaglet regen` needs no libtorch: it exists in every build (the sanitizer builds have no trainer).
TEST(Regen, TheCommandRunsInEveryBuild) {
  test::TempDir d;
  test::write_text(d.file("data.txt"), "One story.\nAnother story.\n");
  const auto r = test::run_command(test::eaglet_binary() + " regen --data " + d.file("data.txt") + " -o " +
                                   d.file("out.jsonl") + " --max-new-tokens 4 --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"samples\":2"), std::string::npos) << r.output;
  EXPECT_EQ(sorted_lines(d.file("out.jsonl")).size(), 2u);
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
  EXPECT_EQ(regenerate(test::pool(), *b.model, b.tokenizer, b.eos_ids, o), 24);
  // An interrupted run: the first 7 lines and half of the 8th.
  auto full = read_text_file(o.output);
  size_t cut = 0;
  for (int i = 0; i < 7; ++i) cut = full.find('\n', cut) + 1;
  test::write_text(d.file("part.jsonl"), full.substr(0, cut + 20));
  o.output = d.file("part.jsonl");
  EXPECT_EQ(regenerate(test::pool(), *b.model, b.tokenizer, b.eos_ids, o), 24);
  EXPECT_EQ(sorted_lines(d.file("part.jsonl")), sorted_lines(d.file("full.jsonl")));
  auto samples = load_regenerated(d.file("part.jsonl"), 512, b.model->config().vocab);
  std::set<int64_t> idx;
  for (auto& s : samples) idx.insert(s.index);
  EXPECT_EQ(idx.size(), 24u);
  EXPECT_EQ(samples[0].ids.size(), samples[0].loss_mask.size());
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// A tiny target with the byte tokenizer and a chat template.
struct ChatFixture {
  test::TempDir dir;
  std::string target, data;
  ChatFixture() {
    target = dir.file("target");
    test::write_byte_vocab_target(target, /*chat_template=*/true);
    data = dir.file("chat.jsonl");
    test::write_text(data,
                     R"({"conversations": [{"from": "human", "value": "hi cat"}, {"from": "gpt", "value": "meow"}]})" "\n"
                     R"({"messages": [{"role": "system", "content": "be kind"}, {"role": "user", "content": "one"},)"
                     R"( {"role": "assistant", "content": "uno"}, {"role": "user", "content": "two"}, {"role": "assistant", "content": "dos"}]})" "\n");
  }
};

TEST(ChatData, AssistantOnlyLossMask) {
  ChatFixture f;
  ModelBundle b = load_bundle(f.target);
  auto tmpl = ChatTemplate::from_tokenizer_config(b.tokenizer.config());
  ASSERT_TRUE(tmpl);
  auto convs = load_conversations(f.data, 0);
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_EQ(convs[0].messages[0].role, "user");
  EXPECT_EQ(convs[0].messages[1].role, "assistant");
  TrainSample s = render_conversation(convs[1], *tmpl, b.tokenizer, 1024);
  std::vector<int> masked;
  for (size_t i = 0; i < s.ids.size(); ++i)
    if (s.loss_mask[i]) masked.push_back(s.ids[i]);
  // Exactly the assistant replies and their end markers are trained on.
  EXPECT_EQ(b.tokenizer.decode(masked, false), "uno</s>dos</s>");
  EXPECT_EQ(b.tokenizer.decode(s.ids), "[system] be kind[user] one[assistant] uno[user] two[assistant] dos");
}

TEST(ChatData, RegenRewritesAssistantTurnsOnly) {
  ChatFixture f;
  ModelBundle b = load_bundle(f.target);
  RegenOptions o;
  o.input = f.data;
  o.output = f.dir.file("regen.jsonl");
  o.max_new_tokens = 6;
  o.batch = 2;
  EXPECT_EQ(regenerate(test::pool(), *b.model, b.tokenizer, b.eos_ids, o), 2);
  auto samples = load_regenerated(o.output, 4096, b.model->config().vocab);
  ASSERT_EQ(samples.size(), 2u);
  const std::string text = b.tokenizer.decode(samples[1].ids);
  EXPECT_EQ(text.rfind("[system] be kind[user] one[assistant] ", 0), 0u) << text;
  EXPECT_NE(text.find("[user] two[assistant] "), std::string::npos) << text;
  EXPECT_EQ(text.find("uno"), std::string::npos) << "the assistant turn was not regenerated: " << text;
  int masked = 0;
  for (auto m : samples[1].loss_mask) masked += m;
  EXPECT_GT(masked, 0);
  EXPECT_LE(masked, 2 * 7);  // at most 6 generated tokens + the end marker per turn
}

}  // namespace
}  // namespace eaglet
