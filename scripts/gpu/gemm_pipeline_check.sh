#!/usr/bin/env bash
# GPU experiment on gemm.cl's main loop (tried and not shipped: docs/PERFORMANCE.md, "gemm.cl with two local stages"):
# each kernel directory under .carry/kernels (KERNELS, default "full nowarp warponly unroll2") against the embedded
# kernels. The directories are copies of src/kernels with docs/measurements/gemm_pipeline_h200/
# gemm_pipeline_experiment.patch applied and its PREFETCH == 2 conditions turned into PREFETCH >= 1, so that the
# shipped configurations (PREFETCH 1) take the new path: full (two local stages, the reduction unrolled, 8x4-thread
# warps), nowarp (without the warp order), warponly (the warp order on the old loop), unroll2 (full, unrolled by 2).
# Runs on ten GEMMs beside cuBLAS FP32 (the plan's configurations: shipped entries, defaults for the batched three),
# winograd on 3x3 layers with PREFETCH=1 (its GPU default has 0) and fft's default on two 5x5 layers, all directions,
# beside cuDNN FP32 in the embedded run. Binaries in .carry/bin (scripts/gpu/pack.sh).
#   scripts/gpu/gemm_pipeline_check.sh OUTDIR     (tables in OUTDIR/summary.txt)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: gemm_pipeline_check.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=/tmp/gemm-pipeline-db.json
SUMMARY=$OUT/summary.txt
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$SUMMARY"
GEMMS=(--gemm M=1024,N=1024,K=1024 --gemm M=2048,N=2048,K=2048 --gemm M=4096,N=4096,K=4096
       --gemm M=100,N=256,K=3136,trans_b=1 --gemm M=64,N=256,K=3136,trans_b=1 --gemm M=256,N=3136,K=64,trans_a=1
       --gemm M=64,N=3136,K=256 --gemm M=384,N=128,K=128,batch=544 --gemm M=384,N=576,K=128,batch=144
       --gemm M=256,N=2048,K=384,batch=36)
WINO=(--suite stride1 --layer alex3 --layer alex4 --layer u6 --layer vgg3_2 --layer vgg4_2 --layer res4
      --direction all --family winograd)
FFT=(--suite stride1 --layer alex2 --layer u8 --direction all --family fft)
COMMON=(--device cuda:0 --warmup 2 --repeats 10)
GEMM_LABELS=() WINO_LABELS=() FFT_LABELS=()
run() {  # KIND LABEL SECONDS ARGS...
  local kind=$1 label=$2 seconds=$3
  shift 3
  timeout "$seconds" "$BIN/convtune" bench "$@" "${COMMON[@]}" --out "$OUT/$label.json" >>"$LOG" 2>&1
  echo "bench $label: exit $? ($(date +%T))" | tee -a "$SUMMARY"
  [ -f "$OUT/$label.json" ] || return
  case $kind in
    gemm) GEMM_LABELS+=("$label=$OUT/$label.json") ;;
    wino) WINO_LABELS+=("$label=$OUT/$label.json") ;;
    fft) FFT_LABELS+=("$label=$OUT/$label.json") ;;
  esac
}
unset CONVTUNE_KERNEL_DIR
run gemm gemm-embedded 120 "${GEMMS[@]}" --family gemm --against cublas
run wino wino-embedded-pf0 200 "${WINO[@]}" --against cudnn --math fp32
run wino wino-embedded-pf1 120 "${WINO[@]}" --config PREFETCH=1
run fft fft-embedded 120 "${FFT[@]}" --against cudnn --math fp32
for k in ${KERNELS:-full nowarp warponly unroll2}; do
  export CONVTUNE_KERNEL_DIR=$PWD/.carry/kernels/$k
  run gemm "gemm-$k" 90 "${GEMMS[@]}" --family gemm
  run wino "wino-$k-pf1" 120 "${WINO[@]}" --config PREFETCH=1
  [ "$k" = full ] && run fft "fft-$k" 100 "${FFT[@]}"
done
unset CONVTUNE_KERNEL_DIR
# Where the time goes in the 4096^3 GEMM's main loop, embedded against the full variant (NCU=0 skips): FMA pipe use,
# stall reasons, bank conflicts, occupancy and registers, one launch each.
if [ "${NCU:-1}" = 1 ] && [ -x /usr/local/cuda/bin/ncu ]; then
  metrics=gpu__time_duration.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_not_selected_per_warp_active.pct,smsp__issue_active.avg.pct_of_peak_sustained_active
  for k in embedded full; do
    if [ $k = embedded ]; then unset CONVTUNE_KERNEL_DIR; else export CONVTUNE_KERNEL_DIR=$PWD/.carry/kernels/$k; fi
    timeout 120 /usr/local/cuda/bin/ncu --metrics "$metrics" -k regex:gemm -c 2 --csv --log-file "$OUT/ncu-$k.csv" \
      "$BIN/convtune" bench --gemm M=4096,N=4096,K=4096 --family gemm --device cuda:0 --warmup 0 --repeats 1 >>"$LOG" 2>&1
    echo "ncu $k: exit $?" | tee -a "$SUMMARY"
  done
  unset CONVTUNE_KERNEL_DIR
fi
{
  python3 scripts/gpu/variant_table.py cublas "${GEMM_LABELS[@]}"
  python3 scripts/gpu/variant_table.py cudnn "${WINO_LABELS[@]}"
  python3 scripts/gpu/variant_table.py cudnn "${FFT_LABELS[@]}"
} 2>&1 | tee -a "$SUMMARY"
