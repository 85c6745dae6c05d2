#!/usr/bin/env bash
# Copies the binaries the GPU run needs into .carry/bin (git-ignored), to be carried to the GPU machine, and
# CLBlast's library into .carry/lib for bench --against (scripts/gpu/bench_against.sh finds it there).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .carry/bin && mkdir -p .carry/bin
BUILD=${BUILD:-build}
cp "$BUILD"/convtune "$BUILD"/tests/*_test .carry/bin/
[ -x "$BUILD"/tests/implicit_gemm_sweep ] && cp "$BUILD"/tests/implicit_gemm_sweep .carry/bin/
# Debian's libclblast links only libOpenCL and libstdc++, so it runs on the GPU machine as is. The real file is
# copied under its full name (links may not survive the trip): its name carries the version the report prints.
rm -rf .carry/lib && mkdir -p .carry/lib
for f in /usr/lib/x86_64-linux-gnu/libclblast.so.1.*; do [ -f "$f" ] && cp "$f" .carry/lib/; done
du -sh .carry
