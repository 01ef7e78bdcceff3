// Unicode normalization forms (NFC, NFD, NFKC, NFKD) through ICU.
#pragma once
#include <string>

namespace eaglet {

// `form` is "NFC", "NFD", "NFKC" or "NFKD"; throws eaglet::Error for others.
std::string unicode_normalize(const std::string& utf8, const std::string& form);

}  // namespace eaglet
