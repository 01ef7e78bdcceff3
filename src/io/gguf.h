// Reads the metadata (key/value section) of a GGUF file, e.g. a llama.cpp vocabulary-only file.
// Tensors are not read. Values come back as JSON: strings, numbers, booleans, arrays.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace eaglet {

nlohmann::json read_gguf_metadata(const std::string& path);

}  // namespace eaglet
