#!/usr/bin/env bash
# Issue 14's 3xtf32 rows that ran at convtune's own FP32 speed (alex2 every direction, alex5 backward-filter: the
# same FFT in both modes), one call (binaries carried: scripts/gpu/pack.sh; carry [".carry"]): longer 3xtf32 tunes
# of the tensor-core families that compute them (fft_tc on alex2, winograd_tc on alex5 backward-filter, budgets
# FFT_BUDGET and WINOGRAD_BUDGET) into OUTDIR/db.json, then AlexNet in 3xtf32 (the plan's choice, against cuDNN
# FP32) and in fp32 (convtune's FP32 SIMT families), both reading that database over the shipped one, and the
# split mode's time over FP32's per row (split_tf32_summary.py). Files in OUTDIR: log.txt, db.json, *.json, *.md.
#   [FFT_BUDGET=150s (0: no fft_tc tune)] [WINOGRAD_BUDGET=90s] scripts/gpu/parity_retune.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: parity_retune.sh OUTDIR}
mkdir -p "$OUT"
source scripts/gpu/gpu_env.sh
export CONVTUNE_TUNING_DB=$OUT/db.json
LOG=$OUT/log.txt
stamp() { echo "--- $* ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cudnn: $CONVTUNE_CUDNN_LIBRARY"
  if [ "${FFT_BUDGET:-150s}" != 0 ]; then
  stamp "tune fft_tc 3xtf32 alex2 ${FFT_BUDGET:-150s}"
  timeout 300 "$BIN/convtune" tune --suite alexnet --layer alex2 --math 3xtf32 --direction all --device cuda:0 \
    --family fft_tc --budget "${FFT_BUDGET:-150s}" >/tmp/tune-fft.txt 2>&1
  echo "exit $?"; grep -vE "^tune \[" /tmp/tune-fft.txt | tail -25 | cut -c1-230
  fi
  stamp "tune winograd_tc 3xtf32 alex5 bwd-filter ${WINOGRAD_BUDGET:-90s}"
  timeout 240 "$BIN/convtune" tune --suite alexnet --layer alex5 --math 3xtf32 --direction bwd-filter --device cuda:0 \
    --family winograd_tc --budget "${WINOGRAD_BUDGET:-90s}" >/tmp/tune-wino.txt 2>&1
  echo "exit $?"; grep -vE "^tune \[" /tmp/tune-wino.txt | tail -15 | cut -c1-230
  # What the database holds for alex5 backward-filter: each family's entry (the tuner stores each task's best).
  python3 -c "import json,sys; [print('db:', e['family'], e['direction'], e['parameters'], round(e['time_ms'], 4)) for e in json.load(open(sys.argv[1]))['entries'] if e['shape']['C'] == 256]" "$OUT/db.json"
  stamp "bench 3xtf32 AlexNet (the plan's choice)"
  timeout 200 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math 3xtf32 --against cudnn \
    --warmup 2 --repeats 10 --out "$OUT/3xtf32.json" --markdown "$OUT/3xtf32.md" >/tmp/plan.txt 2>&1
  echo "exit $?"; cut -c1-250 /tmp/plan.txt | grep -vE "^\[" | tail -20
  stamp "bench fp32 AlexNet"
  timeout 120 "$BIN/convtune" bench --suite alexnet --direction all --device cuda:0 --math fp32 --warmup 2 \
    --repeats 10 --out "$OUT/fp32_alexnet.json" >/tmp/fp32.txt 2>&1
  echo "exit $?"; cut -c1-250 /tmp/fp32.txt | grep -vE "^\[" | tail -20
  stamp summary
  python3 scripts/gpu/split_tf32_summary.py "$OUT" | tee "$OUT/summary.txt"
  stamp done
} >"$LOG" 2>&1
tail -60 "$LOG"
