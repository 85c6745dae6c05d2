#!/usr/bin/env bash
# Issue 14's 16-bit tensors on the GPU machine, one call (binaries and Fashion-MNIST carried: DATA=1
# scripts/gpu/pack.sh; carry [".carry"]). Stages (STAGES, default all), each with a timeout, one failing stage not
# stopping the others:
#   conformance  implicit_gemm_tc in bf16 and fp16 (cuda:0 and NVIDIA's OpenCL) and im2col_wgmma in bf16, fp16 and
#                tf32 (cuda:0) on every standard case and direction (family_conformance_test; FAMILIES picks), gemm_tc's
#                16-bit kernel and gemm_wgmma (tensor_core_test), in parallel;
#   tune         with TUNE_BUDGET (e.g. 240s): `tune --math bf16` of AlexNet + seeds + unseen_shapes.txt, every
#                direction (TUNE_FAMILY: one family), into OUTDIR/db.json (the benches read it), starting from
#                .carry/db-start.json when carried;
#   bench        `bench --math bf16 --against cudnn` on AlexNet + the seeds + scripts/gpu/unseen_shapes.txt, every
#                direction; the same layers in tf32 on im2col_wgmma against cuDNN tf32; GEMMs (square, LeNet's dense
#                layers) against cuBLAS in bf16;
#   train        `train cnn --math` in TRAIN_MATHS (default bf16 fp32; LeNet, EPOCHS) and PyTorch's same network in
#                TORCH_MATHS (scripts/gpu/cnn_torch.py: bf16 is autocast), for accuracy and epoch times.
# BENCH_MATHS picks the bench tables (default bf16 tf32 gemm; fp16: AlexNet).
# Files in OUTDIR: log.txt (everything), bf16.md/.json, tf32.md/.json, gemm.md, db.json (at most 8 come back).
#   [STAGES="conformance bench train"] [TUNE_BUDGET=240s] [EPOCHS=8] scripts/gpu/sixteen_bit_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: sixteen_bit_check.sh OUTDIR}
STAGES=${STAGES:-conformance tune bench train}
EPOCHS=${EPOCHS:-8}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
CUBLAS=$(find_cublas) && export CONVTUNE_CUBLAS_LIBRARY=$CUBLAS
export CONVTUNE_TUNING_DB=$OUT/db.json
# A database from an earlier run (carried as .carry/db-start.json) to start from: tunes add to it.
[ -f .carry/db-start.json ] && cp .carry/db-start.json "$OUT/db.json"
LOG=$OUT/log.txt
has() { [[ " $STAGES " == *" $1 "* ]]; }
stamp() { echo "--- $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY; cublas: ${CUBLAS:-not found}; commit $(git rev-parse --short HEAD 2>/dev/null)"
  "$BIN/convtune" devices >/tmp/devices.txt 2>&1
  OCL=$(awk '/^  opencl:[0-9]+ /{id=$1} /^    vendor/ && /NVIDIA/ && id {print id; id=""}' /tmp/devices.txt | head -1)
  echo "NVIDIA OpenCL: ${OCL:-none}"
  ALL=/tmp/all-layers.txt
  cat bench/suites/alexnet.txt bench/suites/seeds.txt scripts/gpu/unseen_shapes.txt >"$ALL"

  if has conformance; then
    stamp conformance
    pids=()
    # FAMILIES: the convolution families checked in 16 bits (and tf32 for the wgmma one), one process per
    # family, device and direction.
    for fam in ${FAMILIES:-implicit_gemm_tc implicit_gemm_wgmma}; do
      precisions=bf16,fp16
      [[ "$fam" == *wgmma ]] && precisions=bf16,fp16,tf32
      for dev in cuda:0 $OCL; do
        [[ "$fam" == *wgmma ]] && [ "$dev" != cuda:0 ] && continue  # CUDA only
        for dir in fwd bwd_data bwd_filter; do
          CONVTUNE_CONFORMANCE_DEVICES=$dev CONVTUNE_CONFORMANCE_PRECISIONS=$precisions timeout 300 \
            "$BIN/family_conformance_test" --gtest_brief=1 \
            --gtest_filter="AllFamilies/FamilyConformance.SampledConfigurationsMatchTheReference/${fam}_$dir" \
            >"/tmp/conf-$fam-$dev-$dir.txt" 2>&1 &
          pids+=($!)
        done
      done
    done
    for dev in cuda:0 $OCL; do
      CONVTUNE_CONFORMANCE_DEVICES=$dev timeout 300 "$BIN/tensor_core_test" --gtest_brief=1 \
        --gtest_filter='TensorCoreOnDevice.SixteenBit*:TensorCoreOnDevice.GemmWgmma*' >"/tmp/tc-$dev.txt" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    for f in /tmp/conf-*.txt /tmp/tc-*.txt; do
      echo "== $f"; grep -E "^conformance:|checks so far|Failure|rel L2|threw|FAILED|PASSED|OK \]|Skipped" "$f" | head -12 | cut -c1-400
    done
  fi

  if has tune && [ -n "${TUNE_BUDGET:-}" ]; then
    stamp "tune ${TUNE_MATH:-bf16} $TUNE_BUDGET"
    family_args=()
    [ -n "${TUNE_FAMILY:-}" ] && family_args=(--family "$TUNE_FAMILY")
    timeout 400 "$BIN/convtune" tune --suite "$ALL" --math "${TUNE_MATH:=bf16}" --direction all --device cuda:0 \
      "${family_args[@]}" --budget "$TUNE_BUDGET" >/tmp/tune.txt 2>&1
    echo "tune: exit $?"; grep -vE "^tune \[" /tmp/tune.txt | tail -12 | cut -c1-200
  fi

  if has bench; then
    for math in ${BENCH_MATHS:-bf16 tf32 gemm}; do
    case $math in
    bf16)
    stamp "bench bf16"
    timeout 240 "$BIN/convtune" bench --suite "$ALL" --direction all --device cuda:0 --math bf16 \
      --against cudnn --warmup 2 --repeats 10 --out "$OUT/bf16.json" --markdown "$OUT/bf16.md" >/tmp/bf16.txt 2>&1
    echo "bench bf16: exit $?"; cut -c1-250 /tmp/bf16.txt | grep -vE "^\[" | tail -60 ;;
    tf32)
    stamp "bench tf32 (${TF32_FAMILY:=implicit_gemm_wgmma})"
    timeout 200 "$BIN/convtune" bench --suite "$ALL" --direction all --device cuda:0 --math tf32 \
      --family "$TF32_FAMILY" --against cudnn --warmup 2 --repeats 10 --out "$OUT/tf32.json" \
      --markdown "$OUT/tf32.md" >/tmp/tf32.txt 2>&1
    echo "bench tf32: exit $?"; cut -c1-250 /tmp/tf32.txt | grep -vE "^\[" | tail -60 ;;
    fp16)
    stamp "bench fp16 (AlexNet)"
    timeout 120 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math fp16 \
      --against cudnn --warmup 2 --repeats 10 --markdown "$OUT/fp16.md" >/tmp/fp16.txt 2>&1
    echo "bench fp16: exit $?"; cut -c1-250 /tmp/fp16.txt | grep -vE "^\[" | tail -20 ;;
    gemm)
    stamp "bench gemm bf16"
    gemms=()
    for g in M=1024,N=1024,K=1024,trans_b=1 M=2048,N=2048,K=2048,trans_b=1 M=4096,N=4096,K=4096,trans_b=1 \
             M=64,N=256,K=3136,trans_b=1 M=64,N=10,K=256,trans_b=1 M=8192,N=8192,K=8192,trans_b=1; do
      gemms+=(--gemm "$g"); done
    timeout 90 "$BIN/convtune" bench "${gemms[@]}" --device cuda:0 --math bf16 --against cublas --warmup 2 \
      --repeats 10 --markdown "$OUT/gemm.md" >/tmp/gemm.txt 2>&1
    echo "bench gemm: exit $?"; cut -c1-250 /tmp/gemm.txt | grep -vE "^\[" | tail -12 ;;
    esac
    done
  fi

  if has train; then
    DATA=$PWD/.carry/data
    for math in ${TRAIN_MATHS:-bf16 fp32}; do
      stamp "train cnn --math $math"
      timeout 150 "$BIN/convtune" train cnn --device cuda:0 --data "$DATA" --epochs "$EPOCHS" --math "$math" \
        --out "/tmp/lenet-$math.model" >"/tmp/train-$math.txt" 2>&1
      echo "exit $?"; grep -E "^(train|epoch|test|saved)|accuracy" "/tmp/train-$math.txt" | tail -8
    done
    for math in ${TORCH_MATHS:-bf16 fp32}; do
      stamp "torch --math $math"
      timeout 120 python3 scripts/gpu/cnn_torch.py "$DATA" --epochs "$EPOCHS" --math "$math" 2>&1 |
        grep -E "^(torch|epoch|accuracy)|Error"
    done
  fi
  stamp done
} >"$LOG" 2>&1
grep -E "^---|exit|geomean|FAILED|PASSED|checks" "$LOG" | tail -40
