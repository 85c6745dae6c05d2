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
          python3-venv python3-dev python3-numpy python3-pytest python3-torch)
scripts/install_packages.sh "${packages[@]}"

# CUDA support builds when the toolkit's headers are found (nvcc's usual place is added to PATH).
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j "$(nproc)"
scripts/python_package.sh
