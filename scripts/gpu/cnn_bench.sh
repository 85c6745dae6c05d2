#!/usr/bin/env bash
# Runs on the GPU machine: trains convtune's LeNet-style CNN on the full Fashion-MNIST training set on cuda:0,
# evaluates it (10,000 test images, then --limit 100 and --limit 10, as seed 003 did) on cuda:0 and on NVIDIA's
# OpenCL device, and runs the same network in PyTorch (cnn_torch.py) for side-by-side op times and accuracy.
# Needs no network: $CONVTUNE_BIN is the convtune binary built elsewhere, $DATA the folder with the four
# Fashion-MNIST .gz files. Logs go to OUTDIR.
#   CONVTUNE_BIN=.carry/build/convtune DATA=/path/to/fashion-mnist scripts/gpu/cnn_bench.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: cnn_bench.sh OUTDIR}
BIN=${CONVTUNE_BIN:?set CONVTUNE_BIN to the convtune binary}
DATA=${DATA:?set DATA to the folder with the Fashion-MNIST .gz files}
EPOCHS=${EPOCHS:-8}   # Adam lr 1e-3, batch 64: about 91% test accuracy after 5-8 epochs for this network
BATCH=${BATCH:-64}
mkdir -p "$OUT"
export CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
source scripts/gpu/nvidia_icd.sh  # after the cd to the repository root
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
"$BIN" devices >"$OUT/devices.txt" 2>&1
OCL=$(grep -oE "opencl:[0-9]+ +NVIDIA" "$OUT/devices.txt" | head -1 | cut -d' ' -f1)
echo "NVIDIA OpenCL device: ${OCL:-none}"
MODEL=$OUT/lenet.model

echo "== train cnn on cuda:0 ($EPOCHS epochs, batch $BATCH)"
timeout 240 "$BIN" train cnn --device cuda:0 --data "$DATA" --epochs "$EPOCHS" --batch "$BATCH" --out "$MODEL" \
  >"$OUT/train-cuda.log" 2>"$OUT/train-cuda.err"
echo "train: exit $?"; grep -E "^(train|epoch|saved)" "$OUT/train-cuda.log"

for dev in cuda:0 $OCL; do
  for limit in 10000 100 10; do
    log="$OUT/eval-${dev/:/}-$limit.log"
    timeout 120 "$BIN" eval "$MODEL" --device "$dev" --data "$DATA" --limit "$limit" >"$log" 2>&1
    echo "== eval on $dev --limit $limit: exit $?"; grep -vE "^eval \[" "$log"
  done
  # The unfused network too, so the fused epilogue's effect shows.
  log="$OUT/eval-${dev/:/}-nofuse.log"
  timeout 120 "$BIN" eval "$MODEL" --device "$dev" --data "$DATA" --no-fuse >"$log" 2>&1
  echo "== eval on $dev --no-fuse: exit $?"; grep -vE "^eval \[" "$log"
done

echo "== PyTorch (cuDNN), same network, batch $BATCH, $EPOCHS epochs"
timeout 300 python3 scripts/gpu/cnn_torch.py "$DATA" --epochs "$EPOCHS" --batch "$BATCH" >"$OUT/torch.log" 2>&1
echo "torch: exit $?"; cat "$OUT/torch.log"
