#include "tokenizer/unicode_normalize.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "core/error.h"

namespace eaglet {

std::string unicode_normalize(const std::string& utf8, const std::string& form) {
  bool ascii = true;
  for (unsigned char c : utf8) ascii &= c < 0x80;
  if (ascii) return utf8;  // every normal form leaves ASCII alone
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (form == "NFC") n = icu::Normalizer2::getNFCInstance(err);
  else if (form == "NFD") n = icu::Normalizer2::getNFDInstance(err);
  else if (form == "NFKC") n = icu::Normalizer2::getNFKCInstance(err);
  else if (form == "NFKD") n = icu::Normalizer2::getNFKDInstance(err);
  else fail("tokenizer: unsupported normalizer '{}'", form);
  if (U_FAILURE(err)) fail("tokenizer: ICU {} normalizer unavailable", form);
  icu::UnicodeString out = n->normalize(icu::UnicodeString::fromUTF8(utf8), err);
  if (U_FAILURE(err)) return utf8;
  std::string s;
  out.toUTF8String(s);
  return s;
}

}  // namespace eaglet
