#!/usr/bin/env bash
# The tuner's first phase with and without compiling ahead: the same tunes with the binaries in .carry/bin-before
# and .carry/bin (scripts/gpu/pack.sh, then the older build copied to .carry/bin-before), each on an empty database
# and a compile cache of its own, on a fresh machine: (1) tf32, fft only, five 5x5 layers and alex3, all directions,
# 150 s (today's plans are tensor-core programs, fft's defaults about 4 s each through NVRTC); (2) fp32, every
# family, AlexNet, all directions, 60 s. Reports per run the wall time, the candidates timed and how many tasks
# got past their baselines and defaults.
#   scripts/gpu/compile_ahead_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: compile_ahead_check.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$OUT/all.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
run() {  # LABEL BINDIR ARGS...
  local label=$1 dir=$2
  shift 2
  local start=$SECONDS
  CONVTUNE_CACHE_DIR=/tmp/cache-$label LD_LIBRARY_PATH=$PWD/.carry/$dir timeout 400 "$PWD/.carry/$dir/convtune" tune \
    --device cuda:0 --no-peak --db "$OUT/db-$label.json" "$@" >"$OUT/$label.txt" 2>&1
  local status=$? wall=$((SECONDS - start))
  python3 - "$OUT/$label.txt" "$label" "$status" "$wall" <<'PY'
import re, sys
path, label, status, wall = sys.argv[1:]
rows = [l.split() for l in open(path) if re.match(r"^\S+\s+(fwd|bwd-data|bwd-filter)\s+\S+\s+\d+\s+\d+\s+\d+", l)]
tried = sum(int(r[4]) for r in rows)
searched = sum(1 for r in rows if int(r[4]) > 2)
print(f"{label}: exit {status}, {wall} s wall, {len(rows)} tasks, {tried} candidates timed, {searched} tasks past 2")
PY
}
TF32=(--suite "$OUT/all.txt" --layer alex2 --layer u2 --layer u8 --layer fmnist2 --layer alex3 --math tf32 --family fft
      --direction all --budget 150s)
ALEX=(--suite alexnet --family all --direction all --budget 60s)
run tf32-before bin-before "${TF32[@]}"
run tf32-ahead bin "${TF32[@]}"
run alex-before bin-before "${ALEX[@]}"
run alex-ahead bin "${ALEX[@]}"
