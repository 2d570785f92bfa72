#!/usr/bin/env bash
# The Go client's benchmark (cmd/bench) against a running server without a token:
#   clients/go/bench.sh --url URL --sequence NAME --seconds S --threads N
# prints "<case>\t<per_second>" lines only (see cmd/bench/main.go).
set -euo pipefail
cd "$(dirname "$0")"
export GOPROXY=off GOTOOLCHAIN=local
go build -o "${TMPDIR:-/tmp}/keysmith-go-bench.$$" ./cmd/bench
trap 'rm -f "${TMPDIR:-/tmp}/keysmith-go-bench.$$"' EXIT
"${TMPDIR:-/tmp}/keysmith-go-bench.$$" "$@"
