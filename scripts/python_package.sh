#!/usr/bin/env bash
# Installs the Python package into .venv (created with Debian's Python and its system packages, so Debian's numpy,
# pytest and PyTorch are there), built against the library in build/: only when its sources, the public headers,
# the library or the shipped data changed since the last install, so a second run costs a hash. Needs build/ built.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
LIBRARY=build/lib/libconvtune.so.0

if [ ! -e "$LIBRARY" ]; then
  echo "python_package: $LIBRARY is missing: build the library first (scripts/setup.sh)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  # Debian's Python is externally managed: the package lives in a virtual environment that also sees Debian's
  # numpy, pytest and torch (--system-site-packages) instead of downloading them again.
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-index -r python/build-requirements.txt \
     2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r python/build-requirements.txt
fi

# What the installed package is made of; a change to any of these reinstalls it.
stamp_file=$VENV/convtune-package.sha256
stamp=$( (find python include tuning bench/suites -type f \( -name '*.py' -o -name '*.cpp' -o -name '*.h' \
            -o -name '*.txt' -o -name '*.json' -o -name '*.typed' \) -print0 | sort -z | xargs -0 sha256sum
          sha256sum pyproject.toml "$(readlink -f "$LIBRARY")" | cut -d' ' -f1) | sha256sum | cut -d' ' -f1)
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] &&
   "$VENV/bin/python" -c "import convtune" 2>/dev/null; then
  exit 0
fi
echo "python_package: installing the convtune Python package into $VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps . \
  --config-settings=cmake.define.CONVTUNE_LIBRARY="$PWD/$LIBRARY"
echo "$stamp" >"$stamp_file"
