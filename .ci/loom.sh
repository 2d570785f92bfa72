#!/usr/bin/env bash
# The loom model check of the block cache (crates/keysmith-core/src/sequence/
# cache.rs, `mod loom_tests`): every interleaving of its takers and installs
# within a preemption bound. Its own target dir: the cfg changes every crate's
# build, and must not invalidate the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
RUSTFLAGS="--cfg keysmith_loom" CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}" \
  cargo test -p keysmith-core --lib --release loom -- --test-threads 1
