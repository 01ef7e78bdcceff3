// What `eaglet serve --online-train` learns from: the engine core hands every captured sequence,
// once finished, to a SampleSink. A verification pass already computes the target's taps at
// every position it runs, so a served sequence is a training sample at no extra forward cost.
#pragma once
#include <cstdint>
#include <vector>

namespace eaglet {

struct CapturedSequence {
  std::vector<int> ids;            // [T] the tokens the target ran over (prompt, then generated)
  std::vector<uint8_t> loss_mask;  // [T] 1 at each index t >= P - 1, whose draft target x_{t+2} was generated
  std::vector<float> aux;          // [T, taps * H] the draft's taps (its aux layers, ascending)
  std::vector<float> last;         // [T, H] the residual stream after the last layer (pre-norm)
  int hidden = 0;
  int prompt_tokens = 0;
  int draft_version = 0;  // the draft that served it
};

// Called on the engine's thread once per captured sequence: it must not block (queue and return).
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual void consume(CapturedSequence s) = 0;
};

struct CaptureOptions {
  SampleSink* sink = nullptr;  // null: nothing captured
  double fraction = 1.0;       // share of eligible requests captured (a seeded draw per request)
  int max_tokens = 2048;       // rows kept per sequence (the first ones)
  uint64_t seed = 0;
};

}  // namespace eaglet
