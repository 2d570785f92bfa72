#!/usr/bin/env bash
# Tests of the Python client against real `keysmith serve` processes.
# Creates clients/python/.venv if missing, installs the package with its test
# extras, type-checks it (mypy --strict) and runs pytest. The tests build the
# server with `cargo build -p keysmith-cli` unless $KEYSMITH_BIN names a binary.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
.venv/bin/python -m mypy
.venv/bin/python -m pytest "$@"
