// The tap history the engine keeps for online training and draft swaps (engine/tap_history.h):
// what it records per sequence and which finished sequences become training samples.
#include <gtest/gtest.h>

#include "engine/tap_history.h"

namespace eaglet {
namespace {

struct Collect : SampleSink {
  std::vector<CapturedSequence> got;
  void consume(CapturedSequence s) override { got.push_back(std::move(s)); }
};

// Rows of 2 taps (1 draft tap + the last layer) of hidden 2: token t's row is {t, t+.5, -t, -t-.5}.
std::vector<float> rows(const std::vector<int>& tokens) {
  std::vector<float> r;
  for (int t : tokens) r.insert(r.end(), {float(t), t + 0.5f, -float(t), -t - 0.5f});
  return r;
}

std::unique_ptr<Request> request(std::vector<int> prompt, bool no_capture = false) {
  auto r = std::make_unique<Request>();
  r->prompt = std::move(prompt);
  r->no_capture = no_capture;
  return r;
}

TEST(TapHistory, KeepsTokensAndDraftTapsAndDeliversCapturedSamples) {
  Collect sink;
  TapHistory h({.sink = &sink, .fraction = 1.0, .max_tokens = 5, .seed = 1}, 2, 1, 2);
  const auto a = request({7, 8, 9});
  h.admit(3, *a);
  const std::vector<int> prompt = {7, 8, 9}, decoded = {10, 11, 12};
  h.record(3, prompt.data(), rows(prompt).data(), 3);
  h.record(3, decoded.data(), rows(decoded).data(), 3);
  EXPECT_EQ(h.tokens(3), (std::vector<int>{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(h.draft_taps(3)[2 * 4], 11.0f);  // the 5th token (11): its row's first 2 floats
  EXPECT_EQ(h.draft_taps(3)[2 * 4 + 1], 11.5f);
  h.finish(3, *a, "stop", 4);
  ASSERT_EQ(sink.got.size(), 1u);
  const CapturedSequence& c = sink.got[0];
  EXPECT_EQ(c.ids, (std::vector<int>{7, 8, 9, 10, 11}));  // max_tokens rows
  EXPECT_EQ(c.loss_mask, (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(c.aux.size(), 10u);
  EXPECT_EQ(c.last, (std::vector<float>{-7, -7.5f, -8, -8.5f, -9, -9.5f, -10, -10.5f, -11, -11.5f}));
  EXPECT_EQ(c.prompt_tokens, 3);
  EXPECT_EQ(c.draft_version, 4);
}

TEST(TapHistory, AbortedOptedOutAndPromptOnlySequencesAreNotSamples) {
  Collect sink;
  TapHistory h({.sink = &sink}, 2, 1, 2);
  const std::vector<int> toks = {1, 2, 3, 4};
  const auto plain = request({1, 2}), opted_out = request({1, 2}, true), prompt_only = request({1, 2, 3, 4});
  for (SeqId s : {0, 1, 2, 3}) {
    h.admit(s, s == 2 ? *opted_out : s == 3 ? *prompt_only : *plain);
    h.record(s, toks.data(), rows(toks).data(), 4);
  }
  h.finish(0, *plain, "abort", 0);
  h.finish(2, *opted_out, "stop", 0);
  h.finish(3, *prompt_only, "length", 0);  // nothing generated past the prompt's last position
  EXPECT_TRUE(sink.got.empty());
  h.finish(1, *plain, "length", 0);
  EXPECT_EQ(sink.got.size(), 1u);
  // Finished sequences are forgotten: their ids may come back for new ones.
  h.admit(1, *plain);
  EXPECT_TRUE(h.tokens(1).empty());
}

TEST(TapHistory, CapturesTheRequestedFractionWithASeededDraw) {
  auto captured = [](uint64_t seed) {
    Collect sink;
    TapHistory h({.sink = &sink, .fraction = 0.25, .seed = seed}, 2, 1, 2);
    const std::vector<int> toks = {1, 2, 3};
    const auto r = request({1});
    std::vector<int> which;
    for (SeqId s = 0; s < 400; ++s) {
      h.admit(s, *r);
      h.record(s, toks.data(), rows(toks).data(), 3);
      const size_t before = sink.got.size();
      h.finish(s, *r, "stop", 0);
      if (sink.got.size() > before) which.push_back(int(s));
    }
    return which;
  };
  const auto a = captured(5);
  EXPECT_EQ(a, captured(5));
  EXPECT_NE(a, captured(6));
  EXPECT_GT(a.size(), 60u);
  EXPECT_LT(a.size(), 140u);
}

}  // namespace
}  // namespace eaglet
