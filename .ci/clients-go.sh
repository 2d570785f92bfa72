#!/usr/bin/env bash
# The Go client's checks: gofmt, go vet and go test against real `keysmith
# serve` processes started from $KEYSMITH_BIN (required).
#
# Go comes from Debian (golang-go, Go 1.19: the client uses the standard
# library only and builds with it); installed here when missing (as root, the
# way .ci/run installs its packages). clients/tls-test-certs.sh needs openssl.
set -euo pipefail
cd "$(dirname "$0")/../clients/go"

[ -n "${KEYSMITH_BIN:-}" ] || { echo "clients-go: set KEYSMITH_BIN to a keysmith binary (cargo build -p keysmith-cli)" >&2; exit 2; }
KEYSMITH_BIN=$(realpath "$KEYSMITH_BIN")
export KEYSMITH_BIN

if ! command -v go >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { echo "clients-go: go not found and not root: run 'sudo apt-get install golang-go' first" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends golang-go >/dev/null
fi
for tool in openssl bash; do
  command -v "$tool" >/dev/null 2>&1 || { echo "clients-go: $tool not found" >&2; exit 1; }
done
go version

# No module downloads: the client needs none (standard library only).
export GOPROXY=off GOTOOLCHAIN=local

unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "clients-go: not gofmt'd: $unformatted" >&2; exit 1; }
go vet ./...
# -race: the client is shared by many goroutines in the tests (needs cgo and cc)
go test -count=1 -race ./...
