#!/usr/bin/env bash
# Writes a tuning database of COUNT entries (default 10,000; about 11 MB) for a device that is not present, one
# per batch size, for the concurrency and kill tests. Usage: prefill_db.sh FILE [COUNT]
set -eu
file=$1 count=${2:-10000}
{
  printf '{"format": "convtune-tuning-db", "format_version": 1, "entries": [\n'
  for ((i = 1; i <= count; ++i)); do
    ((i > 1)) && printf ',\n'
    printf '{"family": "implicit_gemm", "problem": "N=%d,C=8,H=16,W=16,K=8,R=3,S=3,stride=1,pad=1,dilation=1,groups=1,dir=fwd,precision=fp32", "shape": {"N": %d, "C": 8, "H": 16, "W": 16, "K": 8, "R": 3, "S": 3, "stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1, "dilation_h": 1, "dilation_w": 1, "groups": 1}, "parameters": {"TILE_M": 32, "TILE_N": 32}, "time_ms": 1.5, "gflops": 1.0, "device": {"fingerprint": "opencl|Prefill|Prefill GPU|pf1|1.0", "backend": "opencl", "name": "Prefill GPU", "vendor": "Prefill", "architecture": "pf1", "driver_version": "1.0"}, "kernel_version": 1, "date": "2026-01-01T00:00:00Z", "convtune_version": "0.1.0"}' "$i" "$i"
  done
  printf '\n]}\n'
} > "$file"
