#!/usr/bin/env bash
# Copies what a GPU run needs into .carry (git-ignored), to be carried to the GPU machine: the command line, the
# GPU tests, libconvtune and libconvtune_nn into .carry/bin (run with LD_LIBRARY_PATH=.carry/bin), CLBlast's
# library into .carry/lib for bench --against, and with DATA=1 the Fashion-MNIST files into .carry/data.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .carry/bin && mkdir -p .carry/bin
BUILD=${BUILD:-build}
cp "$BUILD"/convtune .carry/bin/
cp "$BUILD"/lib/libconvtune.so.0 .carry/bin/  # the file itself, under its soname (links may not travel)
cp "$BUILD"/lib/libconvtune_nn.so.0 .carry/bin/  # the seed networks' trainer, which train and eval run on
# Their Debian dependencies the GPU machine may lack (Highway for the CPU family, OpenSSL's libcrypto for model
# checksums, fmt), under their sonames beside them.
for lib in libhwy.so.1 libcrypto.so.3 libfmt.so.9; do cp -L "/lib/x86_64-linux-gnu/$lib" .carry/bin/; done
for t in cuda_backend_test opencl_backend_test family_conformance_test gemm_test implicit_gemm_test winograd_test fft_test \
         tensor_core_test depthwise_test; do
  [ -x "$BUILD/tests/$t" ] && cp "$BUILD/tests/$t" .carry/bin/
done
[ -x "$BUILD"/tests/implicit_gemm_sweep ] && cp "$BUILD"/tests/implicit_gemm_sweep .carry/bin/
# Debian's libclblast links only libOpenCL and libstdc++, so it runs on the GPU machine as is. The real file is
# copied under its full name (links may not survive the trip): its name carries the version the report prints.
rm -rf .carry/lib && mkdir -p .carry/lib
for f in /usr/lib/x86_64-linux-gnu/libclblast.so.1.*; do [ -f "$f" ] && cp "$f" .carry/lib/; done
if [ "${DATA:-0}" = 1 ]; then
  mkdir -p .carry/data && cp /usr/share/datasets/fashion-mnist/*.gz .carry/data/
fi
du -sh .carry
