#!/usr/bin/env bash
# Re-record the real pgbench outputs of this directory (see README.md) with the installed
# PostgreSQL 15: a throwaway cluster in /var/tmp, run as the postgres OS user, stopped and removed
# on exit. Usage (as root): tests/data/pgbench/record-pg15.sh OUTPUT_DIR
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
cat > "$WORK/custom.sql" <<'SQL'
\set aid random(1, 100000 * :scale)
\set delta random(-5000, 5000)
BEGIN;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_accounts SET abalance = abalance + :delta, filler = 'howfast-recording-with-a-deliberately-long-statement-to-test-line-wrapping' WHERE aid = :aid;
END;
SQL
cat > "$WORK/hot.sql" <<'SQL'
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT sum(bbalance) FROM pgbench_branches;
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;
END;
SQL
printf 'SELECT 1;\nSELECT 1/0;\n' > "$WORK/bad.sql"
chown -R postgres "$WORK"
rec() {  # rec FILE ARGS...: stdout and stderr of one pgbench, as a terminal interleaves them
    local name=$1; shift
    (cd "$WORK" && as_pg "$BIN/pgbench" "$@") > "$OUT/$name" 2>&1 || true
}
rec init-client-pg15.txt -i -s 2 bench
rec init-server-fkeys-pg15.txt -i -s 2 -I dtGvpf bench
rec init-quiet-pg15.txt -i -q -s 2 bench
rec run-tpcb-pg15.txt -c 4 -j 2 -T 5 -P 1 -r bench
rec run-select-only-pg15.txt -b select-only -c 4 -j 2 -T 3 -P 1 -r bench
rec run-simple-update-pg15.txt -b simple-update -c 2 -j 1 -T 3 -P 1 -r -M prepared bench
rec run-rate-limit-pg15.txt -c 4 -j 2 -T 4 -P 1 -r -R 800 -L 2 bench
rec run-custom-pg15.txt -f custom.sql -c 2 -j 2 -T 3 -P 1 -r bench
rec run-multi-pg15.txt -b select-only@1 -b tpcb-like@1 -c 4 -j 2 -T 3 -P 1 -r bench
rec run-t-pg15.txt -c 2 -j 1 -t 1000 -r bench
rec run-connect-pg15.txt -C -c 2 -j 1 -T 2 bench
rec run-retries-pg15.txt -f hot.sql -c 8 -j 2 -T 3 -P 1 -r --max-tries=3 --failures-detailed bench
rec run-aborted-pg15.txt -f bad.sql -c 2 -j 1 -T 2 -r bench
rec run-refused-pg15.txt -p "$DEAD_PORT" -c 2 -T 2 bench
rec run-notinit-pg15.txt -c 1 -T 1 postgres
rec run-log-small-pg15.txt -c 2 -j 2 -t 20 -l --log-prefix=txlog-small-pg15.log bench
rec run-log-lag-pg15.txt -c 2 -j 1 -T 2 -R 100 -L 5 -l --log-prefix=txlog-lag-pg15.log bench
rec run-log-agg-pg15.txt -c 2 -j 1 -T 4 -R 300 -l --aggregate-interval=1 \
    --log-prefix=txlog-agg-pg15.log bench
rec run-log-fail-pg15.txt -f hot.sql -c 6 -j 1 -T 2 -l --max-tries=2 --failures-detailed \
    --log-prefix=txlog-fail-pg15.log bench
cp "$WORK"/txlog-*.log.* "$OUT"/
