#!/usr/bin/env bash
# bench/expire_bench.sh: how fast the background worker expires, and what it
# costs the claims running meanwhile.
#
# Starts a throwaway PostgreSQL 15 (as the postgres OS user, fsync on), fills
# idempotency_keys with DUE rows past expires_at and as many live ones, then
# runs the same pgbench claim load (test/workload/expire_claims.sql: a new key claimed
# and completed, and a live key replayed, per transaction; CLIENTS clients,
# RUN_SECONDS s, progress every second) three times:
#   1. worker off (idempotency.worker_databases = ''), due rows left alone;
#   2. worker switched on 2 s into the run (interval 100 ms, batch BATCH),
#      while it deletes the due rows;
#   3. worker off again.
# Prints the rows deleted per second (from switching it on until the last due
# row is gone), and the claim throughput in the seconds the worker was
# deleting, as a ratio to the seconds of run 2 it idled (before it was on,
# after it was done) and to runs 1 and 3.  A benchmark, not a test: nothing
# is asserted.
#   bash bench/expire_bench.sh     (DUE=200000 CLIENTS=4 RUN_SECONDS=25 BATCH=1000 BATCH_DELAY=20)
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh
DUE=${DUE:-200000}
CLIENTS=${CLIENTS:-4}
RUN_SECONDS=${RUN_SECONDS:-25}
BATCH=${BATCH:-1000}
BATCH_DELAY=${BATCH_DELAY:-20}

install_packages
build_and_install
make_workdir
PORT=$(free_port 57432)
trap 'stop_server "$WORK/data"; rm -rf "$WORK"' EXIT
start_server "$WORK/data" "$PORT"
sql() { as_postgres psql -X -q -At -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }
conf() { echo "$1" >>"$WORK/data/postgresql.conf"; as_postgres pg_ctl -D "$WORK/data" reload >/dev/null; sleep 0.5; }

# pgbench with progress every second; prints "<start epoch> <tps>" on its
# first line and "<seconds since start> <tps>" for each progress line.
claims() {
	local start
	start=$(date +%s.%N)
	echo "$start"
	(cd "$WORK" && as_postgres pgbench -n -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -j 2 -T "$RUN_SECONDS" -P 1 \
		-D live_rows="$DUE" -f "$WORK/test/workload/expire_claims.sql" postgres 2>&1) |
		sed -n -e 's/^tps = \([0-9.]*\).*/total \1/p' -e 's/^progress: \([0-9.]*\) s, \([0-9.]*\) tps.*/\1 \2/p'
}

sql -c "CREATE EXTENSION idempotency"
conf "idempotency.worker_databases = ''"
conf "idempotency.worker_batch_size = $BATCH"
conf "idempotency.worker_batch_delay = '${BATCH_DELAY}ms'"
conf "idempotency.worker_interval = '100ms'"
for scope in live due; do
	[ "$scope" = live ] && expires="now() + interval '1 day'" || expires="now() - interval '1 s'"
	sql -c "INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, response, due_at)
	        SELECT '$scope', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(), $expires, 200, '{\"payment_id\": 1}', $expires
	        FROM generate_series(1, $DUE) i"
done
sql -c "VACUUM ANALYZE idempotency_keys"
sql -c "CHECKPOINT"

say "run 1: claims, worker off"
claims >"$WORK/run1"

say "run 2: claims; 2 s in, the worker starts deleting $DUE due rows (batch $BATCH)"
sql -c "SELECT idem_stats_reset()" >/dev/null
claims >"$WORK/run2" &
sleep 2
on=$(date +%s.%N)
conf "idempotency.worker_databases = 'postgres'"
until [ "$(sql -c "SELECT count(*) FROM idempotency_keys WHERE scope = 'due'")" = 0 ]; do sleep 0.05; done
done_at=$(date +%s.%N)
wait
read -r deleted maxbatch errors < <(sql -F ' ' -c "SELECT rows_deleted, max_batch_rows, worker_errors FROM idempotency_stats")

say "run 3: claims, worker off again"
conf "idempotency.worker_databases = ''"
claims >"$WORK/run3"

say "results ($(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(sql -c 'SHOW server_version'), fsync on, $CLIENTS clients)"
awk -v on="$on" -v done_at="$done_at" -v n="$deleted" -v mb="$maxbatch" -v errs="$errors" '
FNR == 1 { start[FILENAME] = $1; next }
$1 == "total" { total[FILENAME] = $2; next }
{
	# progress line: $1 s since start, $2 tps over the second before it
	t = start[FILENAME] + $1
	if (FILENAME ~ /run2$/) {
		if (t - 1 >= on && t <= done_at) { during += $2; nd++ }
		else if (t <= on || t - 1 >= done_at) { quiet += $2; nq++ }
	}
}
END {
	for (f in total) if (f ~ /run1$/) t1 = total[f]; else if (f ~ /run3$/) t3 = total[f]; else t2 = total[f]
	base = (t1 + t3) / 2
	printf "claim tps, worker off:            %.0f and %.0f (runs 1 and 3)\n", t1, t3
	printf "claim tps, run 2 as a whole:      %.0f, ratio to runs 1 and 3: %.2f\n", t2, t2 / base
	if (nq > 0)
		printf "run 2, seconds the worker idled:  %.0f tps (mean of %d one-second samples)\n", quiet / nq, nq
	if (nd > 0) {
		printf "run 2, seconds it was deleting:   %.0f tps (mean of %d one-second samples)\n", during / nd, nd
		printf "claim throughput while deleting:  %.2f of run 2 idle seconds, %.2f of runs 1 and 3\n", (nq > 0 ? (during / nd) / (quiet / nq) : 0), (during / nd) / base
	} else
		printf "run 2, seconds it was deleting:   (under a second: no full sample)\n"
	printf "rows deleted:                     %d in %.1f s = %.0f rows/s (largest batch %d, failed passes %d)\n", n, done_at - on, n / (done_at - on), mb, errs
}' "$WORK/run1" "$WORK/run2" "$WORK/run3"
