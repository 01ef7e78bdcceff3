// Training and prompt data with mistakes in it: every error names the file and the line (JSONL)
// or record (JSON array) and the field, instead of "unexpected error: [json.exception...]"
// (issue 12, failure 11).
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "engine/prompt_dataset.h"
#include "support/test_util.h"
#include "train/chat_data.h"
#include "train/dataset.h"

namespace eaglet {
namespace {

const char* kGood = R"({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]})";

TEST(TrainData, ChatJsonlErrorsNameTheLine) {
  test::TempDir d;
  const std::string f = d.file("chat.jsonl");
  test::write_text(f, std::string(kGood) + "\n\n" + kGood + "\n{\"conversations\": [\n");
  test::expect_mentions(test::error_of([&] { load_conversations(f, 0); }), {f + ":4", "bad JSON"});

  test::write_text(f, std::string(kGood) + "\n" + R"({"messages": [{"role": 5, "content": "x"}]})" + "\n");
  test::expect_mentions(test::error_of([&] { load_conversations(f, 0); }), {f + ":2", "role"});
  test::write_text(f, R"({"messages": [{"role": "user", "content": ["x"]}]})");
  test::expect_mentions(test::error_of([&] { load_conversations(f, 0); }), {f + ":1", "content"});
  test::write_text(f, R"({"messages": {"role": "user"}})");
  test::expect_mentions(test::error_of([&] { load_conversations(f, 0); }), {f + ":1", "messages"});
  test::write_text(f, std::string(kGood) + "\n[1, 2]\n");
  test::expect_mentions(test::error_of([&] { load_conversations(f, 0); }), {f + ":2"});
  // Good data still loads; blank lines are skipped.
  test::write_text(f, std::string(kGood) + "\n\n" + kGood + "\n");
  EXPECT_EQ(load_conversations(f, 0).size(), 2u);
}

TEST(TrainData, ChatJsonArrayErrorsNameTheRecord) {
  test::TempDir d;
  const std::string f = d.file("chat.json");
  test::write_text(f, std::string("[") + kGood + R"(, {"conversations": [{"from": null, "value": "x"}]}])");
  test::expect_mentions(test::error_of([&] { load_conversations(f, 0); }), {f + "[1]", "conversations[0]", "from"});
}

TEST(TrainData, RegeneratedSamplesAreChecked) {
  test::TempDir d;
  const std::string f = d.file("regen.jsonl");
  const std::string good = R"({"index": 0, "input_ids": [1, 5, 7], "loss_mask": [0, 1, 1]})";
  test::write_text(f, good + "\n" + R"({"index": 1, "input_ids": [1, 5]})" + "\n" + good + "\n");
  test::expect_mentions(test::error_of([&] { load_regenerated(f, 64, 100); }), {f + ":2", "loss_mask"});
  test::write_text(f, good + "\n" + R"({"index": 1, "input_ids": [1, "5"], "loss_mask": [0, 1]})" + "\n");
  test::expect_mentions(test::error_of([&] { load_regenerated(f, 64, 100); }), {f + ":2", "input_ids"});
  test::write_text(f, R"({"index": 1, "input_ids": [1, 500], "loss_mask": [0, 1]})" "\n" + good + "\n");
  test::expect_mentions(test::error_of([&] { load_regenerated(f, 64, 100); }), {f + ":1", "input_ids", "500", "100"});
  test::write_text(f, R"({"index": 1, "input_ids": [1, 4294967297], "loss_mask": [0, 1]})" "\n" + good + "\n");
  test::expect_mentions(test::error_of([&] { load_regenerated(f, 64, 100); }), {f + ":1", "input_ids"});
  test::write_text(f, R"({"index": "x", "input_ids": [1, 2], "loss_mask": [0, 1]})" "\n" + good + "\n");
  test::expect_mentions(test::error_of([&] { load_regenerated(f, 64, 100); }), {f + ":1", "index"});
  test::write_text(f, R"({"index": 1, "input_ids": [1, 2], "loss_mask": [0, 7]})" "\n" + good + "\n");
  test::expect_mentions(test::error_of([&] { load_regenerated(f, 64, 100); }), {f + ":1", "loss_mask"});
  test::write_text(f, good + "\n" + good + "\n");
  EXPECT_EQ(load_regenerated(f, 64, 100).size(), 2u);
}

TEST(TrainData, PromptFilesWithWrongTypesNameTheLine) {
  test::TempDir d;
  const std::string f = d.file("prompts.jsonl");
  test::write_text(f, "{\"prompt\": \"a\"}\n{\"messages\": [{\"role\": 5, \"content\": \"x\"}]}\n");
  test::expect_mentions(test::error_of([&] { load_prompts(f, -1); }), {f + ":2"});
  test::write_text(f, "{\"prompt\": \"a\"}\n{\"messages\": [\"x\"]}\n");
  test::expect_mentions(test::error_of([&] { load_prompts(f, -1); }), {f + ":2"});
}

}  // namespace
}  // namespace eaglet
