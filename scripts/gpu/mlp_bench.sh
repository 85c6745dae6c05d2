#!/usr/bin/env bash
# Runs on the GPU machine: seed 002's MLP (`convtune train mlp`) on 4000 Fashion-MNIST images per epoch, per-sample
# (the persistent kernel, multi-group and single-group) and mini-batch (32, 128) on cuda:0 and on NVIDIA's OpenCL
# device, each first checked against the host with --verify, then the same network and training in PyTorch
# (mlp_torch.py, batch 1, 32, 128) for side-by-side ms per epoch. Needs no network: $CONVTUNE_BIN is the convtune
# binary built elsewhere, $DATA the folder with the four Fashion-MNIST .gz files. Logs go to OUTDIR; the end of
# stdout is a summary table. About 1-2 minutes.
#   CONVTUNE_BIN=.carry/build/convtune DATA=/path/to/fashion-mnist scripts/gpu/mlp_bench.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: mlp_bench.sh OUTDIR}
BIN=${CONVTUNE_BIN:?set CONVTUNE_BIN to the convtune binary}
DATA=${DATA:?set DATA to the folder with the Fashion-MNIST .gz files}
EPOCHS=${EPOCHS:-5}     # convtune: every epoch is timed; the summary takes the best
LIMIT=${LIMIT:-4000}    # seed 002's epoch
mkdir -p "$OUT"
export CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
source scripts/gpu/nvidia_icd.sh  # after the cd to the repository root
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
"$BIN" devices >"$OUT/devices.txt" 2>&1
OCL=$(grep -oE "opencl:[0-9]+ +NVIDIA" "$OUT/devices.txt" | head -1 | cut -d' ' -f1)
echo "NVIDIA OpenCL device: ${OCL:-none}"

# run NAME DEVICE EPOCHS ARGS...: one `train mlp` run, its log in $OUT/NAME.log, the per-epoch table on stdout.
run() {
  local name=$1 dev=$2 epochs=$3
  shift 3
  timeout 120 "$BIN" train mlp --device "$dev" --data "$DATA" --limit "$LIMIT" --epochs "$epochs" --verify "$@" \
    >"$OUT/$name.log" 2>"$OUT/$name.err"
  local status=$?
  echo "== $name: train mlp --device $dev --epochs $epochs $* (exit $status)"
  grep -vE "^train mlp \[" "$OUT/$name.log"
  [ $status -ne 0 ] && tail -5 "$OUT/$name.err"
}

# DEVICES overrides the two GPU devices (e.g. DEVICES="cpu opencl:0" for a dry run without a GPU).
DEVICES=${DEVICES:-cuda:0 $OCL}
for dev in $DEVICES; do
  tag=${dev/:/}
  run "$tag-sample" "$dev" "$EPOCHS"
  run "$tag-sample-1group" "$dev" 2 --groups 1
  run "$tag-batch32" "$dev" "$EPOCHS" --batch 32
  run "$tag-batch128" "$dev" "$EPOCHS" --batch 128
done

echo "== PyTorch, same network and training, batch 1, 32, 128"
timeout 240 python3 scripts/gpu/mlp_torch.py "$DATA" --limit "$LIMIT" --batches 1,32,128 --epochs 4 \
  >"$OUT/torch.log" 2>&1
echo "torch: exit $?"
cat "$OUT/torch.log"

# Summary: best ms per epoch of LIMIT images, convtune (both backends) beside PyTorch.
best() { grep -oE "^epoch ms: best [0-9.]+" "$OUT/$1.log" 2>/dev/null | awk '{print $4}'; }
torch_best() { grep -oE "^torch batch $1: epoch ms best [0-9.]+" "$OUT/torch.log" 2>/dev/null | awk '{print $7}'; }
read -r dev1 dev2 _ <<<"$DEVICES"
t1=${dev1/:/} t2=${dev2:-none}
t2=${t2/:/}
{
  echo
  echo "ms per epoch of $LIMIT images (best of the timed epochs)"
  printf "%-28s %12s %12s %12s\n" "training" "$dev1" "${dev2:-}" "PyTorch"
  printf "%-28s %12s %12s %12s\n" "per-sample (batch 1)" "$(best "$t1-sample")" "$(best "$t2-sample")" "$(torch_best 1)"
  printf "%-28s %12s %12s %12s\n" "per-sample, single group" "$(best "$t1-sample-1group")" \
    "$(best "$t2-sample-1group")" "-"
  printf "%-28s %12s %12s %12s\n" "mini-batch 32" "$(best "$t1-batch32")" "$(best "$t2-batch32")" "$(torch_best 32)"
  printf "%-28s %12s %12s %12s\n" "mini-batch 128" "$(best "$t1-batch128")" "$(best "$t2-batch128")" \
    "$(torch_best 128)"
  grep -H "^verify:" "$OUT"/*.log | sed "s|^$OUT/||; s/^/  /"
} | tee "$OUT/summary.txt"
