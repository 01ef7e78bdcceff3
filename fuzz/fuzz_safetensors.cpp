// Safetensors headers: offsets, shapes and dtypes from the file must never reach outside it.
#include "fuzz_input.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static eaglet::fuzz::MemFile file;
  file.set(data, size);
  eaglet::fuzz::expect_only_errors([&] {
    eaglet::SafetensorsFile st(file.path());
    volatile uint8_t sink = 0;
    for (auto& [name, t] : st.tensors())
      if (t.nbytes) sink = sink + t.data[0] + t.data[t.nbytes - 1];  // ASan checks both ends are in the file
  });
  return 0;
}
