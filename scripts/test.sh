#!/usr/bin/env bash
# Install everything the test suite needs, then run it. Extra arguments go to pytest.
#   scripts/test.sh                 # the whole suite
#   scripts/test.sh tests/unit -q   # a part of it
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# ki's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set, every `ki` process a test starts would
# otherwise compile the modules it imports anew (~0.15 s of CPU each).
.venv/bin/python -m compileall -q ki

# Outside services the tests use for real (each script is idempotent and caches its build
# outside the repository, under ${KI_CACHE_DIR:-$HOME/.cache/ki}).
# Every .ci/install_*.sh, in name order (add a component by adding its script).
for installer in .ci/install_*.sh; do
  bash "$installer"
done

exec .venv/bin/python -m pytest "$@"
