// GPT-2's reversible byte <-> printable-character map that byte-level BPE vocabularies are
// written in. eaglet keeps vocabularies as raw bytes internally and converts at load time.
#pragma once
#include <string>

namespace eaglet {

// Raw bytes from a vocabulary string written with the byte map; false if a character is not in it.
bool byte_level_decode(const std::string& mapped, std::string* raw);
std::string byte_level_encode(const std::string& raw);

}  // namespace eaglet
