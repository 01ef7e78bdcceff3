#!/usr/bin/env bash
# The test command: builds eaglet and runs every test through CTest. Tests that need ../shared
# skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
