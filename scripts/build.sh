#!/usr/bin/env bash
# Configures and builds eaglet (Release) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across checkouts in different folders (CI builds a fresh clone elsewhere).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j "$(nproc)"
