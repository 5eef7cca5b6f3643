#!/usr/bin/env bash
# bench/citus.sh: idem_execute's server CPU per call on Citus against a plain
# distributed INSERT, in one run (issue 12: at most 2x; 0.2.0 was ~3.5x).
#
#   bash bench/citus.sh [--seconds S] [--rounds N] [--clients N] [--no-save]
#   bash bench/citus.sh --backend N
#
# As root; PG_BIN as in test/lib/common.sh (PostgreSQL 15 unless set), with
# Citus (13.2.2 on 15, 14.0.1 on 16-18: ../shared/citus/build.sh) and this
# extension installed there.  Starts test/citus/cluster.sh (1 coordinator +
# 2 workers on loopback) in a temporary directory, applies README's
# "Scaling out" recipe (payments by merchant_id, idempotency_keys by scope,
# co-located), loads completed keys for the replays, and runs
# bench/citus/*.sql with pgbench -n -M prepared, one variant at a time:
#   A  coordinator, key functions not distributed (run on the coordinator)
#   B  the recipe's create_distributed_function applied: the coordinator
#      (autocommit calls delegated to the scope's worker), then worker1
#      (a call runs there or is delegated to worker2)
# Phase B also runs the SPI floor (bench/floor, spi_floor_execute_tenant:
# read the key, INSERT the payment, INSERT a bare key row in limit_keys,
# distributed and delegated like the keys): what any design that reaches
# its table through SQL run by SPI pays on Citus.
# Each phase runs its variants in ROUNDS rounds (order reversed every other
# round); figures are medians over rounds.  Server CPU = utime + stime of
# every process of the three postmasters (live children from /proc/PID/stat,
# plus the postmaster's own and its exited children's), before and after
# each pgbench run, divided by its transactions.  After every run that
# writes through the extension: one payment per key, every key completed
# with the payment's id.  Prints a Markdown table and saves it to
# bench/results/citus-pgN.txt (the latest; git keeps the earlier ones).
# --backend N measures instead one backend on worker1, in a scope whose
# shard worker1 holds: its CPU per call (/proc/PID/schedstat) over N calls
# of each of a plain INSERT of a payment, idem_execute with a new key (the
# payment's INSERT as its statement), idem_execute replaying one key, and
# the SPI floor, each call its own statement and transaction, as in the
# pgbench scripts; with no round trips or other nodes in the figure it is
# steadier than the pgbench rounds, for comparing two builds of the
# extension: run it with each installed.
# --callgrind N restarts worker1 under valgrind's callgrind and counts the
# instructions of one backend per call of the same four variants (20 calls
# on one connection, 20 + N on another, the difference over N: as
# bench/profile.sh, whose report it prints, bench/callgrind.awk); saved as
# bench/results/citus-profile-pgN.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
. test/lib/common.sh

SECONDS_PER_RUN=10 ROUNDS=3 CLIENTS=4 NKEYS=2000 SAVE=1 BACKEND="" CALLGRIND=""
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) SECONDS_PER_RUN=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--clients) CLIENTS=$2; shift ;;
	--no-save) SAVE=0 ;;
	--backend) BACKEND=$2; shift ;;
	--callgrind) CALLGRIND=$2; shift ;;
	*) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
log() { printf '== [%4ds] %s\n' "$SECONDS" "$*" >&2; }

DIR=$(mktemp -d /tmp/idem-citus-bench.XXXXXX)
trap 'bash test/citus/cluster.sh stop "$DIR" >/dev/null 2>&1; rm -rf "$DIR"' EXIT
log "uptime before: $(uptime)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
bash test/citus/cluster.sh start "$DIR" >"$DIR/start.log" 2>&1 || { cat "$DIR/start.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$DIR/cluster.env"
WORK=$DIR
cp -r bench/citus "$DIR/scripts" && chown -R postgres:postgres "$DIR/scripts"
q() { as_postgres psql -X -q -h "$DIR" -p "$1" -d postgres -v ON_ERROR_STOP=1 -At "${@:2}"; }

# README's recipe (the sql block test/citus/checks.sh runs), in two parts
citus_recipe "$DIR" || { echo "no Citus recipe in README.md" >&2; exit 1; }
q "$COORDINATOR_PORT" -f "$DIR/distribute.sql" >/dev/null || exit 1
# the SPI floor, distributed and delegated by the tenant as the recipe does the keys
build_and_install_floor >/dev/null || exit 1
install -o postgres -m 644 bench/floor/floor.sql "$DIR/floor.sql"
q "$COORDINATOR_PORT" -f "$DIR/floor.sql" >/dev/null || exit 1
q "$COORDINATOR_PORT" >/dev/null <<'SQL' || exit 1
CREATE TABLE limit_keys (scope text, key text, request_hash bytea, response jsonb, PRIMARY KEY (scope, key));
SELECT create_distributed_table('limit_keys', 'scope', colocate_with => 'payments');
SELECT create_distributed_function('spi_floor_execute_tenant(text, text, bytea, int)', 'scope',
                                   colocate_with => 'payments');
SQL
for p in "$COORDINATOR_PORT" "$WORKER1_PORT" "$WORKER2_PORT"; do # no expiry passes in the measurements
	q "$p" -c "ALTER SYSTEM SET idempotency.worker_databases = 'no_such_database'" -c "SELECT pg_reload_conf()" >/dev/null
done

# --backend: one worker1 backend's CPU (ns, /proc/PID/schedstat) around N
# calls of each variant, each call its own statement and transaction
# (autocommit, as the pgbench scripts), in a scope whose shard worker1 holds
# a scope whose shard worker1 holds
local_scope()
{
	q "$WORKER1_PORT" -c "SELECT s FROM generate_series(1, 1000) i, LATERAL (SELECT i::text AS s) x
		WHERE (SELECT groupid FROM pg_dist_placement
		       WHERE shardid = get_shard_id_for_distribution_column('idempotency_keys', s))
		    = (SELECT groupid FROM pg_dist_local_group) LIMIT 1"
}
# the variants of --backend and --callgrind, prepared as p, e, r and f;
# each is executed with (key, scope)
prepare_variants()
{
	cat <<'SQL'
PREPARE p(text, text) AS INSERT INTO payments (merchant_id, key, amount) VALUES ($2, $1, 1) RETURNING id;
PREPARE e(text, text) AS SELECT outcome, response FROM idem_execute($1, jsonb_build_object('order_id', $1, 'amount', 2), $2, 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id', $2::text, $1::text, 2);
PREPARE r(text, text) AS SELECT outcome, response FROM idem_execute('replayed', jsonb_build_object('order_id', 'replayed', 'amount', 2), $2, 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id', $2::text, 'replayed'::text, 2);
PREPARE f(text, text) AS SELECT spi_floor_execute_tenant($2, $1, '\x6f1c2e83a5b94d7f8e0a1b2c3d4e5f60718293a4b5c6d7e8f900112233445566'::bytea, 5);
SQL
}
variant_name()
{
	case $1 in
	p) echo "plain INSERT into payments (Citus local execution)" ;;
	e) echo "idem_execute, new key (payment INSERT)" ;;
	r) echo "idem_execute, replay" ;;
	f) echo "SPI floor (bench/floor): read, payment INSERT, key INSERT" ;;
	esac
}
backend_cpu()
{
	local scope v i
	scope=$(local_scope) || return 1
	{
		prepare_variants
		cat <<'SQL'
-- no WAL flush in the backend's commits: its fsync's CPU moved the figures more than the code did
SET synchronous_commit = off;
SELECT pg_backend_pid() AS pid \gset
\setenv PID :pid
SQL
		# warm-up: every variant's statements planned and cached before any count
		for i in $(seq 1 100); do for v in p e r f; do echo "EXECUTE $v('w$v$i', '$scope');"; done; done
		for r in 1 2 3; do
			for v in $([ "$r" = 2 ] && echo f r e p || echo p e r f); do
				echo "\\! echo \"cpu $v \$(cut -d' ' -f1 /proc/\$PID/schedstat)\""
				for i in $(seq 1 "$BACKEND"); do echo "EXECUTE $v('$v$r-$i', '$scope');"; done
				echo "\\! echo \"cpu $v \$(cut -d' ' -f1 /proc/\$PID/schedstat)\""
			done
		done
		echo "SELECT 'rows ' || count(*) FILTER (WHERE status = 'completed') || '/' || count(*) FROM idempotency_keys WHERE scope = '$scope';"
	} >"$DIR/backend.sql"
	chown postgres "$DIR/backend.sql"
	q "$WORKER1_PORT" -f "$DIR/backend.sql" >"$DIR/backend.log" 2>&1 || { tail -n 5 "$DIR/backend.log" >&2; return 1; }
	awk -v n="$BACKEND" -v np="$(variant_name p)" -v ne="$(variant_name e)" -v nr="$(variant_name r)" -v nf="$(variant_name f)" '
		function med3(x, y, z) { return x > y ? (y > z ? y : (x > z ? z : x)) : (x > z ? x : (y > z ? z : y)) }
		/^cpu / { if ($2 in a) { k[$2]++; d[$2, k[$2]] = ($3 - a[$2]) / n / 1000; delete a[$2] } else a[$2] = $3 }
		/^rows / { rows = $2 }
		END { name["p"] = np; name["e"] = ne; name["r"] = nr; name["f"] = nf
			for (v in k) us[v] = med3(d[v, 1], d[v, 2], d[v, 3])
			if (length(us) != 4 || rows != (3 * n + 101) "/" (3 * n + 101)) { print "backend run incomplete (rows " rows ")"; exit 1 }
			printf "| variant | µs / call | vs plain INSERT | vs SPI floor |\n| --- | ---: | ---: | ---: |\n"
			split("p e r f", order, " ")
			for (i = 1; i <= 4; i++) { v = order[i]
				printf "| %s | %.1f | %.2f | %.2f |\n", name[v], us[v], us[v] / us["p"], us[v] / us["f"] }
			printf "\nmedians of 3 rounds of %d calls each; %s keys completed in the scope (every new key and the replayed one)\n", n, rows }' "$DIR/backend.log"
}

# --callgrind: worker1's postmaster under callgrind; $1 variant, $2 calls on
# a new connection -> the callgrind file of its backend, once it has exited
callgrind_calls()
{
	local v=$1 n=$2 pid i
	{
		prepare_variants
		for i in $(seq 1 "$n"); do echo "EXECUTE $v('$v-$n-$RANDOM-$i', '$SCOPE');"; done
		echo "SELECT 'pid ' || pg_backend_pid();"
	} >"$DIR/cg.sql"
	chown postgres "$DIR/cg.sql"
	pid=$(q "$WORKER1_PORT" -f "$DIR/cg.sql" | sed -n 's/^pid //p')
	[ -n "$pid" ] || return 1
	for i in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	echo "$DIR/cg/callgrind.out.$pid"
}
callgrind_profile()
{
	local v short long i
	apt_install valgrind binutils >&2 || return 1
	SCOPE=$(local_scope) || return 1
	as_postgres "$PG_BIN/pg_ctl" -D "$DIR/worker1" stop -m fast >/dev/null || return 1
	as_postgres mkdir -p "$DIR/cg"
	(cd "$DIR" && as_postgres setsid valgrind --tool=callgrind --callgrind-out-file="$DIR/cg/callgrind.out.%p" \
		"$PG_BIN/postgres" -D "$DIR/worker1" >"$DIR/valgrind.log" 2>&1 &)
	for i in $(seq 600); do as_postgres pg_isready -q -h "$DIR" -p "$WORKER1_PORT" && break; sleep 0.5; done
	nm -D --defined-only "$PG_BIN/postgres" | awk '$2 ~ /^[TtWw]$/' | sort >"$DIR/syms.txt"
	: >"$DIR/totals.txt"
	for v in p e r f; do
		log "callgrind: $(variant_name "$v"): 20 calls, then $((20 + CALLGRIND))"
		short=$(callgrind_calls "$v" 20) && long=$(callgrind_calls "$v" $((20 + CALLGRIND))) || return 1
		awk -v n="$CALLGRIND" -v warm=20 -v top=24 -v title="$v: $(variant_name "$v")" -v syms="$DIR/syms.txt" \
			-v path="$v" -v totals="$DIR/totals.txt" -f bench/callgrind.awk "$short" "$long" >>"$DIR/cg-report.txt"
	done
	echo "| variant | instructions / call | vs plain INSERT | vs SPI floor |"
	echo "| --- | ---: | ---: | ---: |"
	awk -v np="$(variant_name p)" -v ne="$(variant_name e)" -v nr="$(variant_name r)" -v nf="$(variant_name f)" '
		{ t[$1] = $2 } END { name["p"] = np; name["e"] = ne; name["r"] = nr; name["f"] = nf; split("p e r f", o, " ")
			for (i = 1; i <= 4; i++) printf "| %s | %d | %.2f | %.2f |\n", name[o[i]], t[o[i]], t[o[i]] / t["p"], t[o[i]] / t["f"] }' "$DIR/totals.txt"
	cat "$DIR/cg-report.txt"
}
if [ -n "$CALLGRIND" ]; then
	{
		echo "bench/citus.sh --callgrind $CALLGRIND, $(date -u '+%Y-%m-%d %H:%M UTC'), idempotency $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(valgrind --version)"
		echo "one worker1 backend, a scope whose shard worker1 holds, prepared statements, each call its own transaction;"
		echo "instructions of that backend per call ($CALLGRIND calls after 20; counts are the backend's own)"
		echo
		callgrind_profile
	} >"$DIR/cg-out.txt" || { cat "$DIR/cg-out.txt"; exit 1; }
	cat "$DIR/cg-out.txt"
	[ "$SAVE" = 1 ] && mkdir -p bench/results && cp "$DIR/cg-out.txt" "bench/results/citus-profile-pg$PG_MAJOR.txt"
	exit 0
fi
if [ -n "$BACKEND" ]; then
	echo "bench/citus.sh --backend, $(date -u '+%Y-%m-%d %H:%M UTC'), idempotency $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	backend_cpu
	exit
fi

log "load $NKEYS completed keys for the replays"
q "$COORDINATOR_PORT" >/dev/null <<SQL || exit 1
SELECT format('SELECT idem_execute(%L, jsonb_build_object(''order_id'', %L, ''amount'', 2), %L, 201,
    ''INSERT INTO payments (merchant_id, key, amount) VALUES (\$1, \$2, \$3) RETURNING id'', %L::text, %L::text, 2)',
    i, i, 1 + i % 1000, 1 + i % 1000, i) FROM generate_series(1, $NKEYS) i
\gexec
SQL

# CPU ticks of every process of the three postmasters
PMS=""
for n in coordinator worker1 worker2; do PMS="$PMS $(head -n 1 "$DIR/$n/postmaster.pid")"; done
server_ticks()
{
	local pm pids
	for pm in $PMS; do
		pids=$(ps -o pid= --ppid "$pm")
		# shellcheck disable=SC2086,SC2046 # lists of pids
		(cd /proc && cat $pm/stat $(printf '%s/stat ' $pids)) 2>/dev/null |
			sed 's/^.*) //' | awk '
				{ t += $12 + $13 } NR == 1 { t += $14 + $15 } END { print t }'
	done | xargs # coordinator worker1 worker2
}
sum3() { awk '{ print $1 + $2 + $3 }' <<<"$1"; }
HZ=$(getconf CLK_TCK)

# exactly once: every key completed, with one payment naming it; every
# payment made through the extension (amount 2 or 3) has its key
check_once()
{
	q "$COORDINATOR_PORT" -c "SELECT format('%s keys, %s bad', (SELECT count(*) FROM idempotency_keys),
		(SELECT count(*) FROM idempotency_keys k WHERE k.status <> 'completed'
		   OR (SELECT count(*) FROM payments p WHERE p.merchant_id = k.scope AND p.key = k.key) <> 1
		   OR k.response IS DISTINCT FROM (SELECT jsonb_build_object('id', p.id) FROM payments p
		      WHERE p.merchant_id = k.scope AND p.key = k.key LIMIT 1))
		 + (SELECT count(*) FROM payments p WHERE amount IN (2, 3) AND NOT EXISTS
		   (SELECT FROM idempotency_keys k WHERE k.scope = p.merchant_id AND k.key = p.key)))"
}

RES=$DIR/results # phase node variant round tps cpu_us_per_call (all, coordinator, worker1, worker2)
FAILED=0
# $1 phase, $2 node name, $3 port, $4 variant
run_one()
{
	local phase=$1 node=$2 port=$3 v=$4 r=$5 t0 t1 n tps cpu once=""
	t0=$(server_ticks)
	as_postgres pgbench -n -M prepared -h "$DIR" -p "$port" -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" \
		-D nkeys="$NKEYS" -f "$DIR/scripts/$v.sql" postgres >"$DIR/pgbench.log" 2>&1 || {
		log "pgbench $v on $node failed:"; tail -n 5 "$DIR/pgbench.log" >&2; FAILED=1; }
	t1=$(server_ticks)
	n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$DIR/pgbench.log")
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$DIR/pgbench.log")
	# total, then coordinator, worker1, worker2
	cpu=$(printf '%s\n%s\n' "$t0" "$t1" | awk -v n="${n:-0}" -v hz="$HZ" '
		NR == 1 { split($0, a) } NR == 2 { for (i = 1; i <= 3; i++) { d[i] = n ? ($i - a[i]) / hz * 1e6 / n : 0; s += d[i] }
			printf "%.0f %.0f %.0f %.0f", s, d[1], d[2], d[3] }')
	if [ "$v" != floor ] && [ "$v" != spi_floor ]; then
		once=$(check_once)
		case $once in *" 0 bad") ;; *) FAILED=1 ;; esac
		once=", exactly once: $once"
	fi
	echo "$phase $node $v $r ${tps:-0} $cpu" >>"$RES"
	log "$phase $node $v round $r: ${n:-0} tx, ${tps:-0} tps, server CPU/call µs (all coordinator worker1 worker2): $cpu$once"
}
# $1 phase, $2 node, then variants: ROUNDS rounds, reversed every other one
phase()
{
	local ph=$1 node=$2 port r v vs
	shift 2
	port=$(case $node in coordinator) echo "$COORDINATOR_PORT" ;; worker1) echo "$WORKER1_PORT" ;; esac)
	for r in $(seq 1 "$ROUNDS"); do
		vs="$*"
		[ $((r % 2)) = 0 ] && vs=$(printf '%s\n' "$@" | tac | xargs)
		for v in $vs; do run_one "$ph" "$node" "$port" "$v" "$r"; done
	done
}

# one replay as the pgbench script sends it: its outcome, and whether Citus
# pushed the call down to the worker ("pushing down the function call")
probe()
{
	q "$COORDINATOR_PORT" -c "SET client_min_messages = debug1" \
		-c "PREPARE r(text, jsonb, text, int, text, text, text, int) AS SELECT outcome FROM idem_execute(\$1, \$2, \$3, \$4, \$5, \$6::text, \$7::text, \$8)" \
		-c "EXECUTE r('1', '{\"order_id\": \"1\", \"amount\": 2}', '2', 201, 'INSERT INTO payments (merchant_id, key, amount) VALUES (\$1, \$2, \$3) RETURNING id', '2', '1', 2)" 2>&1 |
		awk '/pushing down the function call/ { d = "delegated" } /^[a-z_]+$/ { o = $1 } END { print "replay probe: outcome " o ", " (d ? d : "not delegated") }'
}
# the cluster's own CPU with no client (maintenance daemons, ...), in cores
idle_cores()
{
	local t0 t1
	t0=$(server_ticks); sleep 5; t1=$(server_ticks)
	awk -v d=$(($(sum3 "$t1") - $(sum3 "$t0"))) -v hz="$HZ" 'BEGIN { printf "%.3f", d / hz / 5 }'
}
IDLE=$(idle_cores)
PROBE_A=$(probe)
log "idle server CPU: $IDLE cores; phase A $PROBE_A"
phase A coordinator floor execute replay explicit
q "$COORDINATOR_PORT" -f "$DIR/delegate.sql" >/dev/null || exit 1
PROBE_B=$(probe)
log "phase B $PROBE_B"
phase B coordinator floor execute replay spi_floor
phase B worker1 floor execute replay explicit spi_floor
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

OUTFILE=$DIR/table.txt
{
	echo "bench/citus.sh, $(date -u '+%Y-%m-%d %H:%M UTC'): Citus $(q "$COORDINATOR_PORT" -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"), PostgreSQL $(q "$COORDINATOR_PORT" -c 'SHOW server_version' | cut -d' ' -f1), idempotency $(q "$COORDINATOR_PORT" -c "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'") ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
	echo "1 coordinator + 2 workers on loopback, $(nproc) cores; pgbench -n -M prepared -c $CLIENTS -j $CLIENTS -T $SECONDS_PER_RUN, $ROUNDS rounds, medians; fsync on"
	echo "load average (1/5/15 min) before: $LOAD_BEFORE, after: $LOAD_AFTER"
	echo
	echo "| phase | node | variant | tps | server CPU µs / call | ratio to floor (CPU) | of which coordinator / worker1 / worker2 |"
	echo "| --- | --- | --- | ---: | ---: | ---: | ---: |"
	sort -k1,1 -k2,2 -k3,3 -k6,6n "$RES" | awk -v rounds="$ROUNDS" '
		function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
		{ g = $1 " " $2 " " $3; if (!(g in n)) order[++ng] = g; n[g]++; tps[g, n[g]] = $5
		  for (k = 6; k <= 9; k++) cpu[g, k, n[g]] = $k }
		END {
			for (i = 1; i <= ng; i++) { g = order[i]; delete a
				for (j = 1; j <= n[g]; j++) a[j] = tps[g, j]
				T[g] = med(a, n[g])
				for (k = 6; k <= 9; k++) { delete b; for (j = 1; j <= n[g]; j++) b[j] = cpu[g, k, j]; M[g, k] = med(b, n[g]) }
				C[g] = M[g, 6] }
			split("floor execute replay explicit spi_floor", vo, " ")
			name["floor"] = "(1) plain distributed INSERT (floor)"; name["execute"] = "(2) idem_execute, new key"
			name["replay"] = "(3) idem_execute, replay"; name["explicit"] = "(4) BEGIN; idem_claim; INSERT; idem_complete; COMMIT"
			name["spi_floor"] = "(5) SPI floor: read, INSERT payment, INSERT bare key row (bench/floor), new key"
			split("A coordinator|B coordinator|B worker1", po, "|")
			for (p = 1; p <= 3; p++) for (v = 1; v <= 5; v++) { g = po[p] " " vo[v]; if (!(g in T)) continue
				split(po[p], pn, " "); f = po[p] " floor"
				printf "| %s | %s | %s | %.0f | %.0f | %.2f | %.0f / %.0f / %.0f |\n", pn[1], pn[2], name[vo[v]], T[g], C[g], C[g] / C[f],
					M[g, 7], M[g, 8], M[g, 9] }
		}'
	echo
	echo "A: key functions not distributed (idem_execute runs on the coordinator, its statements routed to the shard)."
	echo "B: README's create_distributed_function applied: autocommit calls on the coordinator are delegated to"
	echo "   the scope's worker; on worker1 a call runs there (its shards) or is delegated to worker2."
	echo "(4) runs in a transaction block, so it is never delegated."
	echo "(5) spi_floor_execute_tenant in limit_keys (scope, key, request_hash, response), distributed and delegated like the keys."
	echo "A $PROBE_A; B $PROBE_B (from the coordinator)"
	echo "each CPU column is a median over rounds on its own, so the three nodes' need not add up to the total"
	echo "the servers' CPU with no client: $IDLE cores (counted in every figure; its share per call grows as tps falls)"
	[ "$FAILED" = 0 ] && echo "exactly once held after every run (one payment per key, every key completed with its id)" ||
		echo "FAILED: a pgbench run or an exactly-once check failed (see the log above)"
} >"$OUTFILE"
cat "$OUTFILE"
if [ "$SAVE" = 1 ]; then
	mkdir -p bench/results
	cp "$OUTFILE" "bench/results/citus-pg$PG_MAJOR.txt"
fi
exit "$FAILED"
