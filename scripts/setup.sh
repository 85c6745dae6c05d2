#!/usr/bin/env bash
# Installs convtune's Debian dependencies (only those missing), then configures and builds into build/, and
# installs the Python package into .venv (scripts/python_package.sh). Idempotent: a second run installs nothing
# and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config
          libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev zlib1g-dev
          ocl-icd-opencl-dev opencl-headers ocl-icd-libopencl1 pocl-opencl-icd clinfo
          libdnnl-dev libclblast-dev dataset-fashion-mnist libssl-dev
          libhwy-dev
          librsvg2-bin  # rsvg-convert: tests/cli/report_charts.sh renders the report's charts
          python3-venv python3-dev python3-numpy python3-pytest python3-torch
          python3-hypothesis)  # property tests of the Python package's argument checks (python/tests)
scripts/install_packages.sh "${packages[@]}"

# CUDA support builds when the toolkit's headers are found (nvcc's usual place is added to PATH).
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f build/build.ninja ]; then
  # Unity batches: a fresh build on two cores took 387 s against about 510 s file by file (each batch parses the
  # common headers once); linking Debian's compiled libfmt instead of fmt header-only took it from 377 s to 268 s
  # (2026-11-28, same machine, back to back). The kernel families' sources and the Highway-dispatched FMA probe compile on their own
  # (src/CMakeLists.txt), so the code that runs hot is compiled as before.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON
fi
cmake --build build -j "$(nproc)"
scripts/python_package.sh
