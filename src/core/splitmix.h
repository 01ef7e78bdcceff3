// splitmix64: a tiny, fast, well-mixed 64-bit generator. Used where a stream must be reproducible
// from a seed and cheap per draw (a billion filler weights; per-request seeds under --seed).
#pragma once
#include <cstdint>

namespace eaglet {

// Advances `state` and returns the next value of its stream.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace eaglet
