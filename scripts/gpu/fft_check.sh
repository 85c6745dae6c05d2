#!/usr/bin/env bash
# GPU run for the fft family (issue 13), binaries carried in .carry/bin (scripts/gpu/pack.sh). STAGES (default all
# but conformance) picks the parts, in this order:
#   conformance  fft_test on NVIDIA OpenCL; family_conformance_test for fft on CUDA and NVIDIA OpenCL;
#   bench        LAYERS (default: the 5x5 layers and three 3x3 ones of the stride1 suite), all directions, fft's
#                built-in default and winograd's beside cuDNN FP32 (one bench each; JSON and tables under OUT);
#   sizes        alex2 forward and backward-filter at each of SIZES (default 16 24 32), to see where the time goes;
#   gemm         the batched GEMMs one fft forward step runs on alex2 (T 16 and 32), alone on the gemm family;
#   tune         tune --family fft on LAYERS for TUNE_BUDGET (default 3m) into OUT/fft-db.json (on top of the shipped
#                tuning), then bench --family auto with it beside cuDNN;
#   suite        the whole stride1 suite (every 3x3/5x5 stride-1 layer of AlexNet, the seeds, unseen_shapes.txt, VGG and
#                ResNet), all directions, the plan's choice with OUT/fft-db.json and the shipped tuning, beside cuDNN.
#   scripts/gpu/fft_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: fft_check.sh OUTDIR}
mkdir -p "$OUT"
BIN=$PWD/.carry/bin
STAGES=${STAGES:-bench sizes gemm}
LAYERS=${LAYERS:-alex2 u2 u8 fmnist2 alex3 res3 vgg3_2}
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_TUNING_DB=$OUT/fft-db.json
source scripts/gpu/nvidia_icd.sh
source scripts/gpu/find_cudnn.sh
export CONVTUNE_CUDNN_LIBRARY=$(find_cudnn)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
echo "cudnn: $CONVTUNE_CUDNN_LIBRARY" | tee -a "$OUT/gpu.txt"
layer_args=()
for l in $LAYERS; do layer_args+=(--layer "$l"); done
has() { [[ " $STAGES " == *" $1 "* ]]; }

if has conformance; then
  {
    timeout 200 "$BIN/fft_test" 2>&1 | grep -E "OK|FAILED|Failure|FP32 tolerance" | head -80
    timeout 300 "$BIN/family_conformance_test" --gtest_filter='*fft*' 2>&1 | grep -E "conformance:|OK|FAILED|Failure" | head -40
  } >"$OUT/conformance.txt" 2>&1
  echo "conformance: $(grep -cE '^\[       OK' "$OUT/conformance.txt") OK"; grep -E "FAILED|Failure" "$OUT/conformance.txt" | head
fi

bench() {  # NAME SECONDS ARGS...: the layers beside cuDNN FP32
  local name=$1 seconds=$2
  shift 2
  timeout "$seconds" "$BIN/convtune" bench --suite stride1 "${layer_args[@]}" --device cuda:0 --warmup 2 --repeats 10 \
    --against cudnn --math fp32 --out "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>&1
  echo "bench $name: exit $? ($(date +%T))"
}
if has bench; then
  bench fft-default 330 --direction all --family fft
  [ "${WINOGRAD:-1}" = 1 ] && bench winograd-default 120 --direction all --family winograd
fi
if has sizes; then
  for t in ${SIZES:-16 24 32}; do
    timeout 90 "$BIN/convtune" bench --suite stride1 --layer alex2 --device cuda:0 --direction fwd --family fft \
      --config FFT_SIZE=$t --warmup 2 --repeats 10 --out "$OUT/size-fwd-$t.json" >"$OUT/size-fwd-$t.txt" 2>&1
    timeout 90 "$BIN/convtune" bench --suite stride1 --layer alex2 --device cuda:0 --direction bwd-filter --family fft \
      --config FFT_SIZE=$t,SPLIT=1 --warmup 2 --repeats 10 --out "$OUT/size-bwf-$t.json" >"$OUT/size-bwf-$t.txt" 2>&1
    echo "size $t: $(grep -hE '^alex2' "$OUT/size-fwd-$t.txt" "$OUT/size-bwf-$t.txt" | awk '{print $2, $6}' | tr '\n' ' ')"
  done
fi
if has gemm; then
  # alex2 forward per bin: (2K x 2C) x (2C x tiles): T=32 one tile an image (544 bins), T=16 nine (144 bins); the
  # default chunk decides the tiles of one step.
  timeout 120 "$BIN/convtune" bench --gemm M=384,N=128,K=128,batch=544 --gemm M=384,N=576,K=128,batch=144 \
    --device cuda:0 --family gemm --against cublas --warmup 2 --repeats 10 >"$OUT/gemm.txt" 2>&1
  echo "gemm: exit $?"; grep -E "^gemm" "$OUT/gemm.txt" | cut -c1-150
fi
if has tune; then
  timeout 330 "$BIN/convtune" tune --suite stride1 "${layer_args[@]}" --family fft --direction all --device cuda:0 \
    --budget "${TUNE_BUDGET:-3m}" --db "$CONVTUNE_TUNING_DB" >"$OUT/tune.txt" 2>&1
  echo "tune: exit $?"; grep -vE "^tune \[" "$OUT/tune.txt" | tail -5 | cut -c1-200
  bench tuned 200 --direction all --family auto
fi
if has suite; then
  layer_args=()
  bench suite 330 --direction all --family auto
fi
