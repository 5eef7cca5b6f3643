#!/usr/bin/env bash
# bench/expire_bench.sh: what the background worker costs and how fast it expires.
#
# Starts a throwaway PostgreSQL 15 (as the postgres OS user, fsync on), fills
# idempotency_keys with DUE rows past expires_at and as many live ones, then
# runs the same pgbench claim load (CLIENTS clients, RUN_SECONDS s) three times:
#   1. worker off (idempotency.worker_databases = ''), due rows left alone;
#   2. worker on (interval 100 ms, batch BATCH), while it deletes the due rows;
#   3. worker off again.
# Prints the rows expired per second (until the last due row is gone) and the
# claim throughput of run 2 as a ratio to the mean of runs 1 and 3.  A benchmark, not a test: nothing is asserted.
#   bash bench/expire_bench.sh            (DUE=200000 CLIENTS=4 RUN_SECONDS=20 BATCH=1000)
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh
DUE=${DUE:-200000}
CLIENTS=${CLIENTS:-4}
RUN_SECONDS=${RUN_SECONDS:-20}
BATCH=${BATCH:-1000}

install_packages
build_and_install
make_workdir
PORT=$(free_port 57432)
trap 'stop_server "$WORK/data"; rm -rf "$WORK"' EXIT
start_server "$WORK/data" "$PORT"
sql() { as_postgres psql -X -q -At -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }
conf() { echo "$1" >>"$WORK/data/postgresql.conf"; as_postgres pg_ctl -D "$WORK/data" reload >/dev/null; sleep 1; }

cat >"$WORK/claims.sql" <<'SQL'
\set k random(1, 1000000000)
SELECT outcome FROM idem_claim('c' || :client_id || '-' || :k, '{"amount": 100}', 'claims', retention => '1 day');
SQL
chown postgres "$WORK/claims.sql"

fill() {
	sql -c "INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, response)
	        SELECT 'due', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() - interval '1 s', 200, '{\"payment_id\": 1}'
	        FROM generate_series(1, $DUE) i"
}
tps() {
	(cd "$WORK" && as_postgres pgbench -n -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -j 2 -T "$RUN_SECONDS" -f "$WORK/claims.sql" postgres 2>&1) |
		sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

sql -c "CREATE EXTENSION idempotency"
conf "idempotency.worker_databases = ''"
sql -c "INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, response)
        SELECT 'live', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), now() + interval '1 day', 200, '{\"payment_id\": 1}'
        FROM generate_series(1, $DUE) i"
fill
sql -c "VACUUM ANALYZE idempotency_keys"

say "run 1: claims, worker off"
base1=$(tps)

say "run 2: claims while the worker deletes $DUE due rows (batch $BATCH)"
sql -c "SELECT idem_stats_reset()" >/dev/null
conf "idempotency.worker_batch_size = $BATCH"
conf "idempotency.worker_interval = '100ms'"
start=$(date +%s.%N)
conf "idempotency.worker_databases = 'postgres'"
# note when the last due row is gone, while the claims run
(until [ "$(sql -c "SELECT count(*) FROM idempotency_keys WHERE scope = 'due'")" = 0 ]; do sleep 0.1; done
 date +%s.%N >"$WORK/done") &
with=$(tps)
wait
end=$(cat "$WORK/done")
read -r deleted maxbatch < <(sql -F ' ' -c "SELECT rows_deleted, max_batch_rows FROM idempotency_stats")

say "run 3: claims, worker off again"
conf "idempotency.worker_databases = ''"
base2=$(tps)

say "results ($(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(sql -c 'SHOW server_version'), fsync on)"
awk -v b1="$base1" -v b2="$base2" -v with="$with" -v n="$deleted" -v s="$start" -v e="$end" -v mb="$maxbatch" -v c="$CLIENTS" 'BEGIN {
	base = (b1 + b2) / 2
	printf "claim tps, worker off:         %.0f and %.0f (%d clients)\n", b1, b2, c
	printf "claim tps, worker expiring:    %.0f\n", with
	printf "ratio (worker on / off):       %.2f\n", with / base
	printf "rows deleted:                  %d in %.1f s = %.0f rows/s (largest batch %d)\n", n, e - s, n / (e - s), mb
}'
