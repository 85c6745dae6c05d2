#!/usr/bin/env bash
# Issue 18's measurement on a CPU-only machine, as one command: the CPU family tuned into a fresh database
# (AlexNet at --batch-scale 0.125 for TUNE_ALEXNET, default 5m; the seed layers at 0.01 for TUNE_SEEDS, default 4m),
# then `bench --against onednn` on both, every direction, from that database. Before each step it records how
# busy the machine was (other processes' share of the cores, from /proc/stat less this script's own CPU time), since
# two shared cores make every figure depend on what else ran. Files in OUTDIR: alexnet.md/.json, seeds.md/.json,
# tune-*.txt, db.json, load.txt. The benches time REPEATS rounds (default 15; bench's own default is 5): on a shared
# two-core host a slow spell of a few seconds covered 3 of 5 rounds of a Winograd row, halving its `% peak`.
#   [TUNE_ALEXNET=5m] [TUNE_SEEDS=4m] [REPEATS=15] [BUILD=build] scripts/cpu_against_onednn.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: cpu_against_onednn.sh OUTDIR}
BUILD=${BUILD:-build}
mkdir -p "$OUT"
export CONVTUNE_TUNING_DB=$OUT/db.json
rm -f "$CONVTUNE_TUNING_DB"
CT=$BUILD/convtune

# Busy cores outside this script over the last `seconds`: total non-idle jiffies less this process tree's.
others_load() {
  local seconds=$1 a b self_a self_b
  read -r _ u1 n1 s1 i1 w1 q1 sq1 _ </proc/stat
  self_a=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  sleep "$seconds"
  read -r _ u2 n2 s2 i2 w2 q2 sq2 _ </proc/stat
  self_b=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  a=$(( (u2 + n2 + s2 + q2 + sq2) - (u1 + n1 + s1 + q1 + sq1) ))
  b=$(( self_b - self_a ))
  awk -v busy="$a" -v self="$b" -v s="$seconds" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", (busy - self) / (hz * s) }'
}
step() { echo "$(date +%T) $1: other processes used $(others_load 3) cores" | tee -a "$OUT/load.txt"; }

step "tune alexnet"
"$CT" tune --suite alexnet --batch-scale 0.125 --device cpu --direction all --family cpu_blocked \
  --budget "${TUNE_ALEXNET:-5m}" >"$OUT/tune-alexnet.txt" 2>&1
echo "tune alexnet: exit $?"
step "tune seeds"
"$CT" tune --suite seeds --batch-scale 0.01 --device cpu --direction all --family cpu_blocked \
  --budget "${TUNE_SEEDS:-4m}" >"$OUT/tune-seeds.txt" 2>&1
echo "tune seeds: exit $?"
step "bench alexnet"
"$CT" bench --suite alexnet --batch-scale 0.125 --device cpu --direction all --against onednn --repeats "${REPEATS:-15}" \
  --out "$OUT/alexnet.json" --markdown "$OUT/alexnet.md" >"$OUT/bench-alexnet.txt" 2>&1
echo "bench alexnet: exit $?"
step "bench seeds"
"$CT" bench --suite seeds --batch-scale 0.01 --device cpu --direction all --against onednn --repeats "${REPEATS:-15}" \
  --out "$OUT/seeds.json" --markdown "$OUT/seeds.md" >"$OUT/bench-seeds.txt" 2>&1
echo "bench seeds: exit $?"
step "done"
for s in alexnet seeds; do
  python3 - "$OUT/$s.json" <<'EOF'
import json, math, sys
rows = json.load(open(sys.argv[1]))["rows"]
ratios = [r["against"]["onednn"]["ratio_convtune_over_reference"] for r in rows
          if r.get("against", {}).get("onednn", {}).get("status") == "ok"]
above = [f'{r["layer"]} {r["direction"]} {r["against"]["onednn"]["ratio_convtune_over_reference"]:.2f}' for r in rows
         if r.get("against", {}).get("onednn", {}).get("ratio_convtune_over_reference", 0) > 1.25]
# The row's own rounds' ceiling, and in brackets the run's best reading.
peak = [f'{r["layer"]} {r["direction"]} {r.get("percent_of_fp32_peak", 0):.1f} '
        f'({r.get("percent_of_fp32_peak_run_best", r.get("percent_of_fp32_peak", 0)):.1f})' for r in rows
        if r["layer"] in ("alex2", "alex3", "alex4", "alex5", "ucla5x5")]
print(f"{sys.argv[1]}: {len(ratios)} rows, geomean convtune/oneDNN "
      f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}; above 1.25: {above or 'none'}")
if peak:
    print("  % peak (of the row's own rounds' ceiling; of the run's best in brackets):", ", ".join(peak))
EOF
done | tee "$OUT/summary.txt"
