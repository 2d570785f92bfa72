#!/usr/bin/env bash
# HTTP benchmarks of `keysmith serve` with wrk (Debian's package), all in one
# run on one machine. Usage, from the workspace root:
#
#   cargo build --release -p keysmith-cli
#   crates/keysmith-server/benches/http.sh [path/to/keysmith]
#
# Env: THREADS (wrk threads, default 1), CONNS (connections, default 16),
# SECS (seconds per throughput run, default 10), SOAK_SECS (memory run, default 60).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-${CARGO_TARGET_DIR:-target}/release/keysmith}"
threads="${THREADS:-1}" conns="${CONNS:-16}" secs="${SECS:-10}" soak="${SOAK_SECS:-60}"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$bin" ] || { echo "no keysmith binary at $bin; build with cargo build --release -p keysmith-cli" >&2; exit 1; }

dir="$(mktemp -d)"
log="$dir/server.log"
"$bin" --store "sqlite://$dir/bench.db" serve --listen 127.0.0.1:0 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q 'listening on' "$log" && break; sleep 0.1; done
base="$(grep -o 'http://[0-9.:]*' "$log" | head -1)"
[ -n "$base" ] || { cat "$log" >&2; exit 1; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }

curl -fsS -d '{"name":"bench"}' "$base/v1/sequences" >/dev/null
curl -fsS -d '{"name":"soak"}' "$base/v1/sequences" >/dev/null
rss_start="$(rss)"

run() { # label method url seconds
  local out
  out="$(WRK_METHOD="$2" wrk -t"$threads" -c"$conns" -d"$4"s -s "$here/report.lua" "$3" | grep '^RESULT')"
  echo "$1 ${out#RESULT }"
}

echo "machine: $(nproc) cores; wrk -t$threads -c$conns; server: $bin (sqlite, default block 100, adaptive to 10000)"
WRK_METHOD=POST wrk -t1 -c4 -d2s -s "$here/report.lua" "$base/v1/sequences/bench/next" >/dev/null # warm-up
run "ceiling GET /livez            " GET  "$base/livez" "$secs"
run "next count=1                  " POST "$base/v1/sequences/bench/next" "$secs"
run "next count=1000               " POST "$base/v1/sequences/bench/next?count=1000" "$secs"
rss_before_soak="$(rss)"
run "soak next count=1 (${soak}s)    " POST "$base/v1/sequences/soak/next" "$soak"
rss_end="$(rss)"
echo "rss_kib start=$rss_start before_soak=$rss_before_soak after_soak=$rss_end"
curl -fsS "$base/v1/sequences/soak" | sed 's/^/soak sequence: /'; echo

kill -TERM "$pid"
wait "$pid" && echo "server exited 0 after SIGTERM"
