#include "tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace eaglet {

const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
};

RegexSplitter::RegexSplitter(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  int err;
  PCRE2_SIZE off;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    fail("tokenizer: bad pre-tokenizer regex at offset {}: {}", off, reinterpret_cast<char*>(buf));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // best effort; falls back to the interpreter
}

RegexSplitter::~RegexSplitter() {
  if (impl_->code) pcre2_code_free(impl_->code);
}

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::vector<std::string_view> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  size_t pos = 0, last = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (pos <= text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, md, nullptr);
    if (rc < 0) break;
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: step one code point so the loop advances
      pos = b + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (b > last) out.push_back(text.substr(last, b - last));
    out.push_back(text.substr(b, e - b));
    last = pos = e;
  }
  if (last < text.size()) out.push_back(text.substr(last));
  pcre2_match_data_free(md);
  return out;
}

}  // namespace eaglet
