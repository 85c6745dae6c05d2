#!/usr/bin/env bash
# How SPLIT_K should carry over to a shape never tuned: for every implicit_gemm row of a nearest-shape bench
# (tuner_experiment.sh's unseen-nearest.json), times each SPLIT_K value with the row's other parameters fixed
# (tune --strategy exhaustive --only), then prints the times side by side with the split each rule would pick.
#   OUT=dir scripts/gpu/split_k_sweep.sh NEAREST_BENCH.json
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
NEAREST=$1
mkdir -p "$OUT/sweep"
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=/tmp/convtune-cache
python3 - "$NEAREST" >"$OUT/sweep/cases.txt" <<'PY'
import json, re, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    m = re.match(r"implicit_gemm\[(.*)\]", r.get("algorithm", ""))
    if not m or "ms" not in r:
        continue
    only = ",".join(kv for kv in m.group(1).split(",") if not kv.startswith("SPLIT_K="))
    problem = ",".join(kv for kv in r["problem"].split(",") if not kv.startswith(("dir=", "precision=")))
    print(r["layer"], r["direction"], problem, only)
PY
while read -r layer dir problem only; do
  echo "=== $layer $dir"
  $BIN/convtune tune --layer "$problem" --direction "$dir" --device cuda:0 --family implicit_gemm --only "$only" \
    --strategy exhaustive --budget 60s --abort-factor 0 --no-save --no-peak --log "$OUT/sweep/$layer-$dir.json" 2>&1 |
    grep -vE "^\[[0-9]+/[0-9]+\].*ETA"
done <"$OUT/sweep/cases.txt"
python3 - "$OUT/sweep" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    log = json.load(open(path))
    times = {}
    for t in log.get("trials", []):
        if t.get("ms"):
            k = t["parameters"]["SPLIT_K"]
            times[k] = min(t["ms"], times.get(k, 1e9))
    best = min(times.values()) if times else 0
    print(os.path.basename(path)[:-5].ljust(16), "  ".join(f"{k}:{v:.3f}" for k, v in sorted(times.items())), f" best {best:.3f}")
PY
