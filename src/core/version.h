// eaglet's version, reported by `GET /version` (as vLLM's server does).
#pragma once

namespace eaglet {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace eaglet
