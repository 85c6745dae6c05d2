#!/usr/bin/env bash
# GPU run for the tensor-core families gemm_tc and implicit_gemm_tc (issue 14, first part), binaries carried in
# .carry/bin (BUILD=build-dev scripts/gpu/pack.sh; carry [".carry/bin"]):
#   1. conformance in tf32 and 3xtf32 on cuda:0 and on NVIDIA's OpenCL (when registered): implicit_gemm_tc on the
#      standard cases in every direction (family_conformance_test, tolerance by mode: 8 u sqrt(reduction length),
#      u = 2^-11 for tf32, 2^-24 for 3xtf32 as for FP32) and gemm_tc (tensor_core_test), one process per device and
#      direction, in parallel; OK/FAILED lines per test;
#   2. built-in defaults (untuned) side by side with the libraries in the same math: AlexNet and stride1 in tf32
#      against cuDNN tf32, AlexNet in 3xtf32 against cuDNN fp32 (FMA; cuDNN has no split mode), AlexNet in fp32
#      (convtune's SIMT families, shipped tuning) for the split mode's speed-up, square and LeNet GEMMs in tf32 and
#      3xtf32 against cuBLAS;
#   3. summary.txt: per table the geometric mean of convtune/library, the worst row and the rows convtune wins.
# With TUNE_SECONDS=S, step 1b tunes (cold program cache) implicit_gemm_tc on AlexNet in tf32 and 3xtf32 and gemm_tc
# on the GEMMs, S seconds in all, into the user database the benches then read (kept as tuned-db.json); the tf32
# rows then compare the tuned tensor-core entries and the shipped FP32 entries (which serve tf32) with cuDNN.
# torch-tf32.txt: PyTorch's cuBLAS and cuDNN in TF32 against float64 on random data, for the accuracy columns.
# The 3xtf32 benches name the tensor-core families (--family): without it the FP32 families, which also compute
# 3xtf32, could serve the rows, and these rows measure the split mode.
# Files in OUTDIR (at most 8): gpu.txt (environment, step results), conformance.txt, bench.md (all tables),
# bench.json (all rows), bench.log (progress and errors), summary.txt, tuned-db.json, torch-tf32.txt. Every step
# has a timeout, one failing step does not stop the others, and steps are cut short so the whole run stays under
# 9 minutes.
# PART=winograd_tc runs winograd_tc (issues 13 and 14) instead, on AlexNet's stride-1 layers (alex2 5x5, alex3-5
# 3x3): 1. its conformance in tf32 and 3xtf32 on cuda:0 and NVIDIA's OpenCL (family_conformance_test: the stride-1
# 3x3 and 5x5 cases, every direction; tensor_core_test's TensorCoreOnDevice.WinogradTc*: larger GEMMs, chunks,
# slices; tf32 to its unit roundoff, 3xtf32 to the FP32 tolerance, both times the tile's declared alpha factor);
# 1b. with TUNE_SECONDS=S (90 fits the time bound), S seconds of tuning winograd_tc in tf32 and 3xtf32; 2. benches of
# winograd_tc in tf32 against cuDNN tf32, in 3xtf32 against cuDNN fp32, and of the FP32 winograd family in tf32 math
# on the same layers (shipped entries: the SIMT GEMM winograd_tc replaces); 3. the summary, with winograd_tc's
# speed-up over winograd per row. Same files, same time bound.
#   [PART=tc|winograd_tc] [TUNE_SECONDS=S] scripts/gpu/tensor_core_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: [PART=tc|winograd_tc] tensor_core_check.sh OUTDIR}
PART=${PART:-tc}
case "$PART" in tc | winograd_tc) ;; *) echo "PART must be tc or winograd_tc, not $PART" >&2; exit 2 ;; esac
# winograd_tc's layers: AlexNet's stride-1 ones, by name in the suite.
WTC_LAYERS=(--suite alexnet --layer alex2 --layer alex3 --layer alex4 --layer alex5)
mkdir -p "$OUT"
BIN=$PWD/.carry/bin
TMP=$(mktemp -d /tmp/tensor-core-check.XXXXXX)
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVTUNE_SUITE_DIR=$PWD/bench/suites CONVTUNE_SHIPPED_TUNING_DIR=$PWD/tuning
export CONVTUNE_CACHE_DIR=/tmp/convtune-cache CONVTUNE_TUNING_DB=$TMP/user-db.json  # no user entries: defaults
START=$(date +%s)
DEADLINE=$((START + 555))  # 9 min 15 s; the summary takes a second
left() { echo $((DEADLINE - $(date +%s))); }
budget() { local l; l=$(left); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }  # min(wanted, time left)
note() { echo "$*" | tee -a "$OUT/gpu.txt"; }
: >"$OUT/gpu.txt"; : >"$OUT/conformance.txt"; : >"$OUT/bench.log"; : >"$OUT/bench.md"

source scripts/gpu/nvidia_icd.sh
source scripts/gpu/find_cudnn.sh
CUDNN=$(find_cudnn) && export CONVTUNE_CUDNN_LIBRARY=$CUDNN
CUBLAS=$(find_cublas) && export CONVTUNE_CUBLAS_LIBRARY=$CUBLAS LD_LIBRARY_PATH=$(dirname "$CUBLAS"):$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$OUT/gpu.txt"
note "cudnn: ${CUDNN:-not found}; cublas: ${CUBLAS:-not found}; commit $(git rev-parse --short HEAD 2>/dev/null || echo -)"
"$BIN/convtune" devices >"$TMP/devices.txt" 2>&1
# NVIDIA's OpenCL device ids: a device line "  opencl:N  NAME" followed by "    vendor  NVIDIA ...".
OCL=$(awk '/^  opencl:[0-9]+ /{id=$1} /^    vendor/ && /NVIDIA/ && id {print id; id=""}' "$TMP/devices.txt" | paste -sd, -)
note "devices: cuda:0${OCL:+, $OCL (NVIDIA OpenCL)}"

# ---- 1. conformance: one process per device x direction (NVRTC compiles dominate; the host has cores to spare)
conf() {  # NAME DEVICE GTEST_FILTER BINARY
  CONVTUNE_CONFORMANCE_DEVICES=$2 CONVTUNE_CONFORMANCE_SAMPLES=1 timeout "$(budget 170)" "$BIN/$4" \
    --gtest_filter="$3" >"$TMP/conf-$1.log" 2>&1
  echo "exit $?" >>"$TMP/conf-$1.log"
}
for dev in cuda:0 ${OCL//,/ }; do
  if [ "$PART" = winograd_tc ]; then
    for dir in fwd bwd_data bwd_filter; do
      conf "$dev-wtc-$dir" "$dev" "AllFamilies/FamilyConformance.*/winograd_tc_$dir" family_conformance_test &
    done
    conf "$dev-wtc-larger" "$dev" "TensorCoreOnDevice.WinogradTc*" tensor_core_test &
    continue
  fi
  for dir in fwd bwd_data bwd_filter; do
    conf "$dev-$dir" "$dev" "AllFamilies/FamilyConformance.*/implicit_gemm_tc_$dir" family_conformance_test &
  done
  conf "$dev-gemm" "$dev" "TensorCoreOnDevice.*" tensor_core_test &
done
wait
for f in "$TMP"/conf-*.log; do
  name=$(basename "$f" .log)
  {
    echo "=== ${name#conf-}"
    grep -E "^conformance:|^\[ +(OK|FAILED|SKIPPED) +\]|Failure|rel L2|Skipped|^exit" "$f" | head -60
  } >>"$OUT/conformance.txt"
done
ok=$(grep -cE "^\[ +OK +\]" "$OUT/conformance.txt"); failed=$(grep -cE "^\[ +FAILED +\]" "$OUT/conformance.txt")
skipped=$(grep -cE "^\[ +SKIPPED +\]" "$OUT/conformance.txt")
note "conformance: $ok OK, $failed FAILED, $skipped SKIPPED ($(($(date +%s) - START)) s)"
grep -E "^\[ +FAILED +\]" "$OUT/conformance.txt" | sort -u | head -12 | tee -a "$OUT/gpu.txt"

# ---- 1b. tuning (TUNE_SECONDS), and PyTorch's TF32 accuracy
source scripts/gpu/gemm_shapes.sh  # GEMMS
TUNE_SECONDS=${TUNE_SECONDS:-0}
tune() {  # NAME SECONDS ARGS...
  local name=$1 want=$2
  shift 2
  echo "=== tune $name: $*" >>"$OUT/bench.log"
  timeout "$(budget $((want + 15)))" "$BIN/convtune" tune --device cuda:0 --budget "${want}s" "$@" >>"$OUT/bench.log" 2>&1
  note "tune $name: exit $? ($(($(date +%s) - START)) s)"
}
if [ "$TUNE_SECONDS" -gt 0 ] && [ "$PART" = winograd_tc ]; then
  tune wtc-tf32 $((TUNE_SECONDS * 55 / 100)) "${WTC_LAYERS[@]}" --direction all --math tf32 --family winograd_tc
  tune wtc-3xtf32 $((TUNE_SECONDS * 45 / 100)) "${WTC_LAYERS[@]}" --direction all --math 3xtf32 --family winograd_tc
  cp "$CONVTUNE_TUNING_DB" "$OUT/tuned-db.json" 2>/dev/null
elif [ "$TUNE_SECONDS" -gt 0 ]; then
  tune alexnet-tf32 $((TUNE_SECONDS * 45 / 100)) --suite alexnet --direction all --math tf32 --family implicit_gemm_tc
  tune alexnet-3xtf32 $((TUNE_SECONDS * 30 / 100)) --suite alexnet --direction all --math 3xtf32 --family implicit_gemm_tc
  tune gemm-tf32 $((TUNE_SECONDS * 25 / 100)) "${GEMMS[@]}" --math tf32 --family gemm_tc
  cp "$CONVTUNE_TUNING_DB" "$OUT/tuned-db.json" 2>/dev/null
fi
[ "$PART" = tc ] && timeout 60 python3 - >"$OUT/torch-tf32.txt" 2>&1 <<'PY'
import torch
torch.manual_seed(0)
def rel(a, b): return ((a.double() - b).norm() / b.norm()).item()
a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
ref = a.double() @ b.double()
for tf32 in (False, True):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    print(f"cuBLAS matmul 4096^3 allow_tf32={tf32}: rel L2 {rel(a @ b, ref):.2e}")
x, w = torch.randn(128, 256, 13, 13, device="cuda"), torch.randn(256, 256, 3, 3, device="cuda")
ref = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
for tf32 in (False, True):
    torch.backends.cudnn.allow_tf32 = tf32
    print(f"cuDNN conv2d alex5 allow_tf32={tf32}: rel L2 {rel(torch.nn.functional.conv2d(x, w, padding=1), ref):.2e}")
PY
[ "$PART" = tc ] && note "torch tf32 accuracy: $(tr '\n' ';' <"$OUT/torch-tf32.txt")"

# ---- 2. benches, each into $TMP/NAME.json and a Markdown section of bench.md
bench() {  # NAME SECONDS REPEATS ARGS...: one `convtune bench`, cut to the time left
  local name=$1 want=$2 repeats=$3 t
  shift 3
  t=$(budget "$want")
  if [ "$t" -lt 20 ]; then note "bench $name: skipped (time budget spent)"; return; fi
  echo "=== bench $name: $*" >>"$OUT/bench.log"
  timeout "$t" "$BIN/convtune" bench --device cuda:0 --warmup 2 --repeats "$repeats" --out "$TMP/$name.json" "$@" \
    >>"$OUT/bench.log" 2>&1
  local rc=$?
  note "bench $name: exit $rc ($(($(date +%s) - START)) s)"
  [ -f "$TMP/$name.md" ] && { echo; cat "$TMP/$name.md"; echo; } >>"$OUT/bench.md"
}
if [ "$PART" = winograd_tc ]; then
  bench wtc-tf32 100 10 "${WTC_LAYERS[@]}" --direction all --math tf32 --family winograd_tc --against cudnn \
    --markdown "$TMP/wtc-tf32.md"
  bench wtc-3xtf32 100 10 "${WTC_LAYERS[@]}" --direction all --math 3xtf32 --family winograd_tc --against cudnn \
    --markdown "$TMP/wtc-3xtf32.md"
  bench wtc-simt-tf32 60 10 "${WTC_LAYERS[@]}" --direction all --math tf32 --family winograd
else
bench alexnet-tf32 70 10 --suite alexnet --direction all --math tf32 --against cudnn --markdown "$TMP/alexnet-tf32.md"
bench alexnet-3xtf32 70 10 --suite alexnet --direction all --math 3xtf32 --family implicit_gemm_tc --against cudnn \
  --markdown "$TMP/alexnet-3xtf32.md"
bench alexnet-fp32 45 10 --suite alexnet --direction all --math fp32
bench gemm-tf32 45 10 "${GEMMS[@]}" --math tf32 --against cublas --markdown "$TMP/gemm-tf32.md"
bench gemm-3xtf32 40 10 "${GEMMS[@]}" --math 3xtf32 --family gemm_tc --against cublas --markdown "$TMP/gemm-3xtf32.md"
bench stride1-tf32 160 5 --suite stride1 --direction all --math tf32 --against cudnn --markdown "$TMP/stride1-tf32.md"
fi

# ---- 3. one JSON of every row, and the summary
python3 - "$TMP" "$OUT" <<'PY' 2>&1 | tee "$OUT/summary.txt"
import glob, json, math, os, sys
tmp, out = sys.argv[1], sys.argv[2]
merged = {}
for path in sorted(glob.glob(os.path.join(tmp, "*.json"))):
    name = os.path.basename(path)[:-5]
    if name == "user-db":
        continue
    try:
        merged[name] = json.load(open(path))
    except Exception as e:
        merged[name] = {"error": str(e)}
json.dump(merged, open(os.path.join(out, "bench.json"), "w"), indent=1)
fp32 = {(r["layer"], r["direction"]): r["ms"] for r in merged.get("alexnet-fp32", {}).get("rows", []) if "ms" in r}
for name, data in merged.items():
    rows = data.get("rows", [])
    ran = [r for r in rows if "ms" in r]
    print(f"{name}: {len(ran)}/{len(rows)} rows ran" + (f", {len(rows) - len(ran)} skipped or failed" if len(rows) > len(ran) else ""))
    for r in rows:
        if "ms" not in r:
            print(f"  {r.get('layer')} {r.get('direction')}: {r.get('skipped', '?')[:160]}")
    for lib in ("cudnn", "cublas"):
        ratios = [(r["against"][lib]["ratio_convtune_over_reference"], r["layer"], r["direction"])
                  for r in ran if isinstance(r.get("against"), dict) and isinstance(r["against"].get(lib), dict)
                  and "ratio_convtune_over_reference" in r["against"][lib]]
        if not ratios:
            continue
        geo = math.exp(sum(math.log(x[0]) for x in ratios) / len(ratios))
        worst = max(ratios)
        wins = sum(1 for x in ratios if x[0] < 1)
        print(f"  convtune/{lib}: geometric mean {geo:.2f} over {len(ratios)} rows, worst {worst[0]:.2f} "
              f"({worst[1]} {worst[2]}), convtune faster on {wins}")
    if name == "alexnet-3xtf32" and fp32:
        for r in ran:
            base = fp32.get((r["layer"], r["direction"]))
            if base:
                print(f"  3xtf32 vs convtune fp32: {r['layer']} {r['direction']}: {r['ms']:.3f} vs {base:.3f} ms "
                      f"({base / r['ms']:.2f}x)")
    simt = {(r["layer"], r["direction"]): r["ms"] for r in merged.get("wtc-simt-tf32", {}).get("rows", []) if "ms" in r}
    if name in ("wtc-tf32", "wtc-3xtf32") and simt:
        for r in ran:
            base = simt.get((r["layer"], r["direction"]))
            if base:
                print(f"  winograd_tc vs winograd (tf32 math, FP32 cores): {r['layer']} {r['direction']}: "
                      f"{r['ms']:.3f} vs {base:.3f} ms ({base / r['ms']:.2f}x)")
    checks = [float(r["check_rel_l2"]) for r in ran if r.get("check_rel_l2") not in (None, "skipped")]
    if checks:
        print(f"  largest relative L2 error against float64 (sampled): {max(checks):.1e}")
PY
note "total: $(($(date +%s) - START)) s"
rm -rf "$TMP"
