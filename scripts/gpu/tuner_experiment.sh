#!/usr/bin/env bash
# The tuner's GPU measurements (issue 5), with binaries carried in .carry/bin (scripts/gpu/pack.sh):
#   stage strategies: alex2 forward, implicit_gemm on a subspace small enough to search exhaustively (--only),
#                     exhaustive vs annealing vs model-guided at 10% of the candidates;
#   stage alexnet:    all five AlexNet layers x three directions x every family within TUNE_BUDGET (default 6m);
#   stage nearest:    layers never tuned (unseen_shapes.txt) run with the nearest tuned shape's parameters (their
#                     own entries removed from a copy of the database), then tuned themselves (--skip-tuned keeps
#                     those an earlier run tuned), then run again: the fallback's share of what tuning reaches.
#   OUT=dir STAGES="strategies alexnet nearest" scripts/gpu/tuner_experiment.sh
# The tuning database is $OUT/tuning.json (carry it back to continue in another call via TUNING_DB_IN; the
# shipped tuning/nvidia-h200-cuda.json is such a file). Shipped defaults are off: only that database counts.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.carry/bin}
OUT=${OUT:-/tmp/convtune-out}
STAGES=${STAGES:-strategies alexnet nearest}
mkdir -p "$OUT"
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_TUNING_DB=$OUT/tuning.json
mkdir -p "$OUT/no-shipped-defaults" && export CONVTUNE_SHIPPED_TUNING_DIR=$OUT/no-shipped-defaults
if [ -n "${TUNING_DB_IN:-}" ]; then
  # A missing file would quietly start from an empty database and measure built-in defaults instead.
  [ -f "$TUNING_DB_IN" ] || { echo "TUNING_DB_IN=$TUNING_DB_IN: no such file" >&2; exit 2; }
  cp "$TUNING_DB_IN" "$CONVTUNE_TUNING_DB"
fi
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $*"; "$@"; echo "(exit $?)"; }
ALEX2=N=128,C=64,H=27,W=27,K=192,R=5,S=5,stride=1,pad=2
ONLY=${ONLY:-VECTOR_WIDTH=4,LOCAL_PADDING=4,SPLIT_K=1}
{
  if has strategies; then
    step $BIN/convtune tune --layer $ALEX2 --device cuda:0 --family implicit_gemm --direction fwd --only "$ONLY" \
      --strategy exhaustive --budget 420s --abort-factor 0 --no-save --log "$OUT/alex2-exhaustive.json"
    for s in annealing model random; do
      step $BIN/convtune tune --layer $ALEX2 --device cuda:0 --family implicit_gemm --direction fwd --only "$ONLY" \
        --strategy $s --max-fraction 0.1 --budget 120s --abort-factor 0 --no-save --no-peak --log "$OUT/alex2-$s.json"
    done
  fi
  if has alexnet; then
    step $BIN/convtune tune --suite alexnet --direction all --device cuda:0 --strategy annealing \
      --budget "${TUNE_BUDGET:-6m}" --log "$OUT/alexnet-tune.json"
    step $BIN/convtune report "$OUT/alexnet-tune.json" --out-dir "$OUT/report"
  fi
  if has nearest; then
    # The fallback sees only the neighbours: a copy of the database without the unseen layers' entries.
    NEIGHBOURS=$OUT/tuning-neighbours.json
    step python3 - "$CONVTUNE_TUNING_DB" "$NEIGHBOURS" scripts/gpu/unseen_shapes.txt <<'PY'
import json, sys
db = json.load(open(sys.argv[1]))
unseen = set()
for line in open(sys.argv[3]):
    line = line.split("#")[0].split()
    if line:
        unseen.add(tuple(sorted(kv.split("=")[0] + "=" + kv.split("=")[1] for kv in line[1].split(",") if kv.split("=")[0] in "NCHWK")))
def key(e):
    return tuple(sorted(f"{k}={e['shape'][k]}" for k in "NCHWK"))
kept = [e for e in db["entries"] if key(e) not in unseen]
print(f"{len(db['entries']) - len(kept)} entries of unseen layers removed, {len(kept)} kept")
db["entries"] = kept
json.dump(db, open(sys.argv[2], "w"), indent=1)
PY
    step env CONVTUNE_TUNING_DB="$NEIGHBOURS" $BIN/convtune bench --suite scripts/gpu/unseen_shapes.txt --device cuda:0 \
      --direction all --repeats 10 --out "$OUT/unseen-nearest.json"
    # Then the unseen layers tuned (those the database already holds, from an earlier run, are kept: --skip-tuned).
    step $BIN/convtune tune --suite scripts/gpu/unseen_shapes.txt --direction all --device cuda:0 --strategy annealing \
      --budget "${NEAREST_BUDGET:-150s}" --skip-tuned --no-peak --log "$OUT/unseen-tune.json"
    step $BIN/convtune bench --suite scripts/gpu/unseen_shapes.txt --device cuda:0 --direction all --repeats 10 \
      --out "$OUT/unseen-tuned.json"
    step python3 - "$OUT/unseen-nearest.json" "$OUT/unseen-tuned.json" <<'PY'
import json, sys
def rows(p):
    return {(r["layer"], r["direction"]): r for r in json.load(open(p))["rows"] if "ms" in r}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'layer':6} {'dir':10} {'nearest ms':>10} {'tuned ms':>9} {'nearest/tuned':>13}  nearest algorithm")
for k in a:
    if k in b:
        print(f"{k[0]:6} {k[1]:10} {a[k]['ms']:10.3f} {b[k]['ms']:9.3f} {b[k]['ms']/a[k]['ms']*100:12.0f}%  {a[k]['algorithm']}")
PY
  fi
} 2>&1 | tee "$OUT/tuner.log" | grep -vE "^\[[0-9]+/[0-9]+\].*ETA"
# The device tool brings back at most 8 files: everything in one archive.
tar -C "$OUT" -czf "$OUT/../tuner-$(echo $STAGES | tr ' ' '-').tar.gz" . 2>/dev/null
