#!/usr/bin/env bash
# GPU run for the library redesign (issue 12) and the tuner (issue 15), in parts (PART=timing, gemm or tune),
# binaries carried in .carry
# (scripts/gpu/pack.sh; the pre-redesign binary in .carry/before/convtune):
#  timing: every AlexNet and seed layer in all three directions through CUDA with the shipped tuning database, timed
#          by the binary from before the redesign and by this one, interleaved twice, on the same machine.
#  gemm:   the gemm family's conformance on CUDA and NVIDIA OpenCL (gemm_test); square and LeNet-shaped GEMMs beside
#          cuBLAS with built-in defaults, a short tune of them, the same table tuned; LeNet trained briefly and
#          evaluated with per-layer op times (fc1 on the tuned GEMM) beside PyTorch's.
#  tune:   `tune --suite alexnet --direction all --budget 2m` on a cold program cache (the budget must hold), then
#          the GEMM shapes tuned for 3 minutes into a database to ship.
#   PART=timing|gemm|tune scripts/gpu/library_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: library_check.sh OUTDIR}
mkdir -p "$OUT"
BIN=$PWD/.carry/bin
BEFORE=$PWD/.carry/before/convtune
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_TUNING_DB=/tmp/convtune-user-db.json
source scripts/gpu/nvidia_icd.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"

if [ "${PART:-timing}" = timing ]; then
  for rep in 1 2; do
    for suite in alexnet seeds; do
      for which in before after; do
        bin=$BIN/convtune
        [ $which = before ] && bin=$BEFORE
        timeout 280 "$bin" bench --suite $suite --device cuda:0 --direction all --warmup 3 --repeats 20 \
          --out "$OUT/$which-$suite-$rep.json" >"$OUT/$which-$suite-$rep.log" 2>&1
        echo "$which $suite rep $rep: exit $?"
      done
    done
  done
  python3 - "$OUT" <<'PY'
import json, sys, glob, statistics
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(f"{out}/*-*-*.json")):
    which = path.split("/")[-1].split("-")[0]
    for r in json.load(open(path))["rows"]:
        if "ms" not in r: continue
        rows.setdefault((r["layer"], r["direction"]), {}).setdefault(which, []).append(r["ms"])
print(f"{'layer':8} {'dir':10} {'before ms':>10} {'after ms':>10} {'after/before':>12}")
worst = 0
for (layer, d), t in rows.items():
    b, a = min(t.get("before", [0])), min(t.get("after", [0]))
    ratio = a / b if b else float("nan")
    worst = max(worst, ratio)
    print(f"{layer:8} {d:10} {b:10.4f} {a:10.4f} {ratio:12.3f}")
print(f"worst after/before: {worst:.3f} (min of the repetitions on each side)")
PY
  exit 0
fi

if [ "${PART}" = tune ]; then
  # The budget on a cold program cache: the whole AlexNet suite, every direction and family, in 2 minutes.
  export CONVTUNE_CACHE_DIR=/tmp/convtune-cold-cache
  rm -rf "$CONVTUNE_CACHE_DIR"
  start=$(date +%s)
  timeout 300 "$BIN/convtune" tune --suite alexnet --direction all --device cuda:0 --budget 2m \
    --db "$OUT/alexnet-2m-db.json" --log "$OUT/alexnet-2m-log.json" >"$OUT/alexnet-2m.log" 2>&1
  echo "tune alexnet 2m (cold cache): exit $?, $(( $(date +%s) - start )) s wall"
  tail -50 "$OUT/alexnet-2m.log" | grep -vE "^tune \[" | cut -c1-200
  # The GEMM family on the dense layers' and square shapes, tuned for the shipped database.
  export CONVTUNE_CACHE_DIR=/tmp/convtune-cache
  timeout 280 "$BIN/convtune" tune --gemm M=1024,N=1024,K=1024 --gemm M=2048,N=2048,K=2048 --gemm M=4096,N=4096,K=4096 \
    --gemm M=100,N=256,K=3136,trans_b=1 --gemm M=100,N=10,K=256,trans_b=1 --gemm M=64,N=256,K=3136,trans_b=1 \
    --gemm M=256,N=3136,K=64,trans_a=1 --gemm M=64,N=3136,K=256 --gemm M=10,N=256,K=64,trans_a=1 --gemm M=64,N=256,K=10 \
    --device cuda:0 --budget 3m --db "$OUT/gemm-db.json" --log "$OUT/gemm-log.json" >"$OUT/gemm-tune.log" 2>&1
  echo "tune gemm: exit $?"; grep -vE "^tune \[" "$OUT/gemm-tune.log" | tail -14 | cut -c1-200
  exit 0
fi

# --- gemm
CUBLAS=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
dirs = []
try:
    import torch
    dirs.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
except Exception:
    pass
for s in site.getsitepackages():
    dirs += glob.glob(os.path.join(s, "nvidia", "*", "lib")) + glob.glob(os.path.join(s, "nvidia", "cu*", "lib"))
for d in dirs:
    hits = sorted(glob.glob(os.path.join(d, "libcublas.so.*")))
    hits = [h for h in hits if "Lt" not in os.path.basename(h)]
    if hits:
        print(hits[0]); break
PY
)
[ -n "$CUBLAS" ] && export CONVTUNE_CUBLAS_LIBRARY=$CUBLAS LD_LIBRARY_PATH=$(dirname "$CUBLAS"):$LD_LIBRARY_PATH
echo "cuBLAS: ${CUBLAS:-not found}"
timeout 200 "$BIN/gemm_test" --gtest_brief=1 >"$OUT/gemm_test.log" 2>&1; echo "gemm_test: exit $?"
grep -E "conformance:|FAILED|Failure" "$OUT/gemm_test.log" | head -20
GEMMS=(--gemm M=1024,N=1024,K=1024 --gemm M=2048,N=2048,K=2048 --gemm M=4096,N=4096,K=4096
       --gemm M=100,N=256,K=3136,trans_b=1 --gemm M=100,N=10,K=256,trans_b=1
       --gemm M=64,N=256,K=3136,trans_b=1 --gemm M=256,N=3136,K=64,trans_a=1 --gemm M=64,N=3136,K=256
       --gemm M=10,N=256,K=64,trans_a=1 --gemm M=64,N=256,K=10)
export CONVTUNE_TUNING_DB=$OUT/gemm-db.json  # the tuned entries; not a name a table below writes
timeout 200 "$BIN/convtune" bench "${GEMMS[@]}" --device cuda:0 --against cublas --warmup 3 --repeats 20 \
  --markdown "$OUT/gemm-default.md" --out "$OUT/gemm-default.json" >"$OUT/gemm-default.log" 2>&1
echo "gemm default: exit $?"
timeout 240 "$BIN/convtune" tune "${GEMMS[@]}" --device cuda:0 --budget 3m --no-peak --log "$OUT/gemm-tune-log.json" \
  >"$OUT/gemm-tune.log" 2>&1
echo "gemm tune: exit $?"; tail -14 "$OUT/gemm-tune.log"
timeout 200 "$BIN/convtune" bench "${GEMMS[@]}" --device cuda:0 --against cublas --warmup 3 --repeats 20 \
  --markdown "$OUT/gemm-tuned.md" --out "$OUT/gemm-tuned.json" >"$OUT/gemm-tuned.log" 2>&1
echo "gemm tuned: exit $?"; grep -E "^gemm[0-9]" "$OUT/gemm-tuned.log" | cut -c1-250
DATA=$PWD/.carry/data
timeout 120 "$BIN/convtune" train cnn --device cuda:0 --data "$DATA" --epochs 1 --out "$OUT/lenet.model" \
  >"$OUT/train.log" 2>&1; echo "train: exit $?"; tail -3 "$OUT/train.log"
timeout 120 "$BIN/convtune" eval "$OUT/lenet.model" --device cuda:0 --data "$DATA" >"$OUT/eval.log" 2>&1
echo "eval: exit $?"; cat "$OUT/eval.log"
timeout 200 python3 scripts/gpu/cnn_torch.py "$DATA" --epochs 1 >"$OUT/torch.log" 2>&1
echo "torch: exit $?"; tail -25 "$OUT/torch.log"
