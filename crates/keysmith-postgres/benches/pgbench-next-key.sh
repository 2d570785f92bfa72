#!/usr/bin/env bash
# keysmith.next_key() in an INSERT against nextval() in the same INSERT
# (issue 38), with pgbench, as a database team would try it.
#
# Starts a throwaway PostgreSQL on 127.0.0.1 (initdb defaults: fsync=on,
# synchronous_commit=on), creates the keysmith sequence `orders` (default
# block 100) with the `keysmith` binary, a native sequence `nat` (CACHE 1)
# and a table keyed by each, then runs pgbench alternating the two scripts
# (RUNS runs each, CLIENTS clients, THREADS threads, SECONDS s per run).
# Meanwhile `keysmith next` processes allocate from `orders` back to back;
# at the end their values are joined with the table's rows: none may be
# shared (the table's primary key already refuses a value twice).
#
# Usage: crates/keysmith-postgres/benches/pgbench-next-key.sh
#   KEYSMITH=path/to/keysmith (default: $CARGO_TARGET_DIR or target, release
#   then debug), PG_BIN (default: the newest /usr/lib/postgresql/*/bin),
#   CLIENTS=8 THREADS=2 RUN_SECONDS=8 RUNS=2 WARMUP_SECONDS=2 (one untimed
#   run of each script first: new tables, new sessions, the first blocks).
# Prints one line per run and the ratio of the means. Stops the server and
# removes its directory on exit.
set -euo pipefail

CLIENTS=${CLIENTS:-8}
THREADS=${THREADS:-2}
SECONDS_PER_RUN=${RUN_SECONDS:-8}
WARMUP_SECONDS=${WARMUP_SECONDS:-2}
RUNS=${RUNS:-2}
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
target=${CARGO_TARGET_DIR:-target}
if [ -z "${KEYSMITH:-}" ]; then
    for k in "$target/release/keysmith" "$target/debug/keysmith"; do
        if [ -x "$k" ]; then KEYSMITH=$k; break; fi
    done
fi
if [ -z "${KEYSMITH:-}" ] || [ ! -x "$KEYSMITH" ]; then
    echo "no keysmith binary: cargo build -p keysmith-cli, or set KEYSMITH=path" >&2
    exit 2
fi

dir=$(mktemp -d /tmp/keysmith-pgbench.XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then
    # PostgreSQL refuses to run as root.
    chown postgres "$dir"
    as_pg=(runuser -u postgres --)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
loader=
cleanup() {
    if [ -n "$loader" ]; then kill "$loader" 2>/dev/null || true; wait "$loader" 2>/dev/null || true; fi
    "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

"${as_pg[@]}" "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust >/dev/null
cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
EOF
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null

db="postgres://postgres@127.0.0.1:$port/postgres"
psql=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$db")
"$KEYSMITH" --store "$db" create orders >/dev/null
"${psql[@]}" <<'EOF'
CREATE TABLE orders (id bigint PRIMARY KEY, src text NOT NULL);
CREATE SEQUENCE nat CACHE 1;
CREATE TABLE nat_orders (id bigint PRIMARY KEY, src text NOT NULL);
EOF
echo "INSERT INTO orders VALUES (keysmith.next_key('orders'), 'sql');" >"$dir/next_key.sql"
echo "INSERT INTO nat_orders VALUES (nextval('nat'), 'sql');" >"$dir/nextval.sql"

# The library beside the SQL callers, from the same sequence.
# Stopped between two of its runs (a file flag), so no line is cut short.
(while [ ! -e "$dir/stop" ]; do "$KEYSMITH" --store "$db" next orders --count 200 || exit 1; done) >"$dir/outside" &
loader=$!

tps() {
    "$PG_BIN/pgbench" -n -c "$CLIENTS" -j "$THREADS" -T "${2:-$SECONDS_PER_RUN}" -f "$dir/$1.sql" \
        -h 127.0.0.1 -p "$port" -U postgres postgres 2>&1 |
        sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

echo "# $(date -u +%FT%TZ) PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'), $CLIENTS clients, $THREADS threads, ${SECONDS_PER_RUN}s per run, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$WARMUP_SECONDS" -gt 0 ]; then
    tps next_key "$WARMUP_SECONDS" >/dev/null
    tps nextval "$WARMUP_SECONDS" >/dev/null
fi
nk_sum=0
nv_sum=0
for run in $(seq 1 "$RUNS"); do
    nk=$(tps next_key)
    nv=$(tps nextval)
    echo "run $run: next_key $nk tps, nextval $nv tps"
    nk_sum=$(python3 -c "print($nk_sum + $nk)")
    nv_sum=$(python3 -c "print($nv_sum + $nv)")
done
touch "$dir/stop"
wait "$loader"
loader=

# Correctness: the rows, and the values `keysmith next` printed.
"${psql[@]}" -c "CREATE TABLE outside (id bigint PRIMARY KEY)" \
    -c "\\copy outside FROM '$dir/outside'"
shared=$("${psql[@]}" -At -c "SELECT count(*) FROM orders JOIN outside USING (id)")
rows=$("${psql[@]}" -At -c "SELECT count(*) FROM orders")
outside=$("${psql[@]}" -At -c "SELECT count(*) FROM outside")
python3 -c "print('next_key / nextval = %.2f (means %.0f / %.0f tps)' % ($nk_sum / $nv_sum, $nk_sum / $RUNS, $nv_sum / $RUNS))"
echo "$rows rows inserted with next_key, $outside values from keysmith next, $shared shared"
[ "$shared" = 0 ]
