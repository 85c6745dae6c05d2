#!/usr/bin/env bash
# Tuner candidates per second, cold (empty program cache, and the OpenCL platform's and CUDA driver's own caches
# empty) and warm (the same candidates again): what a cold tune pays for compiling. One small layer, so running and
# checking a candidate costs little beside compiling it; the random strategy with a fixed seed, so the warm run
# meets the same configurations.
#   scripts/compile_throughput.sh DEVICE OUTDIR [JOBS...]      e.g. opencl 1 2, or cuda:0 1 4 8 15
# Env: CONVTUNE (binary, default build-dev/convtune), FAMILY (direct_tiled), LAYER, CANDIDATES (12).
# Prints one line per run: device, jobs, cold|warm, candidates, seconds, candidates/s, CPU seconds and cores busy.
# CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT=1 compiles every OpenCL program in the device's one context (as before
# the compile contexts), for a before/after with one binary.
set -uo pipefail
DEVICE=${1:?usage: compile_throughput.sh DEVICE OUTDIR [JOBS...]}
OUT=${2:?usage: compile_throughput.sh DEVICE OUTDIR [JOBS...]}
shift 2
JOBS=("${@:-1}")
CONVTUNE=${CONVTUNE:-build-dev/convtune}
FAMILY=${FAMILY:-direct_tiled}
LAYER=${LAYER:-N=1,C=8,H=8,W=8,K=8,R=3,S=3,pad=1}
CANDIDATES=${CANDIDATES:-12}
mkdir -p "$OUT"
run() {  # JOBS LABEL: one tune, timed; prints the line
  local jobs=$1 label=$2 log="$OUT/tune-$1-$2.json" start end
  start=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$OUT/time-$jobs-$label.txt" "$CONVTUNE" tune --device "$DEVICE" --layer "$LAYER" --family "$FAMILY" --direction fwd --strategy random \
    --seed 1 --max-candidates "$CANDIDATES" --budget 600s --jobs "$jobs" --no-save --no-peak --log "$log" \
    >"$OUT/tune-$jobs-$label.txt" 2>&1
  end=$(date +%s.%N)
  python3 - "$log" "$start" "$end" "$DEVICE" "$jobs" "$label" "$OUT/time-$jobs-$label.txt" <<'PY'
import json, sys
log, start, end, device, jobs, label, times = sys.argv[1:]
cpu = sum(float(v) for v in open(times).read().split()[-2:])
trials = json.load(open(log))["trials"]
ok = sum(t["status"] == "ok" for t in trials)
s = float(end) - float(start)
print(f"{device} jobs={jobs} {label}: {len(trials)} candidates ({ok} ok) in {s:.1f} s = {len(trials) / s:.2f} candidates/s; "
      f"{cpu:.1f} CPU s ({cpu / s:.2f} cores busy)")
PY
}
for jobs in "${JOBS[@]}"; do
  # Cold: every cache empty and private to this run (PoCL keeps its own kernel cache; CUDA its JIT cache).
  CACHE=$(mktemp -d)
  export CONVTUNE_CACHE_DIR=$CACHE/convtune POCL_CACHE_DIR=$CACHE/pocl CUDA_CACHE_PATH=$CACHE/cuda
  run "$jobs" cold
  run "$jobs" warm
  rm -rf "$CACHE"
done | tee -a "$OUT/summary.txt"
