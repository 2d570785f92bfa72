#!/usr/bin/env bash
# The user guide (docs/book): install the pinned mdbook if missing, build the
# book with warnings as errors, then check every relative link and anchor of
# the built book and of the repository's Markdown front pages, offline.
# The guide's shell examples are run by cargo test
# (crates/keysmith-cli/tests/book_examples.rs), its route list checked by
# crates/keysmith-server/tests/book_api.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
# Where the book is built: beside the build, never in the source tree.
out="${CARGO_TARGET_DIR:-target}/book"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

# cargo install puts it here; this may not be on PATH on a fresh machine.
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"
if ! command -v mdbook >/dev/null 2>&1 || [ "$(mdbook --version)" != "mdbook v$MDBOOK_VERSION" ]; then
  # From crates.io, built from source (about 4 minutes on 2 cores); only the
  # search feature: no file watcher or web server is needed to build.
  echo "book: installing mdbook $MDBOOK_VERSION"
  cargo install mdbook --locked --version "$MDBOOK_VERSION" --no-default-features --features search
fi
[ "$(mdbook --version)" = "mdbook v$MDBOOK_VERSION" ] || { echo "book: mdbook $MDBOOK_VERSION is not the mdbook on PATH ($(command -v mdbook))" >&2; exit 1; }

echo "book: mdbook build docs/book -> $out"
rm -rf "$out"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# mdbook has no switch that makes warnings fail the build: any WARN or ERROR
# line it prints (a missing include, a chapter it cannot read) does.
if ! mdbook build docs/book -d "$out" 2>&1 | tee "$log" >&2; then
  echo "book: mdbook build failed" >&2
  exit 1
fi
if grep -E '(WARN|ERROR)' "$log" >/dev/null; then
  echo "book: mdbook printed warnings (above); they count as errors" >&2
  exit 1
fi

echo "book: relative links and anchors"
python3 .ci/check-links.py --html "$out" \
  README.md BENCHMARKS.md CONTRIBUTING.md ARCHITECTURE.md SCALING.md CHANGELOG.md \
  docs/bench/*.md clients/*/README.md
