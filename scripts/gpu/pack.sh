#!/usr/bin/env bash
# Copies the binaries the GPU run needs into .carry/bin (git-ignored), to be carried to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .carry/bin && mkdir -p .carry/bin
BUILD=${BUILD:-build}
cp "$BUILD"/convtune "$BUILD"/tests/*_test .carry/bin/
[ -x "$BUILD"/tests/implicit_gemm_sweep ] && cp "$BUILD"/tests/implicit_gemm_sweep .carry/bin/
du -sh .carry
