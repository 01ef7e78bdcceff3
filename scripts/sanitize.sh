#!/usr/bin/env bash
# Builds eaglet with a sanitizer (clang from Debian; the libtorch trainer is left out, as it is
# not instrumented) and runs every other test under it, the server's included: the tests start
# the instrumented `eaglet serve`, so a race or a leak in the server fails them.
#   bash scripts/sanitize.sh address [ctest args]   # AddressSanitizer + UndefinedBehaviorSanitizer
#   bash scripts/sanitize.sh thread  [ctest args]   # ThreadSanitizer
# The address build also holds the fuzz harnesses (scripts/fuzz.sh runs them).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across checkouts in different folders (CI builds a fresh clone elsewhere).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1  # (debug line tables would hash the folder)
kind=${1:?usage: sanitize.sh address|thread [ctest args]}
shift
case "$kind" in
  address) dir=build-asan; extra=(-DEAGLET_FUZZ=ON) ;;
  thread) dir=build-tsan; extra=() ;;
  *) echo "sanitize.sh: unknown sanitizer '$kind' (address, thread)" >&2; exit 2 ;;
esac
CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEAGLET_SANITIZE="$kind" \
  -DEAGLET_WITH_TRAINER=OFF -DEAGLET_BUILD_BENCH=OFF "${extra[@]}" >/dev/null
ninja -C "$dir" -j "$(nproc)"
supp="$(pwd)/tests/sanitizers"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="suppressions=$supp/tsan.supp:second_deadlock_stack=1:history_size=4"
cd "$dir"
ctest --output-on-failure -j "$(nproc)" "$@"
