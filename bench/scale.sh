#!/usr/bin/env bash
# bench/scale.sh: does claim latency hold as the table grows?
#
# Starts a throwaway PostgreSQL 15 (as the postgres OS user, fsync on),
# measures p50/p99 latency of replays (idem_claim of a completed key) and of
# new keys (idem_execute) with SMALL completed keys in idempotency_keys, then
# grows the table to LARGE keys and measures again.  Prints the ratios.
#   bash bench/scale.sh      (SMALL=100000 LARGE=10000000 CLIENTS=8 RUN_SECONDS=10)
# 10 million keys take about 3 GB and a few minutes to load.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh
SMALL=${SMALL:-100000}
LARGE=${LARGE:-10000000}
CLIENTS=${CLIENTS:-8}
RUN_SECONDS=${RUN_SECONDS:-10}

install_packages
build_and_install
make_workdir
PORT=$(free_port 60432)
trap 'stop_server "$WORK/data"; rm -rf "$WORK"' EXIT
start_server "$WORK/data" "$PORT"
cat >>"$WORK/data/postgresql.conf" <<CONF
idempotency.worker_databases = ''
shared_buffers = 2GB
max_wal_size = 8GB
CONF
as_postgres pg_ctl -D "$WORK/data" -w restart -l "$WORK/data/server.log" >/dev/null
sql() { as_postgres psql -X -q -At -h 127.0.0.1 -p "$PORT" -d postgres -v ON_ERROR_STOP=1 "$@"; }
sql -c "CREATE EXTENSION idempotency" \
	-c "CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL)"

fill() {   # completed keys k<from>..k<to>, as idem_execute would leave them
	sql -c "INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at,
	        request_hash, response_code, response)
	        SELECT 'm42', 'key-' || i, 'completed', i, now(), now(), now() + interval '1 day',
	               idem_request_hash(jsonb_build_object('order', i)), 201, jsonb_build_object('payment_id', i)
	        FROM generate_series($1, $2) i" -c "VACUUM ANALYZE idempotency_keys"
	sql -c "SELECT setval('idempotency_token_seq', $2)" >/dev/null
}

cat >"$WORK/replay.sql" <<SQL
\set i random(1, :n)
SELECT outcome FROM idem_claim('key-' || :i, jsonb_build_object('order', :i::int), 'm42');
SQL
cat >"$WORK/new.sql" <<'SQL'
\set r random(1, 1000000000000)
SELECT outcome FROM idem_execute('new-' || :client_id || '-' || :r, NULL, 'm42', 201,
    'INSERT INTO payments (order_id, amount) VALUES ($1, 1) RETURNING id', 'o');
SQL
chown postgres "$WORK"/*.sql

measure() {   # script, keys: "p50 p99 tps"
	local dir="$WORK/log$RANDOM" out
	mkdir "$dir" && chown postgres "$dir"
	out=$(cd "$dir" && as_postgres pgbench -n -M prepared -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -j 2 \
		-T "$RUN_SECONDS" -D n="$2" -l -f "$WORK/$1.sql" postgres 2>&1)
	cat "$dir"/pgbench_log.* | awk '{print $3}' | sort -n | awk -v tps="$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")" \
		'{a[NR]=$1} END {printf "%.2f %.2f %.0f\n", a[int(NR*0.5)]/1000, a[int(NR*0.99)]/1000, tps}'
	rm -rf "$dir"
}

say "$SMALL keys"
fill 1 "$SMALL"
read -r rs50 rs99 rst < <(measure replay "$SMALL")
read -r ns50 ns99 nst < <(measure new "$SMALL")
say "$LARGE keys (loading)"
fill $((SMALL + 1)) "$LARGE"
read -r rl50 rl99 rlt < <(measure replay "$LARGE")
read -r nl50 nl99 nlt < <(measure new "$LARGE")

say "results ($(nproc) cores, PostgreSQL 15, fsync on, $CLIENTS clients, ${RUN_SECONDS}s each; table $(sql -c "SELECT pg_size_pretty(pg_total_relation_size('idempotency_keys'))"))"
printf '%-22s %10s %10s %10s %10s %10s\n' "" "p50 ms" "p99 ms" "tps" "p99 ratio" "tps ratio"
printf '%-22s %10s %10s %10s\n' "replay, $SMALL" "$rs50" "$rs99" "$rst"
printf '%-22s %10s %10s %10s %10.2f %10.2f\n' "replay, $LARGE" "$rl50" "$rl99" "$rlt" "$(awk -v a="$rl99" -v b="$rs99" 'BEGIN{print a/b}')" "$(awk -v a="$rlt" -v b="$rst" 'BEGIN{print a/b}')"
printf '%-22s %10s %10s %10s\n' "new key, $SMALL" "$ns50" "$ns99" "$nst"
printf '%-22s %10s %10s %10s %10.2f %10.2f\n' "new key, $LARGE" "$nl50" "$nl99" "$nlt" "$(awk -v a="$nl99" -v b="$ns99" 'BEGIN{print a/b}')" "$(awk -v a="$nlt" -v b="$nst" 'BEGIN{print a/b}')"
