#!/usr/bin/env bash
# The loom model check of the block cache (crates/keysmith-core/src/sequence/
# cache.rs, `mod loom_tests`): every interleaving of its takers and installs
# within a preemption bound. Its own target dir: the cfg changes every crate's
# build, and must not invalidate the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each test sets its preemption bound (2; 1 with three takers);
# LOOM_MAX_PREEMPTIONS overrides them all. The three-taker test is left out
# of CI (it ran past 7 minutes on a loaded machine): run it by hand with
# LOOM_ALL=1.
RUSTFLAGS="--cfg keysmith_loom" CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}" \
  cargo test -p keysmith-core --lib --release loom -- --test-threads 1 \
  $([ -n "${LOOM_ALL:-}" ] || echo --skip loom_three_takers)
