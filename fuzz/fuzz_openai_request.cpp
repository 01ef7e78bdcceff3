// Request bodies of /v1/completions and /v1/chat/completions: any JSON gets a request or an
// ApiError naming the parameter, never anything else; so does the grammar a forced tool choice
// builds from the request's tools.
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "server/openai_protocol.h"
#include "server/tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  for (bool chat : {false, true}) {
    for (bool auto_tools : {false, true}) {
      try {
        const eaglet::ApiRequest r = eaglet::parse_request(j, chat, {}, nullptr, auto_tools);
        if (r.tools.forced()) eaglet::forced_tool_gbnf(r.tools);
      } catch (const eaglet::ApiError& e) {
        if (e.status < 400 || e.status >= 500) std::abort();
      }
    }
  }
  return 0;
}
