#include "io/gguf_types.h"

namespace eaglet {

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  // Every id ggml defines, so an unsupported type is reported by name.
  static const GgmlTypeInfo kTypes[] = {
      {"F32", 1, 4, true},        {"F16", 1, 2, true},       {"Q4_0", 32, 18, true},
      {"Q4_1", 32, 20, false},    {nullptr, 0, 0, false},    {nullptr, 0, 0, false},
      {"Q5_0", 32, 22, false},    {"Q5_1", 32, 24, false},   {"Q8_0", 32, 34, true},
      {"Q8_1", 32, 36, false},    {"Q2_K", 256, 84, false},  {"Q3_K", 256, 110, false},
      {"Q4_K", 256, 144, true},   {"Q5_K", 256, 176, false}, {"Q6_K", 256, 210, true},
      {"Q8_K", 256, 292, false},  {"IQ2_XXS", 256, 66, false}, {"IQ2_XS", 256, 74, false},
      {"IQ3_XXS", 256, 98, false}, {"IQ1_S", 256, 50, false}, {"IQ4_NL", 32, 18, false},
      {"IQ3_S", 256, 110, false}, {"IQ2_S", 256, 82, false}, {"IQ4_XS", 256, 136, false},
      {"I8", 1, 1, false},        {"I16", 1, 2, false},      {"I32", 1, 4, false},
      {"I64", 1, 8, false},       {"F64", 1, 8, false},      {"IQ1_M", 256, 56, false},
      {"BF16", 1, 2, true},
  };
  if (type >= sizeof(kTypes) / sizeof(kTypes[0]) || !kTypes[type].name) return nullptr;
  return &kTypes[type];
}

}  // namespace eaglet
