#!/usr/bin/env bash
# Every CONVTUNE_* variable convtune reads, set to an unusable value, stops a command before any work with exit
# status 2 and a message naming the variable (and its value shown escaped); a usable value changes nothing.
# Usage: environment.sh CONVTUNE
set -u
bin=$1
failures=0
check() {  # check NAME VALUE
  local out status
  out=$(env "$1=$2" "$bin" bench --layer N=1,C=2,H=6,K=3,R=3 --device cpu --repeats 1 --warmup 0 2>&1)
  status=$?
  if [ $status -ne 2 ] || ! grep -qF "$1=" <<<"$out" || ! grep -q "is invalid" <<<"$out" ||
     grep -q $'\e' <<<"$out"; then
    echo "BAD $1='$2': exit $status: $out"
    failures=$((failures + 1))
  else
    echo "ok  $(grep -o 'error: .*' <<<"$out" | cut -c1-160)"
  fi
}
check CONVTUNE_THREADS two
check CONVTUNE_THREADS 0
check CONVTUNE_COLUMNS 80x
check CONVTUNE_CPU_ISA sse9
check CONVTUNE_CPU_CACHES 32K,5x,1M
check CONVTUNE_KERNEL_WARNINGS yes
check CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT 2
check CONVTUNE_EMULATE_TENSOR_CORES true
check CONVTUNE_TUNING_DB /
check CONVTUNE_CACHE_DIR /dev/null
check CONVTUNE_KERNEL_DIR /nonexistent/kernels
check CONVTUNE_SHIPPED_TUNING_DIR /nonexistent/tuning
check CONVTUNE_DATA_DIR /nonexistent/share
check CONVTUNE_SUITE_DIR /nonexistent/suites
check CONVTUNE_DATA /nonexistent/fashion-mnist
check CONVTUNE_DNNL_LIBRARY /nonexistent/libdnnl.so
check CONVTUNE_CLBLAST_LIBRARY /nonexistent/libclblast.so
check CONVTUNE_CUBLAS_LIBRARY /nonexistent/libcublas.so
check CONVTUNE_CUDNN_LIBRARY /nonexistent/libcudnn.so
check CONVTUNE_THREADS $'\e[2J'  # an escape sequence in a value: shown escaped
# A good value runs.
env CONVTUNE_THREADS=1 CONVTUNE_CACHE_DIR=off "$bin" bench --layer N=1,C=2,H=6,K=3,R=3 --device cpu --repeats 1 \
  --warmup 0 >/dev/null 2>&1 || { echo "BAD: good values refused"; failures=$((failures + 1)); }
echo "environment.sh: $failures bad"
[ $failures -eq 0 ]
