// `--nproc-per-node N`: runs this binary's command as N local ranks with torchrun's environment
// (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), like `torchrun --standalone`.
#pragma once
#include <string>
#include <vector>

namespace eaglet::cli {

// Starts the ranks (`args`: the command line after the program name), forwards SIGINT/SIGTERM
// to them and waits. When one fails, the others get `grace_seconds` to notice and stop on their
// own (each names the lost rank), then are terminated. Returns the first failure's exit code
// (128 + signal when killed), or 0.
int launch_local_ranks(int nproc, const std::vector<std::string>& args, int grace_seconds);

}  // namespace eaglet::cli
