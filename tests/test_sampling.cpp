#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "engine/output_tracker.h"
#include "sampling/sampler.h"
#include "support/test_util.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {
namespace {

TEST(Sampling, MasksAndRenormalises) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f, 3.0f};
  std::vector<float> p;
  SamplingParams sp;
  target_probs(logits.data(), 5, sp, &p);
  EXPECT_EQ(p, (std::vector<float>{0, 0, 0, 0, 1}));
  sp.temperature = 1.0f;
  sp.top_k = 2;
  target_probs(logits.data(), 5, sp, &p);
  EXPECT_NEAR(p[4], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_EQ(p[1], 0.0f);
  sp.top_k = 0;
  sp.top_p = 0.5f;  // the top token alone holds > 0.5
  target_probs(logits.data(), 5, sp, &p);
  EXPECT_EQ(p[4], 1.0f);
  sp.top_p = 1.0f;
  sp.min_p = 0.3f;  // keeps tokens with p >= 0.3 * p_max: ids 4 and 0
  target_probs(logits.data(), 5, sp, &p);
  EXPECT_GT(p[0], 0.0f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_NEAR(p[0] + p[4], 1.0f, 1e-6);
}

TEST(Sampling, SeededAndMatchesDistribution) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 42;
  Sampler a(sp), b(sp);
  std::vector<int> counts(3);
  const int n = 30000;
  for (int i = 0; i < n; ++i) {
    const int x = a.sample(logits.data(), 3);
    EXPECT_EQ(x, b.sample(logits.data(), 3));
    ++counts[size_t(x)];
  }
  std::vector<float> p;
  target_probs(logits.data(), 3, sp, &p);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(counts[size_t(i)] / double(n), p[size_t(i)], 0.015);
}

TEST(Sampling, ValidationNamesTheParameter) {
  SamplingParams sp;
  sp.top_p = 0.0f;
  try {
    validate(sp);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
}

// vLLM's definitions: logit_bias added; repetition penalty over prompt and output tokens (a
// positive logit divided, a negative one multiplied); frequency x count and presence once per
// generated token subtracted.
TEST(Sampling, PenaltiesAndLogitBias) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{2, 1.0f}};
  Sampler s(p);
  s.set_prompt({1});
  for (int t : {0, 0, 3}) s.accept(t);
  const float logits[] = {2.0f, -1.0f, 0.5f, 3.0f};
  const float* got = s.processed(logits, 4);
  const float want[] = {2.0f / 2 - (0.25f * 2 + 0.5f), -1.0f * 2, 0.5f + 1.0f, 3.0f / 2 - (0.25f + 0.5f)};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(logits[0], 2.0f);      // the input is left alone
  EXPECT_EQ(s.sample(logits, 4), 2);  // greedy on the processed logits (raw argmax: 3)
  SamplingParams bad;
  bad.frequency_penalty = 2.5f;
  EXPECT_THROW(validate(bad), Error);
}

TEST(OutputTracker, StopStringsTokensAndLength) {
  Tokenizer tok = Tokenizer::bytes();
  auto feed = [&](const std::string& text, StopConditions stop) {
    OutputTracker t(tok, stop);
    std::string streamed;
    for (int id : tok.encode(text, 0)) {
      const bool more = t.append(id);
      streamed += t.take_new_text();
      if (!more) break;
    }
    streamed += t.take_new_text();
    EXPECT_EQ(streamed, t.text());
    return std::make_pair(t.text(), t.finish_reason());
  };
  StopConditions s;
  s.max_tokens = 100;
  s.stop_strings = {"END", "xyz"};
  EXPECT_EQ(feed("hello ENXD world END more", s), std::make_pair(std::string("hello ENXD world "), std::string("stop")));
  s.stop_strings = {};
  s.stop_tokens = {tok.encode("!", 0)[0]};
  EXPECT_EQ(feed("hi! there", s), std::make_pair(std::string("hi"), std::string("stop")));
  s.ignore_eos = true;
  s.max_tokens = 5;
  EXPECT_EQ(feed("hi! there", s), std::make_pair(std::string("hi! t"), std::string("length")));
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// A completion continues its prompt: with a SentencePiece tokenizer the first generated token's
// leading space is a real space ("Once upon a" + " time"), where decoding from scratch strips it.
// (Before this, `generate` and the server returned "time, ..." and printed "Once upon atime".)
TEST(OutputTracker, KeepsTheLeadingSpaceAfterAPrompt) {
  EAGLET_REQUIRE_SHARED();
  const Tokenizer tok = Tokenizer::from_dir(test::shared_dir() + "/models/stories260K-hf");
  const std::vector<int> all = tok.encode("Once upon a time"), prompt = tok.encode("Once upon a");
  ASSERT_EQ(std::vector<int>(all.begin(), all.begin() + long(prompt.size())), prompt);
  auto continuation = [&](bool after_text) {
    StopConditions stop;
    stop.max_tokens = int(all.size() - prompt.size());  // the last token finishes and flushes it
    OutputTracker t(tok, stop, after_text);
    for (size_t i = prompt.size(); i < all.size(); ++i) t.append(all[i]);
    EXPECT_EQ(t.finish_reason(), "length");
    return t.text();
  };
  EXPECT_EQ(continuation(true), " time");
  EXPECT_EQ(tok.decode(prompt) + continuation(true), tok.decode(all));
  EXPECT_EQ(continuation(false), "time");  // text that starts a document: the start-of-text space goes
}

}  // namespace
}  // namespace eaglet
