#!/usr/bin/env bash
# Runs each libFuzzer harness (fuzz/) for a bounded time, starting from its seeds in
# fuzz/corpus/<name>/, in the AddressSanitizer + UBSan build (configured here if absent).
#   bash scripts/fuzz.sh [SECONDS_PER_HARNESS]     (default 30)
# A crash, leak, exception other than eaglet::Error, timeout (10 s) or 2 GB of memory for one
# input fails the run; the input is kept as build-asan/fuzz-findings/<name>-*. New corpus
# entries go to a temporary folder, never into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across checkouts in different folders (CI builds a fresh clone elsewhere).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1  # (debug line tables would hash the folder)
seconds=${1:-30}
dir=build-asan
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEAGLET_SANITIZE=address \
    -DEAGLET_WITH_TRAINER=OFF -DEAGLET_BUILD_BENCH=OFF -DEAGLET_FUZZ=ON >/dev/null
fi
ninja -C "$dir" fuzzers
mkdir -p "$dir/fuzz-findings"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=0
for seeds in fuzz/corpus/*/; do
  name=$(basename "$seeds")
  work=$(mktemp -d)
  echo "fuzz_$name: ${seconds} s"
  if ! "$dir/fuzz/fuzz_$name" "$work" "$seeds" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$dir/fuzz-findings/$name-" -print_final_stats=1 >"$work.log" 2>&1; then
    failed=1
    echo "fuzz_$name FAILED:"; tail -n 60 "$work.log"
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$work.log" | sed "s/^/  /"
  fi
  rm -rf "$work" "$work.log"
done
if [ "$failed" -ne 0 ]; then echo "fuzzing found failures (inputs in $dir/fuzz-findings/)"; exit 1; fi
echo "fuzzing: no failures"
