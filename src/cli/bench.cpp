// `eaglet bench`: prefill/decode speed and effective weight bandwidth.
#include "cli/commands.h"

namespace eaglet::cli {
void add_bench(CLI::App& app) { (void)app; }
}  // namespace eaglet::cli
