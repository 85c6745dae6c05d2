#!/usr/bin/env bash
# The sanitizer job (scripts/test.sh runs it after the main suite; CI therefore too): builds build-asan/ with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer (every finding fatal) and libFuzzer's coverage, then runs the
# tests labelled "sanitizer": the unit tests, the model and dataset readers, the CPU conformance list and one
# direction per kernel family on PoCL, the command line's reproducer and bad-input tests and a tune/report/db
# round trip, and for every fuzz harness its committed inputs plus a fuzzing run of $CONVTUNE_FUZZ_SECONDS
# (default here 10) seconds; then builds build-tsan/ with ThreadSanitizer (the library and the thread tests only) and
# runs the tests labelled "tsan". docs/RELIABILITY.md says what each part covers.
set -eo pipefail
cd "$(dirname "$0")/.."

scripts/install_packages.sh clang libclang-rt-dev

[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f build-asan/build.ninja ]; then
  # Built to fit CI's time: -O0 with line tables only (enough for symbolised reports; -O0 hides no access from
  # ASan, and clang compiled the library and command line in about half the time it took at -O1, ASan's
  # recommendation for speed), unity batches, and no CUDA backend (nothing here can run it, and no outside data
  # reaches it). The kernel sweeps' PoCL programs come from the main suite's cache in build/ (the same sources,
  # options and device; the main suite has just compiled them), so the sanitizer job's conformance list does not
  # compile them again.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" -DCMAKE_UNITY_BUILD=ON -DCONVTUNE_WITH_CUDA=OFF \
    -DCMAKE_CXX_COMPILER=clang++ -DCONVTUNE_FUZZ=ON -DCONVTUNE_TEST_KERNEL_CACHE_DIR="$PWD/build/test-kernel-cache"
fi
# Only what the labelled tests run: the library, seven test binaries, the command line and the harnesses.
cmake --build build-asan -j "$(nproc)" --target unit_tests tool_unit_tests nn_tests mlp_tests cpu_conformance_test \
  family_conformance_test cpu_depthwise_test convtune_cli fuzzers

# PoCL and LLVM keep allocations until exit that LeakSanitizer would report as leaks of ours.
export LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# 10 s per harness (scripts/fuzz.sh's default is 30): CI's 25 minutes; the committed inputs run whole either way.
export CONVTUNE_FUZZ_SECONDS=${CONVTUNE_FUZZ_SECONDS:-10}
(cd build-asan && ctest -L sanitizer --output-on-failure -j 2 2>&1 | tee ctest-sanitizer.log)

# ThreadSanitizer over one plan called from several threads (tests/threads): CPU backend and PoCL. A build of its
# own (TSan and ASan exclude each other), at -O1 as TSan advises, with only the library and that test binary.
if [ ! -f build-tsan/build.ninja ]; then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_UNITY_BUILD=ON -DCONVTUNE_WITH_CUDA=OFF \
    -DCMAKE_CXX_COMPILER=clang++ -DCONVTUNE_SANITIZE_THREAD=ON
fi
cmake --build build-tsan -j "$(nproc)" --target thread_tests
(cd build-tsan && ctest -L tsan --output-on-failure 2>&1 | tee ctest-tsan.log)
