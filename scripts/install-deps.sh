#!/usr/bin/env bash
# Installs everything eaglet needs to build, test and benchmark on Debian 12. Idempotent.
set -euo pipefail
# clang, its sanitizer/libFuzzer runtimes and llvm-symbolizer serve scripts/sanitize.sh and fuzz.sh.
PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev zlib1g-dev libicu-dev
  libtorch-dev libgloo-dev libyaml-cpp-dev libzmq3-dev cppzmq-dev libopenblas0-pthread
  libcpp-httplib-dev libboost-dev curl
  clang libclang-rt-14-dev llvm
  python3-numpy python3-jinja2 python3-jsonschema
)
# Node.js runs the OpenAI SDK test client; keep an existing installation (e.g. nodesource's).
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "eaglet dependencies installed"
