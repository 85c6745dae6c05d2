#!/usr/bin/env bash
# Fills .carry/py (git-ignored) for scripts/gpu/python_check.sh on the GPU machine, whose Python is 3.12:
#   .carry/py/site/convtune/   the Python package as a cp312-abi3 wheel installs it (stable ABI: it imports in any
#                              Python >= 3.12): modules, _convtune.abi3.so, lib/libconvtune.so.0, share/convtune
#   .carry/py/bin/convtune     the command line (run with LD_LIBRARY_PATH=.carry/py/site/convtune/lib, where
#                              libconvtune_nn.so.0, the trainer it links beside libconvtune, is put for it)
#   .carry/py/data/            Fashion-MNIST as gzip IDX files: the first $TRAIN_IMAGES (20000) training images and
#                              all 10,000 test images (the full set would not fit the carry)
#   .carry/py/MANIFEST.txt     commit, date, Python used, sizes
# The extension is built here with a Python 3.12 ($PY312, default pyenv's) against $BUILD's library (default build/,
# brought up to date first). About 20 MB in all.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=.carry/py
DATA=${CONVTUNE_DATA:-/usr/share/datasets/fashion-mnist}
TRAIN_IMAGES=${TRAIN_IMAGES:-20000}
PY312=${PY312:-$(ls -d /root/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null | head -1)}
[ -x "${PY312:-}" ] || { echo "pack_python: no Python 3.12 or later found: set PY312" >&2; exit 2; }
BUILD=${BUILD:-build}
cmake --build "$BUILD" -j2 >/dev/null

# A build environment of that Python with the pinned build requirements, kept in build/ between runs.
ENV=$BUILD/py312-venv
[ -x "$ENV/bin/python" ] || "$PY312" -m venv "$ENV"
"$ENV/bin/python" -m pip install -q --disable-pip-version-check -r python/build-requirements.txt
rm -rf "$BUILD/py312-wheel"
"$ENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps . -w "$BUILD/py312-wheel" \
  --config-settings=cmake.define.CONVTUNE_LIBRARY="$PWD/$BUILD/lib/libconvtune.so.0"

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR/site" "$OUTDIR/bin" "$OUTDIR/data"
"$ENV/bin/python" -m zipfile -e "$BUILD"/py312-wheel/convtune-*-cp312-abi3-*.whl "$OUTDIR/site"
rm -rf "$OUTDIR"/site/*.dist-info
# The Debian dependencies the GPU machine may lack beside libconvtune (the package's lib/ is on its rpath): its own
# (Highway, fmt) and the command line's trainer's (libcrypto).
for lib in libhwy.so.1 libcrypto.so.3 libfmt.so.9; do cp -L "/lib/x86_64-linux-gnu/$lib" "$OUTDIR/site/convtune/lib/"; done
cp "$BUILD/convtune" "$OUTDIR/bin/"
# The command line also links the seed networks' trainer: beside libconvtune, where LD_LIBRARY_PATH finds both.
cp "$BUILD/lib/libconvtune_nn.so.0" "$OUTDIR/site/convtune/lib/"
"$ENV/bin/python" - "$DATA" "$OUTDIR/data" "$TRAIN_IMAGES" <<'PY'
import gzip, os, struct, sys
source, target, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
for split, count in (("train", limit), ("t10k", None)):
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        with gzip.open(os.path.join(source, f"{split}-{kind}.gz"), "rb") as f:
            data = f.read()
        magic, n = struct.unpack(">II", data[:8])
        dims = magic & 0xFF
        header = 4 + 4 * dims
        n = min(n, count or n)
        item = 1
        for d in struct.unpack(">" + "I" * (dims - 1), data[8:header]):
            item *= d
        with gzip.open(os.path.join(target, f"{split}-{kind}.gz"), "wb", compresslevel=6) as f:
            f.write(struct.pack(">II", magic, n) + data[8:header] + data[header:header + n * item])
PY
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.carry' || echo ' (with uncommitted changes)')"
  echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ) with $("$ENV/bin/python" --version)"
  echo "training images: first $TRAIN_IMAGES"
  (cd "$OUTDIR" && find . -type f -printf '%s %p\n' | sort -k2)
} >"$OUTDIR/MANIFEST.txt"
du -sh "$OUTDIR"
