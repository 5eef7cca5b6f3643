#!/usr/bin/env bash
# bench/run.sh: the benchmark.  One command, one throwaway server, every variant.
#
#   bash bench/run.sh            (CLIENTS=8 RUN_SECONDS=8 ROUNDS=3)
#
# Starts PostgreSQL 15 as the postgres OS user (fsync on, synchronous_commit
# on, shared_preload_libraries = idempotency, loopback TCP), then runs each
# variant with pgbench (-M prepared, CLIENTS clients) for RUN_SECONDS, ROUNDS
# times in alternating order, and prints the median throughput, p50/p99
# latency, WAL bytes per request, and the ratio to the floor (a plain INSERT
# into an indexed payments table) from the same run:
#   new keys:   floor, INSERT ... ON CONFLICT DO NOTHING, PL/pgSQL reference
#               (5 round trips), idem_claim + INSERT + idem_complete (5 round
#               trips), idem_execute (1 round trip)
#   replays:    PL/pgSQL reference, idem_claim, idem_execute (1 round trip each)
#   contention: idem_execute with all clients racing 4 keys; then checks
#               exactly-once: one payment per key, each key's response naming it.
# The Redis design of the seeds is not in this run: pgbench cannot drive it,
# and a fair comparison needs a second driver (left for later).
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh
CLIENTS=${CLIENTS:-8}
RUN_SECONDS=${RUN_SECONDS:-8}
ROUNDS=${ROUNDS:-3}

install_packages
build_and_install
make_workdir
PORT=$(free_port 58432)
trap 'stop_server "$WORK/data"; rm -rf "$WORK"' EXIT
start_server "$WORK/data" "$PORT"
echo "synchronous_commit = on" >>"$WORK/data/postgresql.conf"
echo "idempotency.worker_databases = ''" >>"$WORK/data/postgresql.conf"
as_postgres pg_ctl -D "$WORK/data" reload >/dev/null
sql() { as_postgres psql -X -q -At -h 127.0.0.1 -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }

sql -c "CREATE EXTENSION idempotency" \
	-c "CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL)" \
	-c "CREATE INDEX ON payments (order_id)" \
	-c "CREATE TABLE payments_uk (id bigserial PRIMARY KEY, key text NOT NULL UNIQUE, amount int NOT NULL)" \
	-c "CREATE TABLE payments_c (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL)" \
	-f bench/plpgsql_reference.sql
# 10,000 completed keys to replay, for the reference and for the extension
sql -c "SELECT count(*) FROM generate_series(1, 10000) i, ref_claim('r' || i, '{\"order\": \"A1\", \"amount\": 100}')" \
	-c "SELECT count(*) FROM generate_series(1, 10000) i, ref_complete('r' || i, 201, jsonb_build_object('payment_id', i))" \
	-c "SELECT count(*) FROM generate_series(1, 10000) i,
	    idem_execute('r' || i, '{\"order\": \"A1\", \"amount\": 100}', 'replay', 201, 'SELECT \$1::int AS payment_id', i)" \
	-c "VACUUM ANALYZE" >/dev/null

# one run of a variant: "tps p50_ms p99_ms wal_bytes_per_request"
run_variant()
{
	local script=$1 dir="$WORK/log_$1_$RANDOM" lsn0 lsn1 out
	mkdir -p "$dir" && chown postgres "$dir"
	lsn0=$(sql -c "SELECT pg_current_wal_lsn()")
	out=$(cd "$dir" && as_postgres pgbench -n -M prepared -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -j 2 \
		-T "$RUN_SECONDS" -l -f "$WORK/bench/scripts/$script.sql" postgres 2>&1)
	lsn1=$(sql -c "SELECT pg_current_wal_lsn()")
	local tps n wal
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
	n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	wal=$(sql -c "SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / greatest($n, 1))")
	# per-transaction latency (microseconds) is the third field of pgbench's log
	cat "$dir"/pgbench_log.* | awk '{print $3}' | sort -n | awk -v tps="$tps" -v wal="$wal" '
		{ a[NR] = $1 } END { printf "%s %.2f %.2f %s\n", tps, a[int(NR * 0.50)] / 1000, a[int(NR * 0.99)] / 1000, wal }'
	rm -rf "$dir"
}

VARIANTS="floor on_conflict plpgsql_new claim_new execute_new plpgsql_replay claim_replay execute_replay"
declare -A results
for round in $(seq 1 "$ROUNDS"); do
	say "round $round of $ROUNDS"
	order=$VARIANTS
	[ $((round % 2)) -eq 0 ] && order=$(tr ' ' '\n' <<<"$VARIANTS" | tac | tr '\n' ' ')
	for v in $order; do
		r=$(run_variant "$v")
		echo "  $v: $r"
		results[$v]="${results[$v]:-}$r"$'\n'
	done
done

say "contention: $CLIENTS clients race 4 keys with idem_execute"
c=$(run_variant execute_contention)
check=$(sql -c "SELECT
	(SELECT count(*) FROM (SELECT key FROM payments_c GROUP BY key HAVING count(*) > 1) d) || ' ' ||
	(SELECT count(*) FROM idempotency_keys k WHERE k.scope = 'contention' AND NOT EXISTS
	   (SELECT FROM payments_c p WHERE p.key = k.key AND p.id = (k.response->>'payment_id')::bigint)) || ' ' ||
	(SELECT count(*) FROM payments_c) || ' ' ||
	(SELECT count(*) FROM idempotency_keys WHERE scope = 'contention')")
read -r dup orphan npay nkeys <<<"$check"
exactly_once=FAILED
[ "$dup" = 0 ] && [ "$orphan" = 0 ] && [ "$npay" = "$nkeys" ] && exactly_once=held

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
col() { awk -v c="$2" '{print $c}' <<<"${results[$1]}" | grep . | median; }

say "results: $(date -u +%Y-%m-%d), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, PostgreSQL $(sql -c 'SHOW server_version' | cut -d' ' -f1), fsync on, synchronous_commit on, $CLIENTS clients over loopback TCP, pgbench -M prepared, median of $ROUNDS x ${RUN_SECONDS}s"
floor=$(col floor 1)
printf '%-16s %-12s %10s %8s %8s %8s %10s\n' variant mode tps ratio p50_ms p99_ms wal_B/req
for v in $VARIANTS; do
	mode=new; case $v in *replay) mode=replay ;; esac
	t=$(col "$v" 1)
	printf '%-16s %-12s %10.0f %8.2f %8s %8s %10s\n' "${v%_new}" "$mode" "$t" "$(awk -v a="$t" -v b="$floor" 'BEGIN {print a / b}')" \
		"$(col "$v" 2)" "$(col "$v" 3)" "$(col "$v" 4)"
done
read -r ct cp50 cp99 cwal <<<"$c"
printf '%-16s %-12s %10.0f %8.2f %8s %8s %10s\n' execute contention "$ct" "$(awk -v a="$ct" -v b="$floor" 'BEGIN {print a / b}')" "$cp50" "$cp99" "$cwal"
echo "contention exactly-once: $exactly_once ($npay payments for $nkeys keys, $dup keys paid twice, $orphan keys without their payment)"
bytes=$(sql -c "SELECT round(pg_total_relation_size('idempotency_keys')::numeric / count(*)) FROM idempotency_keys")
echo "idempotency_keys: $bytes bytes per key (table + indexes, as loaded by this run)"
[ "$exactly_once" = held ]
