#!/usr/bin/env bash
# The test command: builds eaglet and runs every test through CTest. Tests that need ../shared
# skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# The OpenAI Node SDK drives the server tests (skipped without it).
if command -v npm >/dev/null 2>&1 && { [ ! -d tests/node/node_modules/openai ] || [ ! -d tests/node/node_modules/zod ]; }; then
  (cd tests/node && npm install --no-audit --no-fund --loglevel=error) || echo "npm install failed: the Node SDK test will skip"
fi
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
