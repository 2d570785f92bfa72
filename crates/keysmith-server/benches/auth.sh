#!/usr/bin/env bash
# The cost of access control on `POST .../next`: two `keysmith serve`
# processes over their own SQLite files, one without an access file (no
# authentication at all) and one with an access file of 100 principals (the
# caller's grant a prefix among them), measured with wrk in alternating
# rounds in one run. Usage, from the workspace root:
#
#   cargo build --release -p keysmith-cli
#   crates/keysmith-server/benches/auth.sh [path/to/keysmith]
#
# Env: ROUNDS (default 3), SECS (seconds per row, default 10), CONNS (default 16).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-${CARGO_TARGET_DIR:-target}/release/keysmith}"
rounds="${ROUNDS:-3}" secs="${SECS:-10}" conns="${CONNS:-16}"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$bin" ] || { echo "no keysmith binary at $bin; build with cargo build --release -p keysmith-cli" >&2; exit 1; }

dir="$(mktemp -d)"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT

token=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
{
  for i in $(seq 1 99); do
    printf '[[principal]]\nname = "team-%d"\ntoken_sha256 = "%s"\ngrants = [ { names = "team-%d/*", actions = ["use", "read"] } ]\n\n' \
      "$i" "$(printf 'other-%d-%s' "$i" "$token" | "$bin" access hash)" "$i"
  done
  printf '[[principal]]\nname = "bench"\ntoken_sha256 = "%s"\ngrants = [ { names = "bench/*", actions = ["use", "read", "admin"] } ]\n' \
    "$(printf '%s' "$token" | "$bin" access hash)"
} >"$dir/access.toml"

start() { # name extra-args...: starts a server, its address in $dir/NAME.log
  local name=$1; shift
  "$bin" --store "sqlite://$dir/$name.db" serve --listen 127.0.0.1:0 "$@" >/dev/null 2>"$dir/$name.log" &
  pids+=($!)
}
base_of() { # name: the address the server printed
  for _ in $(seq 100); do grep -q 'listening on' "$dir/$1.log" && break; sleep 0.1; done
  grep -o 'http://[0-9.:]*' "$dir/$1.log" | head -1
}
start open
start auth --access-file "$dir/access.toml"
open_base=$(base_of open)
auth_base=$(base_of auth)
curl -fsS -d '{"name":"bench/s"}' "$open_base/v1/sequences" >/dev/null
curl -fsS -H "Authorization: Bearer $token" -d '{"name":"bench/s"}' "$auth_base/v1/sequences" >/dev/null

run() { # label base header...
  local label=$1 base=$2; shift 2
  local out
  out="$(WRK_METHOD=POST wrk -t1 -c"$conns" -d"$secs"s "$@" -s "$here/report.lua" "$base/v1/sequences/bench%2Fs/next" | grep '^RESULT')"
  echo "$label ${out#RESULT }"
}
echo "machine: $(nproc) cores; wrk -t1 -c$conns, $secs s a row; server: $bin (sqlite, default block 100, adaptive)"
# Warm-up of both.
WRK_METHOD=POST wrk -t1 -c4 -d2s -s "$here/report.lua" "$open_base/v1/sequences/bench%2Fs/next" >/dev/null
WRK_METHOD=POST wrk -t1 -c4 -d2s -H "Authorization: Bearer $token" -s "$here/report.lua" "$auth_base/v1/sequences/bench%2Fs/next" >/dev/null
# Odd rounds run the open server first, even rounds the other.
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    run "round $r  no access file        " "$open_base"
    run "round $r  access file, 100 principals" "$auth_base" -H "Authorization: Bearer $token"
  else
    run "round $r  access file, 100 principals" "$auth_base" -H "Authorization: Bearer $token"
    run "round $r  no access file        " "$open_base"
  fi
done
