#!/usr/bin/env bash
# GPU run for gemm.cl's REGISTER_VECTOR and PREFETCH parameters (and through them winograd and im2col_gemm),
# binaries carried in .carry/bin (scripts/gpu/pack.sh):
#   PART=cuda (default): 1. family conformance of gemm, im2col_gemm, implicit_gemm and winograd on CUDA and NVIDIA
#     OpenCL (DEVICES, default cuda:0,opencl:1: the GPU machine also has PoCL, whose compiler asserts on some
#     implicit_gemm samples); 2. ten GEMM shapes beside cuBLAS FP32: the 128x128 tile setup with each REGISTER_VECTOR x PREFETCH;
#     3. the alexnet suite's im2col_gemm default beside the same with scalar register reads and no prefetch;
#   PART=wino: the stride1 suite (winograd) beside cuDNN FP32, built-in default and with scalar register reads
#     and no prefetch;
#   PART=opencl instead: the stride1 suite's winograd default through NVIDIA's OpenCL beside cuDNN FP32;
#   PART=tune instead: a 3-minute tune of the ten GEMM shapes into OUTDIR/gemm-db.json (the shipped tuning/
#   entries go stale with gemm.cl's source); with IM2COL=1 also a 2-minute tune of im2col_gemm on AlexNet into
#   OUTDIR/im2col-db.json and both beside cuBLAS/cuDNN FP32 on the new entries.
#   [PART=cuda|wino|opencl|tune] scripts/gpu/gemm_kernel_check.sh OUTDIR   (tables also land in OUTDIR/summary.txt)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: gemm_kernel_check.sh OUTDIR}
mkdir -p "$OUT"
BIN=$PWD/.carry/bin
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_TUNING_DB=/tmp/gemm-kernel-db.json
source scripts/gpu/nvidia_icd.sh
source scripts/gpu/find_cudnn.sh
export CONVTUNE_CUDNN_LIBRARY=$(find_cudnn)
PART=${PART:-cuda}
SUMMARY=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$SUMMARY"
LOG=$OUT/log.txt
GEMMS=(--gemm M=1024,N=1024,K=1024 --gemm M=2048,N=2048,K=2048 --gemm M=4096,N=4096,K=4096
       --gemm M=100,N=256,K=3136,trans_b=1 --gemm M=100,N=10,K=256,trans_b=1
       --gemm M=64,N=256,K=3136,trans_b=1 --gemm M=256,N=3136,K=64,trans_a=1 --gemm M=64,N=3136,K=256
       --gemm M=10,N=256,K=64,trans_a=1 --gemm M=64,N=256,K=10)
LABELS=()
run_bench() {  # LABEL SECONDS ARGS...: one bench run, json under /tmp, its exit status in the log
  local label=$1 seconds=$2
  shift 2
  timeout "$seconds" "$BIN/convtune" bench "$@" --out "/tmp/$label.json" >>"$LOG" 2>&1
  echo "bench $label: exit $?" | tee -a "$SUMMARY"
  [ -f "/tmp/$label.json" ] && LABELS+=("$label=/tmp/$label.json")
}
SUITE=(--suite stride1 --direction all --family winograd --warmup 2 --repeats 10 --against cudnn --math fp32)

if [ "$PART" = opencl ]; then
  run_bench wino-opencl 400 "${SUITE[@]}" --device opencl:1
  python3 scripts/gpu/variant_table.py cudnn "${LABELS[@]}" | tee -a "$SUMMARY"
  cp /tmp/wino-opencl.json "$OUT/" 2>/dev/null
  exit 0
fi
if [ "$PART" = tune ]; then
  timeout 240 "$BIN/convtune" tune "${GEMMS[@]}" --device cuda:0 --budget 3m --no-peak --db "$OUT/gemm-db.json" \
    >>"$LOG" 2>&1
  echo "tune gemm: exit $?" | tee -a "$SUMMARY"
  grep -vE "^tune \[" "$LOG" | tail -14 | cut -c1-220 | tee -a "$SUMMARY"
  # im2col_gemm's AlexNet entries go stale with gemm.cl too (IM2COL=1 adds a 2-minute tune of them), then both
  # families' new entries beside the libraries: GEMMs against cuBLAS FP32, AlexNet im2col_gemm against cuDNN FP32.
  if [ "${IM2COL:-0}" = 1 ]; then
    timeout 150 "$BIN/convtune" tune --suite alexnet --direction all --family im2col_gemm --device cuda:0 --budget 2m \
      --no-peak --db "$OUT/im2col-db.json" >>"$LOG" 2>&1
    echo "tune im2col_gemm: exit $?" | tee -a "$SUMMARY"
    export CONVTUNE_TUNING_DB=/tmp/after-tune-db.json
    cp "$OUT/gemm-db.json" "$CONVTUNE_TUNING_DB" && "$BIN/convtune" db --db "$CONVTUNE_TUNING_DB" merge "$OUT/im2col-db.json" >>"$LOG" 2>&1
    run_bench gemm-tuned 90 "${GEMMS[@]}" --device cuda:0 --family gemm --warmup 3 --repeats 20 --against cublas --math fp32
    run_bench im2col-tuned 90 --suite alexnet --direction all --family im2col_gemm --device cuda:0 --warmup 3 --repeats 20 \
      --against cudnn --math fp32
    python3 scripts/gpu/variant_table.py cublas gemm-tuned=/tmp/gemm-tuned.json | tee -a "$SUMMARY"
    python3 scripts/gpu/variant_table.py cudnn im2col-tuned=/tmp/im2col-tuned.json | tee -a "$SUMMARY"
  fi
  exit 0
fi

if [ "$PART" = cuda ]; then
echo "== conformance (CUDA and NVIDIA OpenCL)" | tee -a "$SUMMARY"
{
  CONVTUNE_CONFORMANCE_DEVICES=${DEVICES:-cuda:0,opencl:1} timeout 240 "$BIN/family_conformance_test" --gtest_filter='*gemm*:*winograd*' 2>&1
} >"$OUT/conformance.txt" 2>&1
echo "passed: $(grep -cE '^\[       OK' "$OUT/conformance.txt"), failed: $(grep -cE '^\[  FAILED' "$OUT/conformance.txt")" |
  tee -a "$SUMMARY"
grep -E "^\[  FAILED|Failure" "$OUT/conformance.txt" | head -10 | tee -a "$SUMMARY"

LARGE=TILE_M=128,TILE_N=128,TILE_K=16,THREADS_M=16,THREADS_N=16,LOCAL_PADDING=4,VECTOR_WIDTH=4
echo "== GEMMs beside cuBLAS FP32" | tee -a "$SUMMARY"
GB=(--warmup 3 --repeats 20 --against cublas --math fp32)
run_bench gemm-default 120 "${GEMMS[@]}" --device cuda:0 --family gemm "${GB[@]}"
for rv in 1 4; do
  for pf in 0 1; do
    run_bench "gemm-rv$rv-pf$pf" 120 "${GEMMS[@]}" --device cuda:0 --family gemm \
      --config "$LARGE,REGISTER_VECTOR=$rv,PREFETCH=$pf" "${GB[@]}"
  done
done
run_bench gemm-rv4-pf1-k32 120 "${GEMMS[@]}" --device cuda:0 --family gemm \
  --config "${LARGE/TILE_K=16/TILE_K=32},REGISTER_VECTOR=4,PREFETCH=1" "${GB[@]}"
python3 scripts/gpu/variant_table.py cublas "${LABELS[@]}" | tee -a "$SUMMARY"
echo "== alexnet suite, im2col_gemm beside cuDNN FP32" | tee -a "$SUMMARY"
LABELS=()
ALEX=(--suite alexnet --direction all --family im2col_gemm --warmup 2 --repeats 10 --against cudnn --math fp32)
run_bench gemm-im2col-default 120 "${ALEX[@]}" --device cuda:0
run_bench gemm-im2col-scalar 120 "${ALEX[@]}" --device cuda:0 --config LOCAL_PADDING=1,REGISTER_VECTOR=1,PREFETCH=0
python3 scripts/gpu/variant_table.py cudnn "${LABELS[@]}" | tee -a "$SUMMARY"
tar czf "$OUT/gemm-json.tgz" -C /tmp $(cd /tmp && ls gemm-*.json 2>/dev/null)
exit 0
fi

if [ "$PART" = wino ]; then
echo "== stride1 suite, winograd beside cuDNN FP32" | tee -a "$SUMMARY"
LABELS=()
run_bench wino-default 200 "${SUITE[@]}" --device cuda:0
run_bench wino-scalar 200 "${SUITE[@]}" --device cuda:0 --config LOCAL_PADDING=1,REGISTER_VECTOR=1,PREFETCH=0
python3 scripts/gpu/variant_table.py cudnn "${LABELS[@]}" | tee -a "$SUMMARY"
cp /tmp/wino-default.json /tmp/wino-scalar.json "$OUT/" 2>/dev/null
fi

