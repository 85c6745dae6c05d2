#!/usr/bin/env bash
# ctest's python_tests: brings the Python package in .venv up to date with build/ (scripts/python_package.sh, a
# no-op when nothing changed), then runs its tests (python/tests) with pytest. Skipped (exit 77) where Debian's
# venv module is missing, i.e. on a machine scripts/setup.sh has not prepared.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null; then
  echo "python_tests: skipped: Debian's python3-venv is not installed (scripts/setup.sh installs it)"
  exit 77
fi
scripts/python_package.sh || exit 1
exec .venv/bin/python -m pytest -q -p no:cacheprovider python/tests "$@"
