#!/usr/bin/env bash
# The sanitizer job (scripts/test.sh runs it after the main suite; CI therefore too): builds build-asan/ with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer (every finding fatal) and libFuzzer's coverage, then runs the
# tests labelled "sanitizer": the unit tests, the model and dataset readers, the CPU conformance list and one
# direction per kernel family on PoCL, the command line's reproducer and bad-input tests and a tune/report/db
# round trip, and for every fuzz harness its committed inputs plus a fuzzing run of $CONVTUNE_FUZZ_SECONDS
# (default 30) seconds. docs/RELIABILITY.md says what each part covers.
set -eo pipefail
cd "$(dirname "$0")/.."

scripts/install_packages.sh clang libclang-rt-dev

[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f build-asan/build.ninja ]; then
  # Built to fit CI's time: -O1 (ASan's recommendation) with line tables only (enough for symbolised reports),
  # unity batches, and no CUDA backend (nothing here can run it, and no outside data reaches it).
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_UNITY_BUILD=ON -DCONVTUNE_WITH_CUDA=OFF \
    -DCMAKE_CXX_COMPILER=clang++ -DCONVTUNE_FUZZ=ON
fi
# Only what the labelled tests run: the library, seven test binaries, the command line and the harnesses.
cmake --build build-asan -j "$(nproc)" --target unit_tests tool_unit_tests nn_tests mlp_tests cpu_conformance_test \
  family_conformance_test cpu_depthwise_test convtune_cli fuzzers

# PoCL and LLVM keep allocations until exit that LeakSanitizer would report as leaks of ours.
export LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd build-asan
ctest -L sanitizer --output-on-failure -j 2 2>&1 | tee ctest-sanitizer.log
