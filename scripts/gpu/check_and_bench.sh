#!/usr/bin/env bash
# Checks convtune on an NVIDIA GPU and measures it against cuDNN, cuBLAS and CLBlast: the GPU tables of
# docs/PERFORMANCE.md. Runs on the GPU machine with the binaries scripts/gpu/pack.sh put in .carry/bin (carry
# [".carry"]; DATA=1 for the train stage). Every bench row is checked against the float64 reference before it is
# timed, and convtune and the library are timed in rounds on the same inputs; the shipped tuning/ files serve the
# plans, with an empty user database (what a user gets after installing).
#
#   [STAGES="..."] [MATHS="..."] scripts/gpu/check_and_bench.sh OUTDIR
#
# Stages (STAGES, default "devices tests conformance"), in this order; each under its own timeout, a failing
# one not stopping the rest:
#   devices      nvidia-smi and `convtune devices`
#   tests        the GPU tests of both backends (cuda_backend_test, opencl_backend_test on NVIDIA's OpenCL,
#                tensor_core_test)
#   peak         `convtune peak` on CUDA and on NVIDIA's OpenCL: bandwidth, FMA ceiling, launch latency, the fill
#   conformance  family_conformance_test on cuda:0, one process per kernel family (FAMILIES, default all; CONF_JOBS
#                at a time, default 8)
#   suites       AlexNet, the seed layers and scripts/gpu/unseen_shapes.txt (SUITES, default "alexnet seeds unseen"),
#                every direction, against cuDNN in each of MATHS (default "fp32 tf32 3xtf32 bf16"; cuDNN runs FP32
#                beside 3xtf32, having no split mode): suites_<math>.md/.json
#   general      scripts/gpu/general_shapes.txt (75 rows of layers no shipped entry was tuned on: other networks'
#                shapes, groups, dilation, odd sizes, N=1), the same way: general_<math>.md/.json
#   gemm         square GEMMs and LeNet's dense layers with their gradients against cuBLAS in each of GEMM_MATHS
#                (default "fp32 tf32 3xtf32 bf16 fp16"): gemm_<math>.md/.json
#   clblast      AlexNet and the seed layers on NVIDIA's OpenCL device against CLBlast's Sconvgemm (forward only;
#                CLBlast has no backward convolution), fp32: clblast.md/.json
#   train        `train cnn` on Fashion-MNIST (.carry/data) for EPOCHS (default 6) in each of TRAIN_MATHS (default
#                "fp32 tf32 bf16 fp16"), then `eval`, and `train mlp`: test accuracy and epoch times
#                (train_<math>.log, train_mlp_<math>.log)
# The default runs the checks; name the bench stages to measure (one device call holds about two bench stages of
# four modes each: docs/PERFORMANCE.md gives each table's exact command). Other settings: WARMUP (3), REPEATS (20).
# OUTDIR gets log.txt (every step's output), summary.txt (scripts/bench_summary.py over every bench),
# conformance.txt, and the tables and training logs in tables.tar.gz (TAR=0 leaves them as files; the lent GPU
# machine returns at most 8 files a call).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
OUT=${1:?usage: check_and_bench.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source scripts/gpu/gpu_env.sh  # BIN, library path, suites, shipped tuning, cuDNN, NVIDIA's OpenCL
WORK=$(mktemp -d /tmp/check-and-bench.XXXXXX)
export CONVTUNE_TUNING_DB=$WORK/db.json  # an empty user database: the plans take the shipped files alone
STAGES=${STAGES:-devices tests conformance}
MATHS=${MATHS:-fp32 tf32 3xtf32 bf16}
WARMUP=${WARMUP:-3} REPEATS=${REPEATS:-20}
LOG=$OUT/log.txt
: >"$LOG"
failures=()
has() { [[ " $STAGES " == *" $1 "* ]]; }
say() { echo "$*" | tee -a "$LOG"; }
# step NAME SECONDS COMMAND...: runs it under a timeout, its output into the log; a failure is listed at the end.
step() {
  local name=$1 seconds=$2
  shift 2
  say "=== $name ($(date +%T)): $*"
  timeout "$seconds" "$@" >>"$LOG" 2>&1
  local status=$?
  say "=== $name: exit $status"
  ((status == 0)) || failures+=("$name (exit $status)")
}
CT=$BIN/convtune
[ -x "$CT" ] || { echo "check_and_bench: no $CT: run scripts/gpu/pack.sh first and carry .carry" >&2; exit 2; }
OCL=$("$CT" devices 2>/dev/null | grep -oE "opencl:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
say "convtune: $("$CT" --version 2>&1 | head -1); cuDNN: ${CONVTUNE_CUDNN_LIBRARY:-not found}; NVIDIA OpenCL: ${OCL:-none}"

if has devices; then
  step nvidia-smi 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  step devices 60 "$CT" devices
fi

if has tests; then
  step cuda_backend_test 300 "$BIN/cuda_backend_test" --gtest_brief=1
  if [ -n "$OCL" ]; then
    CONVTUNE_OPENCL_TEST_DEVICE=${OCL#opencl:} step opencl_backend_test 300 "$BIN/opencl_backend_test" --gtest_brief=1
  fi
  CONVTUNE_CONFORMANCE_DEVICES=cuda:0 step tensor_core_test 400 "$BIN/tensor_core_test" --gtest_brief=1
fi

if has peak; then
  step peak-cuda 120 "$CT" peak --device cuda:0 --out "$OUT/peak_cuda.json"
  [ -n "$OCL" ] && step peak-opencl 120 "$CT" peak --device "$OCL" --out "$OUT/peak_opencl.json"
fi

if has conformance; then
  # One process per family, in parallel: compiling the sampled configurations dominates, and the host has 16 cores.
  # The CPU backend's families skip themselves (cuda:0 is the only device named).
  families=${FAMILIES:-$("$BIN/family_conformance_test" --gtest_list_tests | awk -F/ '/^  /{print $2}' |
                         awk '{print $1}' | sed -E 's/_(fwd|bwd_data|bwd_filter)$//' | sort -u)}
  say "=== conformance ($(date +%T)): $(echo $families | wc -w) families on cuda:0, ${CONF_JOBS:-8} at a time"
  mkdir -p "$WORK/conformance"
  printf '%s\n' $families | CONVTUNE_CONFORMANCE_DEVICES=cuda:0 xargs -P "${CONF_JOBS:-8}" -I{} \
    sh -c 'timeout '"${CONF_SECONDS:-500}"' "$0" --gtest_brief=1 --gtest_filter="*/{}_fwd:*/{}_bwd_data:*/{}_bwd_filter" \
             >"$1/{}.log" 2>&1; echo "{}: exit $?" >>"$1/{}.log"' "$BIN/family_conformance_test" "$WORK/conformance"
  for f in $families; do
    grep -hE "^conformance:|FAILED|Failure|: exit" "$WORK/conformance/$f.log" >>"$LOG"
    grep -q ": exit 0$" "$WORK/conformance/$f.log" || failures+=("conformance $f")
  done
  cat "$WORK"/conformance/*.log >"$OUT/conformance.txt"
  say "=== conformance: done ($(date +%T))"
fi

# bench_against NAME SECONDS LIBRARY DEVICE [bench options]: one table, as .md (readable) and .json (every figure).
bench_against() {
  local name=$1 seconds=$2 library=$3 device=$4
  shift 4
  step "$name" "$seconds" "$CT" bench "$@" --direction all --device "$device" --against "$library" \
    --warmup "$WARMUP" --repeats "$REPEATS" --out "$OUT/$name.json" --markdown "$OUT/$name.md"
}

if has suites; then
  SUITE_FILE=$WORK/suites.txt
  : >"$SUITE_FILE"
  for s in ${SUITES:-alexnet seeds unseen}; do
    case $s in
      unseen) cat scripts/gpu/unseen_shapes.txt ;;
      *) cat "bench/suites/$s.txt" ;;
    esac
  done >"$SUITE_FILE"
  for math in $MATHS; do
    bench_against "suites_$math" 400 cudnn cuda:0 --suite "$SUITE_FILE" --math "$math"
  done
fi

if has general; then
  for math in $MATHS; do
    bench_against "general_$math" 300 cudnn cuda:0 --suite scripts/gpu/general_shapes.txt --math "$math"
  done
fi

if has gemm; then
  # Square products, and LeNet's dense layers with their gradients (fc1 100x256x3136 and fc2 100x10x256 at batch
  # 100; the backward products at batch 64).
  gemms=(--gemm M=1024,N=1024,K=1024 --gemm M=2048,N=2048,K=2048 --gemm M=4096,N=4096,K=4096
         --gemm M=100,N=256,K=3136,trans_b=1 --gemm M=100,N=10,K=256,trans_b=1 --gemm M=64,N=256,K=3136,trans_b=1
         --gemm M=256,N=3136,K=64,trans_a=1 --gemm M=64,N=3136,K=256 --gemm M=10,N=256,K=64,trans_a=1)
  # cuBLAS: PyTorch's copy when convtune's own search (the system's, /usr/local/cuda) is not what you want.
  if [ -z "${CONVTUNE_CUBLAS_LIBRARY:-}" ] && cublas=$(find_cublas); then export CONVTUNE_CUBLAS_LIBRARY=$cublas; fi
  say "cuBLAS: ${CONVTUNE_CUBLAS_LIBRARY:-the system search}"
  for math in ${GEMM_MATHS:-fp32 tf32 3xtf32 bf16 fp16}; do
    step "gemm_$math" 120 "$CT" bench "${gemms[@]}" --device cuda:0 --math "$math" --against cublas \
      --warmup "$WARMUP" --repeats "$REPEATS" --out "$OUT/gemm_$math.json" --markdown "$OUT/gemm_$math.md"
  done
fi

if has clblast; then
  carried=$(ls .carry/lib/libclblast.so.1* 2>/dev/null | head -1)
  [ -n "$carried" ] && [ -z "${CONVTUNE_CLBLAST_LIBRARY:-}" ] && export CONVTUNE_CLBLAST_LIBRARY=$PWD/$carried
  if [ -n "$OCL" ]; then
    cat bench/suites/alexnet.txt bench/suites/seeds.txt >"$WORK/alexnet+seeds.txt"
    bench_against clblast 400 clblast "$OCL" --suite "$WORK/alexnet+seeds.txt"
  else
    failures+=("clblast (no NVIDIA OpenCL device)")
  fi
fi

if has train; then
  for math in ${TRAIN_MATHS:-fp32 tf32 bf16 fp16}; do
    say "=== train_$math ($(date +%T)): train cnn --epochs ${EPOCHS:-6} --math $math, then eval"
    { timeout 200 "$CT" train cnn --device cuda:0 --data .carry/data --epochs "${EPOCHS:-6}" --math "$math" \
        --model "$WORK/cnn_$math.model" &&
      timeout 60 "$CT" eval "$WORK/cnn_$math.model" --device cuda:0 --data .carry/data --math "$math"; } \
      >"$OUT/train_$math.log" 2>&1
    status=$?
    timeout 100 "$CT" train mlp --device cuda:0 --data .carry/data --math "$math" >"$OUT/train_mlp_$math.log" 2>&1 ||
      status=$?
    say "=== train_$math: exit $status"
    ((status == 0)) || failures+=("train_$math (exit $status)")
  done
fi

benches=$(ls "$OUT"/*.json 2>/dev/null | grep -v "/peak_")
[ -n "$benches" ] && python3 scripts/bench_summary.py $benches >"$OUT/summary.txt" 2>&1
if [ "${TAR:-1}" = 1 ]; then
  tables=$(cd "$OUT" && ls ./*.md ./*.json ./*.log 2>/dev/null)
  # shellcheck disable=SC2086  # plain file names written above
  [ -n "$tables" ] && (cd "$OUT" && tar -czf tables.tar.gz $tables && rm -f $tables)
fi
rm -rf "$WORK"
say "=== summary"
[ -f "$OUT/summary.txt" ] && tee -a "$LOG" <"$OUT/summary.txt"
if ((${#failures[@]})); then
  say "=== FAILED: ${failures[*]}"
  exit 1
fi
say "=== every step passed"
