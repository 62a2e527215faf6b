#!/usr/bin/env bash
# Re-record the multi-run pgbench outputs of this directory (`multi-*-pg15.txt`, see README.md)
# with the installed PostgreSQL 15, as record-pg15.sh does: each file holds several pgbench
# invocations, one after the other, as a shell loop appends them to one file.
# Usage (as root): tests/data/pgbench/record-multi-pg15.sh OUTPUT_DIR
set -euo pipefail
BIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUT=$(realpath "${1:?output directory}")
mkdir -p "$OUT"
BASE=$(mktemp -d /var/tmp/howfast-rec-XXXXXX)
chmod 755 "$BASE"
chown postgres:postgres "$BASE"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
DEAD_PORT=$(free_port)
as_pg() { runuser -u postgres -- env PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres "$@"; }
as_pg "$BIN/initdb" -D "$BASE/data" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
as_pg "$BIN/pg_ctl" -D "$BASE/data" -l "$BASE/log" -w start \
    -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$BASE -c fsync=off" >/dev/null
trap 'as_pg "$BIN/pg_ctl" -D "$BASE/data" -m immediate -w stop >/dev/null; rm -rf "$BASE"' EXIT
as_pg "$BIN/createdb" bench
WORK="$BASE/work"
mkdir "$WORK"
as_pg "$BIN/pgbench" -i -s 2 -q bench >/dev/null 2>&1
cd "$BASE"
# four runs appended to one file, no command echoed
for c in 1 2 4 8; do
    as_pg "$BIN/pgbench" -c "$c" -j 1 -T 2 -P 1 -r bench >> "$OUT/multi-four-runs-pg15.txt" 2>&1
done
# a rate curve under `set -x`: each command echoed before its output
(
    set -x
    for rate in 100 200 400 800; do
        as_pg "$BIN/pgbench" -R "$rate" -L 5 -c 4 -j 2 -T 2 -P 1 bench
    done
) > "$OUT/multi-rate-curve-pg15.txt" 2>&1
# an init, a run, a run that cannot connect, a run
(
    set -x
    as_pg "$BIN/pgbench" -i -s 2 bench
    as_pg "$BIN/pgbench" -c 2 -j 1 -T 2 bench
    as_pg "$BIN/pgbench" -p "$DEAD_PORT" -c 2 -j 1 -T 2 bench || true
    as_pg "$BIN/pgbench" -b select-only -c 4 -j 2 -T 2 bench
) > "$OUT/multi-init-runs-refused-pg15.txt" 2>&1
# an init with server-side generation, a fillfactor and partitions, its command echoed
(
    set -x
    as_pg "$BIN/pgbench" -i -s 2 -F 90 --partitions=4 -I dtGvp bench
) > "$OUT/init-server-partitions-pg15.txt" 2>&1
