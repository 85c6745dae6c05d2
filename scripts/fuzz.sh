#!/usr/bin/env bash
# Runs convtune's libFuzzer harnesses (fuzz/*.cpp, built with clang, ASan and UBSan): each for a given time, or
# every committed input once. See docs/RELIABILITY.md.
#
# Usage: scripts/fuzz.sh [--seconds N] [--regressions] [--build DIR] [--keep DIR] [HARNESS...]
#   HARNESS          fuzz_idx, fuzz_model, fuzz_tuning_db, fuzz_layer, fuzz_suite, fuzz_tune_log,
#                    fuzz_program_cache (default: all of them, one after another)
#   --seconds N      fuzz each harness for N seconds (default: $CONVTUNE_FUZZ_SECONDS, else 30), starting from its
#                    seeds (fuzz/corpus/HARNESS) and regression inputs, into a scratch corpus
#   --regressions    instead, run every seed, every fuzz/regressions/HARNESS input and the matching reproducers in
#                    tests/data/repro once; any crash fails
#   --build DIR      use the build in DIR (configured with -DCONVTUNE_FUZZ=ON); default build-fuzz/, configured and
#                    built here when missing
#   --keep DIR       keep the inputs a run finds in DIR/HARNESS (to grow fuzz/corpus by hand)
# A crash, leak, timeout or out-of-memory fails the run; its input is left in BUILD/fuzz-artifacts/ and the last
# lines of the report are printed. Copy the input to fuzz/regressions/HARNESS/ together with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=${CONVTUNE_FUZZ_SECONDS:-30}
mode=fuzz
build=""
keep=""
harnesses=()
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --regressions) mode=regressions; shift ;;
    --build) build=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    fuzz_*) harnesses+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
all=(fuzz_idx fuzz_model fuzz_tuning_db fuzz_layer fuzz_suite fuzz_tune_log fuzz_program_cache)
((${#harnesses[@]})) || harnesses=("${all[@]}")

if [ -z "$build" ]; then
  build=build-fuzz
  if [ ! -f "$build/build.ninja" ]; then
    command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DCMAKE_CXX_COMPILER=clang++ -DCONVTUNE_FUZZ=ON -DCONVTUNE_BUILD_TESTS=OFF -DCONVTUNE_WITH_CUDA=OFF
  fi
  cmake --build "$build" -j "$(nproc)" --target "${harnesses[@]}"
fi
build=$(cd "$build" && pwd)
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

# The reliability issue's reproducers that are inputs of a harness, by file name.
reproducers() {
  local pattern
  case "$1" in
    fuzz_idx) pattern='idx-*.bin' ;;
    fuzz_model) pattern='model-*.model' ;;
    fuzz_tuning_db) pattern='tuningdb-*.json' ;;
    fuzz_layer) pattern='layer-*.txt' ;;
    fuzz_suite) pattern='suite-*.txt' ;;
    fuzz_tune_log) pattern='tunelog-*.json report-*.json' ;;
    fuzz_program_cache) pattern='progcache-*.bin' ;;
  esac
  local p
  for p in $pattern; do
    compgen -G "$root/tests/data/repro/$p" || true
  done
}

# Memory and time per input: any single allocation of 1 GiB from inputs of a few kB is a bug, as is a second.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=0:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
flags=(-rss_limit_mb=2560 -malloc_limit_mb=1024 -timeout=20 -artifact_prefix="$artifacts/" -print_final_stats=1)
status=0
for h in "${harnesses[@]}"; do
  binary="$build/fuzz/$h"
  [ -x "$binary" ] || { echo "fuzz.sh: $binary is missing: build it (--build DIR)" >&2; exit 2; }
  seeds=()
  for d in "$root/fuzz/corpus/$h" "$root/fuzz/regressions/$h"; do [ -d "$d" ] && seeds+=("$d"); done
  dict=()
  [ -f "$root/fuzz/dicts/$h.dict" ] && dict=(-dict="$root/fuzz/dicts/$h.dict")
  log="$build/fuzz-$h.log"
  if [ "$mode" = regressions ]; then
    mapfile -t files < <(reproducers "$h"; for d in "${seeds[@]}"; do find "$d" -type f; done)
    echo "fuzz.sh: $h: ${#files[@]} committed input(s)"
    ((${#files[@]})) || continue
    if ! "$binary" "${flags[@]}" "${files[@]}" >"$log" 2>&1; then
      echo "fuzz.sh: $h FAILED on a committed input:"; tail -40 "$log"; status=1
    fi
  else
    scratch=$(mktemp -d)
    # The scratch corpus comes first, so new inputs land there and never in the committed corpus.
    echo "fuzz.sh: $h for ${seconds}s"
    if ! "$binary" "${flags[@]}" "${dict[@]}" -max_total_time="$seconds" "$scratch" "${seeds[@]}" >"$log" 2>&1; then
      echo "fuzz.sh: $h FAILED (input in $artifacts):"; tail -60 "$log"; status=1
    fi
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$log" | tail -2 | sed "s/^/fuzz.sh: $h: /"
    if [ -n "$keep" ]; then mkdir -p "$keep/$h"; cp -n "$scratch"/* "$keep/$h/" 2>/dev/null || true; fi
    rm -rf "$scratch"
  fi
done
exit $status
