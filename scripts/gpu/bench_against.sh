#!/usr/bin/env bash
# Side-by-side tables on the GPU machine: convtune against cuDNN (FP32 and TF32, on cuda:0) and against CLBlast
# (on NVIDIA's OpenCL device), AlexNet + seed layers, all directions, in one suite per run. Needs only the source
# tree (no network): builds convtune itself unless CONVTUNE_BIN names a binary (or the build fails and
# .carry/bin/convtune exists), finds PyTorch's libcudnn.so.9, uses .carry/lib/libclblast.so.1.* if present.
#   scripts/gpu/bench_against.sh RESULTS_DIR
# Env: CONVTUNE_BIN, BATCH_SCALE (1), WARMUP (3), REPEATS (20), CONVTUNE_CUDNN_LIBRARY, CONVTUNE_CLBLAST_LIBRARY,
# RUNS (which tables: "cudnn-fp32 cudnn-tf32 clblast"), CONVTUNE_SHIPPED_TUNING_DIR (default: the tree's tuning/).
# Writes RESULTS_DIR/against-{cudnn-fp32,cudnn-tf32,clblast}.{csv,json,md} and log.txt (every printed table); keeps going after a
# failing step and lists every failure at the end (exit status 1 if any).
set -uo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 RESULTS_DIR" >&2; exit 2; fi
cd "$(dirname "$0")/../.."
RESULTS=$(mkdir -p "$1" && cd "$1" && pwd)
LOG=$RESULTS/log.txt
: >"$LOG"
BATCH_SCALE=${BATCH_SCALE:-1} WARMUP=${WARMUP:-3} REPEATS=${REPEATS:-20}
failures=()
say() { echo "$*" | tee -a "$LOG"; }
# Runs a step, logging its output; a failure is recorded and the script goes on.
step() {
  local name=$1; shift
  say "=== $name: $*"
  "$@" >>"$LOG" 2>&1
  local status=$?
  say "=== $name: exit $status"
  [ $status -eq 0 ] || failures+=("$name (exit $status)")
  return $status
}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_CACHE_DIR=${CONVTUNE_CACHE_DIR:-/tmp/convtune-cache}
# convtune's plans take the tuning results shipped in this tree (a carried binary's compiled-in path is not here).
export CONVTUNE_SHIPPED_TUNING_DIR=${CONVTUNE_SHIPPED_TUNING_DIR:-$PWD/tuning}
RUNS=${RUNS:-cudnn-fp32 cudnn-tf32 clblast}

source scripts/gpu/nvidia_icd.sh  # after the cd to the repository root

# --- cuDNN: PyTorch's copy (its wheel's nvidia/cudnn/lib, or torch/lib), unless CONVTUNE_CUDNN_LIBRARY is set.
source scripts/gpu/find_cudnn.sh  # find_cudnn
if [ -z "${CONVTUNE_CUDNN_LIBRARY:-}" ]; then
  CONVTUNE_CUDNN_LIBRARY=$(find_cudnn) || CONVTUNE_CUDNN_LIBRARY=""
fi
if [ -n "$CONVTUNE_CUDNN_LIBRARY" ]; then
  export CONVTUNE_CUDNN_LIBRARY
  cudnn_dir=$(dirname "$CONVTUNE_CUDNN_LIBRARY")
  # cuDNN 9 loads its engine libraries (and NVRTC, cuBLAS) by name: put the wheel's nvidia/*/lib on the path.
  extra=$cudnn_dir
  for d in "$cudnn_dir"/../../*/lib; do [ -d "$d" ] && extra=$extra:$(cd "$d" && pwd); done
  export LD_LIBRARY_PATH=$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "cuDNN: $CONVTUNE_CUDNN_LIBRARY"
  cudnn_include=$(cd "$cudnn_dir/../include" 2>/dev/null && pwd)
else
  say "cuDNN: no libcudnn.so.9 found in PyTorch's install; the system's is tried (the table says if it is missing)"
  cudnn_include=""
fi
python3 -c 'import torch; print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version())' >>"$LOG" 2>&1

# --- CLBlast: the copy carried from the CPU machine (Debian's, linked only against libOpenCL).
if [ -z "${CONVTUNE_CLBLAST_LIBRARY:-}" ]; then
  carried=$(ls .carry/lib/libclblast.so.1.* 2>/dev/null | head -1)
  [ -z "$carried" ] && carried=$(ls .carry/lib/libclblast.so.1 2>/dev/null | head -1)
  [ -n "$carried" ] && export CONVTUNE_CLBLAST_LIBRARY=$PWD/$carried
fi
say "CLBlast: ${CONVTUNE_CLBLAST_LIBRARY:-system search (libclblast.so.1)}"

# --- convtune: CONVTUNE_BIN, else a fresh build (CUDA on; tests off to stay quick), else the carried binary.
BIN=${CONVTUNE_BIN:-}
if [ -z "$BIN" ]; then
  [ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
  generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
  cudnn_flag=(); [ -n "$cudnn_include" ] && [ -f "$cudnn_include/cudnn.h" ] && cudnn_flag=(-DCONVTUNE_CUDNN_INCLUDE="$cudnn_include")
  if step configure cmake -S . -B build-against "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCONVTUNE_BUILD_TESTS=OFF \
       "${cudnn_flag[@]}" && step build cmake --build build-against -j "$(nproc)" --target convtune_cli; then
    BIN=$PWD/build-against/convtune
  elif [ -x .carry/bin/convtune ]; then
    BIN=$PWD/.carry/bin/convtune
    say "build failed: using the carried binary $BIN instead"
  else
    say "no convtune binary: the build failed and neither CONVTUNE_BIN nor .carry/bin/convtune exists"
    exit 1
  fi
fi
# A fresh build without cudnn.h would leave the cuDNN columns empty: prefer the carried binary then.
probe=$("$BIN" bench --layer N=1,C=1,H=4,K=1,R=3 --device cpu --direction fwd --against cudnn --repeats 1 --warmup 0 2>&1)
if grep -q "built without" <<<"$probe" && [ -z "${CONVTUNE_BIN:-}" ] && [ -x .carry/bin/convtune ] && [ "$BIN" != "$PWD/.carry/bin/convtune" ]; then
  say "$BIN was built without cuDNN's headers: using the carried binary .carry/bin/convtune instead"
  BIN=$PWD/.carry/bin/convtune
fi
say "convtune: $BIN"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv >>"$LOG" 2>&1
step devices "$BIN" devices
OCL=$("$BIN" devices 2>/dev/null | grep -oE "opencl:[0-9]+ +NVIDIA" | head -1 | cut -d' ' -f1)
say "NVIDIA OpenCL device: ${OCL:-none}"

# One suite: AlexNet's five layers then the seed layers, so each run is one table.
SUITE=$RESULTS/alexnet+seeds.txt
cat bench/suites/alexnet.txt bench/suites/seeds.txt >"$SUITE"
common=(--suite "$SUITE" --direction all --batch-scale "$BATCH_SCALE" --warmup "$WARMUP" --repeats "$REPEATS")
run() {  # run NAME DEVICE AGAINST [more bench options]
  local name=$1 device=$2 against=$3; shift 3
  step "$name" "$BIN" bench "${common[@]}" --device "$device" --against "$against" "$@" \
    --out "$RESULTS/against-$name.csv" --out "$RESULTS/against-$name.json" --markdown "$RESULTS/against-$name.md"
}
wanted() { [[ " $RUNS " == *" $1 "* ]]; }
wanted cudnn-fp32 && run cudnn-fp32 cuda:0 cudnn --math fp32
wanted cudnn-tf32 && run cudnn-tf32 cuda:0 cudnn --math tf32
if wanted clblast; then
  if [ -n "$OCL" ]; then
    run clblast "$OCL" clblast
  else
    failures+=("clblast (no NVIDIA OpenCL device found)")
  fi
fi

say "=== results in $RESULTS:"; ls -la "$RESULTS" | tee -a "$LOG"
if ((${#failures[@]})); then
  say "=== FAILED steps:"; for f in "${failures[@]}"; do say "  $f"; done
  exit 1
fi
say "=== all steps passed"
