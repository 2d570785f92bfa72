#!/usr/bin/env bash
# Installs, builds and tests the TypeScript client (@keysmith/client) against
# a real `keysmith serve` that the tests start. Uses $KEYSMITH_BIN when set,
# else builds the CLI (debug) from this workspace. Exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [[ -z "${KEYSMITH_BIN:-}" ]]; then
  (cd "$root" && cargo build -p keysmith-cli)
  KEYSMITH_BIN="${CARGO_TARGET_DIR:-$root/target}/debug/keysmith"
fi
KEYSMITH_BIN=$(realpath "$KEYSMITH_BIN")
export KEYSMITH_BIN
cd "$here"
npm ci --no-audit --no-fund
npm run build
node --test --test-concurrency=1 test/*.test.mjs
