# Sourced by the GPU scripts (after `cd` to the repository root): the carried binaries (scripts/gpu/pack.sh) on the
# library path, the suites, the shipped tuning and a compile cache, NVIDIA's OpenCL registered where it is not, and
# cuDNN from PyTorch's wheel for `bench --against cudnn`. Each script sets its own CONVTUNE_TUNING_DB.
BIN=$PWD/.carry/bin
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A caller's own shipped folder (a merged copy to measure before shipping it) is kept.
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=${CONVTUNE_SHIPPED_TUNING_DIR:-$PWD/tuning}
export CONVTUNE_CACHE_DIR=/tmp/convtune-cache
source scripts/gpu/nvidia_icd.sh
source scripts/gpu/find_cudnn.sh
CONVTUNE_CUDNN_LIBRARY=$(find_cudnn)
export CONVTUNE_CUDNN_LIBRARY
