#!/usr/bin/env bash
# The online-training experiment of docs/online-training.md: `eaglet serve --online-train` on
# stories260K with a weak EAGLE-3 draft, driven by `eaglet loadtest` with unseen TinyStories
# sentences, against the same load without online training, plain decoding (the greedy
# reference) and a poisoned trainer (the guard), then the same saturated load with and without
# online training. Writes OUT/*.json, OUT/*.jsonl, OUT/summary.json and OUT/online_acceptance.svg.
#
#   tools/online_experiment.sh WEAK_DRAFT OUT [REQUESTS=3000] [RATE=12] [THREADS=1]
# WEAK_DRAFT: e.g. `eaglet train --config examples/stories260k/train.yaml output_dir=runs/weak
# data.num_samples=600 regen.samples_per_prompt=1 training.steps=170` -> runs/weak/export.
# SPEC: the speculation options (default "-k 3"; a DFlash draft: "--spec-method dflash -k 7").
# RUNS: which of "paced poisoned saturated" to run (default all; plain decoding, the greedy
# reference, always runs). QUICK=1 is RUNS=paced.
# PROMPTS: which of tools/heldout_prompts.py's files is the traffic (default traffic.txt;
# online_eval.txt is the slice no option was tuned on, online_tune.txt the one they were tuned on).
# ONLINE: more options for the online-training servers (e.g. "--online-train-lr 3e-3").
# MODEL: the target (default stories260K; runs/deep60 from `eaglet widen --layers 60 --hidden 64
# ...` is the same function at a 60-layer target's cost per token, with the draft widened alike).
set -euo pipefail
cd "$(dirname "$0")/.."
draft=${1:?usage: online_experiment.sh WEAK_DRAFT OUT [REQUESTS] [RATE] [THREADS]}
out=${2:?usage: online_experiment.sh WEAK_DRAFT OUT [REQUESTS] [RATE] [THREADS]}
requests=${3:-3000}
rate=${4:-12}
threads=${5:-1}
model=${MODEL:-../shared/models/stories260K-hf}
eaglet=./build/eaglet
read -r -a spec <<<"${SPEC:--k 3}"
runs=${RUNS:-paced poisoned saturated}
[ "${QUICK:-0}" = 1 ] && runs=paced
mkdir -p "$out"
: >"$out/loadtest.txt"
/usr/bin/python3 tools/heldout_prompts.py ../shared/data/tinystories "$out/prompts" >/dev/null
prompts="$out/prompts/${PROMPTS:-traffic.txt}"
read -r -a online_opts <<<"${ONLINE:-}"
port=8950

# serve NAME ARGS...: starts a server, waits for it; stop_server ends it.
serve() {
  local name=$1
  shift
  "$eaglet" serve -m "$model" --port "$port" --threads "$threads" --max-num-seqs 16 "$@" >"$out/$name.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return
    sleep 0.2
  done
  echo "server $name did not start; see $out/$name.log" >&2
  exit 1
}
stop_server() {
  kill -TERM "$server"
  wait "$server" || true
}
load() {  # load NAME ARGS...
  local name=$1
  shift
  "$eaglet" loadtest --port "$port" --dataset "$prompts" --max-prompts 100000 --max-tokens 64 --time-limit 3600 \
    --json "$out/$name.json" --outputs "$out/$name.jsonl" "$@" | tee -a "$out/loadtest.txt"
}

has() { [[ " $runs " == *" $1 "* ]]; }

if has paced; then
  echo "== online training, $requests requests at $rate/s" | tee -a "$out/loadtest.txt"
  rm -rf "$out/online"
  serve online --draft "$draft" "${spec[@]}" --online-train --online-train-dir "$out/online" "${online_opts[@]}"
  load online --concurrency 8 --rate "$rate" --requests "$requests" --metrics-every 100
  stop_server

  echo "== the same load, frozen draft" | tee -a "$out/loadtest.txt"
  serve frozen --draft "$draft" "${spec[@]}"
  load frozen --concurrency 8 --rate "$rate" --requests "$requests" --metrics-every 100
  stop_server
fi

echo "== plain decoding (the greedy reference)" | tee -a "$out/loadtest.txt"
serve plain
load plain --concurrency 8 --requests "$requests"
stop_server

if has poisoned; then
  echo "== poisoned candidates (the guard must turn them all down)" | tee -a "$out/loadtest.txt"
  rm -rf "$out/poisoned"
  serve poisoned --draft "$draft" "${spec[@]}" --online-train --online-train-dir "$out/poisoned" --online-train-poison 0.05 "${online_opts[@]}"
  load poisoned --concurrency 8 --rate "$rate" --requests $((requests / 3)) --metrics-every 100
  stop_server
fi

if has saturated; then
  echo "== saturated: as fast as 4 clients go, with and without online training" | tee -a "$out/loadtest.txt"
  rm -rf "$out/sat_online"
  serve sat_online --draft "$draft" "${spec[@]}" --online-train --online-train-dir "$out/sat_online" "${online_opts[@]}"
  load sat_online --concurrency 4 --requests "$requests" --metrics-every 100
  stop_server
  serve sat_frozen --draft "$draft" "${spec[@]}"
  load sat_frozen --concurrency 4 --requests "$requests" --metrics-every 100
  stop_server
fi

/usr/bin/python3 tools/online_curve.py "$out"
