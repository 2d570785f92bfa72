#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time on the nightly
# toolchain, each from its seeds committed in fuzz/seeds/TARGET (a few small
# inputs); what a run finds goes to fuzz/corpus/TARGET, not committed. A crash fails the
# script and its input is copied to fuzz/regressions/TARGET/, which
# crates/keysmith/tests/fuzz_regressions.rs replays in every `cargo test`:
# commit it with the fix.
#
# FUZZ_SECONDS: seconds per target (default 20). FUZZ_TARGET_DIR: the build
# directory (default target/fuzz: a sanitizer build of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
toolchain="${FUZZ_TOOLCHAIN:-nightly}"

if ! cargo +"$toolchain" fuzz --version >/dev/null 2>&1; then
  cargo +"$toolchain" install --locked cargo-fuzz
fi

export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/target/fuzz}"
cd fuzz
targets=$(cargo +"$toolchain" fuzz list)
build_start=$(date +%s)
cargo +"$toolchain" fuzz build --release
echo "fuzz: build $(( $(date +%s) - build_start ))s"

failed=0
for t in $targets; do
  mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
  start=$(date +%s)
  if ! cargo +"$toolchain" fuzz run --release "$t" "corpus/$t" "seeds/$t" -- \
      -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 \
      -artifact_prefix="artifacts/$t/" >"artifacts/$t.log" 2>&1; then
    failed=1
    mkdir -p "regressions/$t"
    for a in "artifacts/$t"/*; do
      [ -f "$a" ] && cp "$a" "regressions/$t/" && echo "fuzz: $t crashed on $a (kept in fuzz/regressions/$t/)"
    done
    tail -40 "artifacts/$t.log"
  fi
  echo "fuzz: $t $(( $(date +%s) - start ))s"
done
exit "$failed"
