#!/usr/bin/env bash
# bench/run.sh: the benchmark.  One command, one throwaway PostgreSQL (15, or PG_MAJOR) and
# one throwaway Redis, every variant driven by the same C driver
# (bench/driver.c: libpq + hiredis, one connection per client thread, no
# pipelining, per-request latency).  Run as root on Debian bookworm:
#
#   bash bench/run.sh            default: 3 alternating rounds x 8 s per variant (~9 min)
#   bash bench/run.sh --quick    1 round x 4 s (~2.5 min; for a look, not for the README)
#   bash bench/run.sh --check    contention mode only, 2 s each: exactly-once, no timing (for tests)
#   bash bench/run.sh --edition  the SQL edition (edition/dist/idempotency-sql--0.4.0.sql, made by
#                                make edition) against the C build in the same run: the edition
#                                on a second server of the same version that never loads the C
#                                library (as on a managed service), the C build preloaded;
#                                3 rounds x 5 s of the claim / execute variants of both (~6 min);
#                                results in bench/results/edition-pgN.txt (below)
#   bash bench/run.sh --scale    claim latency with 100,000 vs 10,000,000 keys, the limit beside (~20 min, ~12 GB in /tmp;
#                                SMALL=... LARGE=... to change the sizes)
#   options: --rounds N --seconds S --clients N --no-build (use the installed extension)
#            --no-save (do not write bench/results/)
#   PG_MAJOR=18 bash bench/run.sh  the same against PostgreSQL 18 (installed, or
#                                  in that version's Debian release: a chroot made by
#                                  test/lib/chroot.sh, the tree copied in, the results
#                                  copied back to bench/results/)
#
# Variants (ratios are to the floor, per round, median over rounds):
#   floor        plain INSERT into an indexed payments table, autocommit, 1 round trip
#   on_conflict  INSERT ... ON CONFLICT DO NOTHING on a unique key column (no
#                request check, no stored response), 1 round trip
#   plpgsql      bench/plpgsql_reference.sql: BEGIN; ref_claim; INSERT;
#                ref_complete; COMMIT (5); replays: ref_claim (1)
#   redis        the seeds' design: SET lock NX PX 10000; INSERT; SET response
#                EX 86400 (3); replays: GET response (1)
#   claim        BEGIN; idem_claim; INSERT; idem_complete; COMMIT (5);
#                replays: idem_claim (1, read-only)
#   execute      idem_execute(key, request, scope, 201, 'INSERT ...', args) (1)
#   limit        the physical limit: one statement, WITH p AS (INSERT INTO
#                payments ... RETURNING id) INSERT INTO limit_keys (scope, key,
#                request_hash, response) ..., no checks, the hash computed by
#                the client (1); replays: SELECT request_hash, response by
#                primary key, hash compared by the client (1).  Not in
#                contention mode: a duplicate fails on the primary key.
#                The table also gives tps and server CPU relative to it.
#   ed_claim, ed_execute  (--edition) claim and execute against the SQL
#                edition: the same driver statements on connections whose
#                search_path is 'sqled' (the plain script and bench/schema.sql's
#                tables installed in schema sqled) of a second server, the same
#                version and settings, whose shared_preload_libraries holds
#                pg_stat_statements alone and where the C build is not
#                created: its settings are unset placeholders, as on a managed
#                service (checked before the rounds: the backend has not
#                mapped idempotency.so, idempotency.lease is unset); server CPU
#                counts both servers' processes for every variant
#   spi_floor, spi_floor_explicit, spi_floor_rules  the SPI floors
#                (bench/floor/idem_floor.c; bench/README.md): idem_execute's
#                and the explicit pattern's statements alone, through SPI;
#                spi_floor_rules adds what the project's rules ask of any
#                design (the request hashed and checked by the server,
#                search_path pinned around its own statements) (1 each)
# Modes: new (fresh keys), replay (duplicates of completed keys), contention
# (8 clients race 4 live keys, each key changing after 50 requests; ends with
# an exactly-once check: one payment per key, every answer naming it).
#
# Prints a results table (Markdown) with the machine and settings, and saves
# it to bench/results/run-pgN.txt (quick-pgN, scale-pgN: one file per kind
# and version, the latest; git keeps the earlier ones).  Exits non-zero if any
# request failed or an exactly-once check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh # packages, environment, build, work directory, servers

CLIENTS=8
ROUNDS=3
RUN_SECONDS=8
WARMUP=1
REPLAY_KEYS=100000
STORAGE_KEYS=50000
SMALL=${SMALL:-100000}
LARGE=${LARGE:-10000000}
WHAT=default
BUILD=1
SAVE=1

usage() { sed -n '2,42p' bench/run.sh | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
ARGS=("$@")   # for bench_maybe_in_chroot (bench/chroot.sh)
while [ $# -gt 0 ]; do
	case $1 in
	--quick) WHAT=quick ROUNDS=1 RUN_SECONDS=4 STORAGE_KEYS=20000 ;;
	--check) WHAT=check ROUNDS=1 RUN_SECONDS=2 SAVE=0 ;;
	--edition) WHAT=edition RUN_SECONDS=5 ;;
	--scale) WHAT=scale RUN_SECONDS=10 ;;
	--rounds) ROUNDS=$2; shift ;;
	--seconds) RUN_SECONDS=$2; shift ;;
	--clients) CLIENTS=$2; shift ;;
	--no-build) BUILD=0 ;;
	--no-save) SAVE=0 ;;
	-h | --help) usage 0 ;;
	*) echo "unknown option: $1" >&2; usage 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "run as root (PostgreSQL and Redis run as their own OS users)" >&2; exit 2; }
. bench/chroot.sh
bench_maybe_in_chroot bench/run.sh ${ARGS[@]+"${ARGS[@]}"}   # a PostgreSQL this system lacks: in its Debian release's chroot

log() { printf '== [%3ds] %s\n' "$SECONDS" "$*" >&2; }
commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }   # 12345 -> 12,345

# --- packages: only the missing ones, only then apt-get update
apt_install gcc make libc6-dev procps $PG_PACKAGES \
	libpq-dev libssl-dev libhiredis-dev $([ "$WHAT" = edition ] || echo redis-server)

# --- build and install the extension (the Makefile makes warnings errors);
# a copy of the tree the postgres user owns is the work directory;
# everything the run starts is stopped on exit
if [ "$BUILD" = 1 ]; then
	log "build and install the extension"
	build_and_install >/dev/null
fi
if [ "$WHAT" = edition ]; then
	# the SQL edition's plain script (edition/build.sh; no server needed)
	log "make the SQL edition (edition/build.sh)"
	bash edition/build.sh >/dev/null
	ED_SCRIPT=edition/dist/idempotency-sql--0.4.0.sql
	[ -s "$ED_SCRIPT" ] || { echo "no $ED_SCRIPT" >&2; exit 1; }
else
	log "build and install the SPI floor (bench/floor)"
	build_and_install_floor >/dev/null
fi
make_workdir
REDIS_PID=""
cleanup()
{
	local rc=$?
	stop_server "$WORK/data"
	stop_server "$WORK/data-ed"
	if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
		kill "$REDIS_PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$REDIS_PID" 2>/dev/null || break; sleep 0.1; done
	fi
	if [ "$rc" != 0 ] && [ -f "$WORK/data/server.log" ]; then
		echo "--- last lines of the server log:" >&2
		tail -n 15 "$WORK/data/server.log" >&2
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "build the driver"
gcc -O2 -Wall -Wextra -Werror -pthread -I"$("$PG_BIN/pg_config" --includedir)" \
	bench/driver.c -o "$WORK/driver" -lpq -lhiredis -lcrypto

# --- PostgreSQL: as the postgres OS user, 127.0.0.1 only, durable commits
PORT=$(free_port 55432)
BASE_CONF="synchronous_commit = on
full_page_writes = on
shared_buffers = 1GB
# no checkpoint inside a measurement: WAL per request is the records
# themselves (full-page images after a checkpoint come on top)
max_wal_size = 20GB
checkpoint_timeout = 1h"
start_server "$WORK/data" "$PORT" "$BASE_CONF
# no expiry inside a measurement either: the worker moves keys completed
# by idem_complete to their expiry one lease later, off the request path
# (its cost per key is measured on its own, bench/rekey.sh)
idempotency.worker_databases = ''"
sql() { as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" "$@"; }
CONNINFO="host=127.0.0.1 port=$PORT dbname=postgres user=app"
SERVER_PIDS=$(head -n 1 "$WORK/data/postmaster.pid")
# --edition: the SQL edition on a second server of the same version and
# settings that never loads the C library, as on a managed service: the
# later shared_preload_libraries line replaces start_server's, no
# idempotency.* setting is written, the C build is not created there
if [ "$WHAT" = edition ]; then
	PORT_ED=$(free_port 55532)
	start_server "$WORK/data-ed" "$PORT_ED" "$BASE_CONF
shared_preload_libraries = 'pg_stat_statements'"
	SERVER_PIDS="$SERVER_PIDS,$(head -n 1 "$WORK/data-ed/postmaster.pid")"
fi
sql_ed() { as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT_ED" "$@"; }

# --- Redis (not for --scale): Debian's redis-server as the redis OS user,
# 127.0.0.1 and a private port, no config file, so Redis's built-in
# persistence defaults: RDB snapshots (save 3600 1 300 100 60 10000), no AOF
if [ "$WHAT" != scale ] && [ "$WHAT" != edition ]; then
	mkdir "$WORK/redis" && chown redis:redis "$WORK/redis"
	# a port free_port found free can be taken before Redis binds it (other
	# runs on the machine): then try another, three times at most
	for _ in 1 2 3; do
		RPORT=$(free_port 56379)
		setpriv --reuid=redis --regid=redis --init-groups redis-server --port "$RPORT" --bind 127.0.0.1 \
			--dir "$WORK/redis" --logfile "$WORK/redis/redis.log" --daemonize no &
		REDIS_PID=$!
		# up to 30 s: a loaded machine can be slow to schedule it
		for _ in $(seq 300); do
			redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break
			kill -0 "$REDIS_PID" 2>/dev/null || break
			sleep 0.1
		done
		redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break
	done
	redis-cli -p "$RPORT" ping >/dev/null ||
		{ echo "Redis did not start:"; tail -n 20 "$WORK/redis/redis.log"; exit 1; }
fi

# key_of(i): the pre-completed keys the driver replays (same formula as key_of() in driver.c)
KEY_OF="lpad(to_hex((i::bigint * 2654435761) % 4294967296), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(i), 12, '0')"
REQ_OF="jsonb_build_object('order_id', $KEY_OF, 'amount', 3000, 'currency', 'TWD')"
# the limit's request hash: SHA-256 of the request text exactly as the driver sends it
LIMIT_HASH_OF="sha256(convert_to(format('{\"amount\":3000,\"currency\":\"TWD\",\"order_id\":\"%s\"}', $KEY_OF), 'UTF8'))"

# the service's role: idempotency_app, owner of its payments tables
sql -d postgres -c "CREATE EXTENSION idempotency" -c "CREATE ROLE app LOGIN IN ROLE idempotency_app" >/dev/null
schema()   # $1: database
{
	sql -U app -d "$1" -f bench/schema.sql -f bench/plpgsql_reference.sql >/dev/null
}
sql -d postgres -c "GRANT CREATE ON SCHEMA public TO app" >/dev/null
schema postgres
[ "$WHAT" = edition ] || sql -d postgres -f bench/floor/floor.sql >/dev/null

# --edition: the SQL edition's plain script in schema sqled of the second
# server's database postgres, installed as an owner would (the postgres role
# here); the service's role, app, reaches it through its search_path
# (CONNINFO_ED), with its own copy of bench/schema.sql's tables in sqled
CONNINFO_ED="host=127.0.0.1 port=${PORT_ED:-0} dbname=postgres user=app options='-c search_path=sqled'"
if [ "$WHAT" = edition ]; then
	log "SQL edition: $ED_SCRIPT into schema sqled of the second server (port $PORT_ED)"
	# edition/privileges.sql names idem_execute(..., VARIADIC "any"), the C
	# build's signature, where edition/functions/idem_execute.sql declares
	# VARIADIC anycompatiblearray (PL/pgSQL cannot take "any"): until they
	# agree, the grants are installed for the function that exists
	cp "$ED_SCRIPT" "$WORK/tmp/edition.sql"
	if grep -q 'VARIADIC args pg_catalog.anycompatiblearray' "$ED_SCRIPT" &&
		grep -q 'idem_execute(text, jsonb, text, integer, text, VARIADIC "any")' "$ED_SCRIPT"; then
		sed -i 's/idem_execute(text, jsonb, text, integer, text, VARIADIC "any")/idem_execute(text, jsonb, text, integer, text, VARIADIC anycompatiblearray)/' "$WORK/tmp/edition.sql"
		ED_PATCHED="; its REVOKE/GRANT on idem_execute(..., VARIADIC \"any\") applied to the VARIADIC anycompatiblearray it defines (edition/privileges.sql and edition/functions/idem_execute.sql disagree)"
		log "  (grants on idem_execute: VARIADIC \"any\" -> anycompatiblearray, as defined)"
	fi
	chown postgres "$WORK/tmp/edition.sql"
	sql_ed -d postgres -c "CREATE SCHEMA sqled" >/dev/null
	sql_ed -d postgres -c "SET search_path = sqled" -f "$WORK/tmp/edition.sql" >/dev/null
	sql_ed -d postgres -c "CREATE ROLE app LOGIN IN ROLE idempotency_app" -c "GRANT USAGE ON SCHEMA sqled TO idempotency_app" \
		-c "GRANT CREATE ON SCHEMA sqled TO app" >/dev/null
	sql_ed -U app -d postgres -c "SET search_path = sqled" -f bench/schema.sql >/dev/null
	# deliberate checks: the edition's functions answer on these
	# connections, in a backend that has not loaded the C library and sees
	# no idempotency.* setting; and its request hash is the C build's
	# (replays of keys loaded by either would differ otherwise)
	got=$(as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -d "$CONNINFO_ED" <<'SQL'
SELECT p.pronamespace::regnamespace || ' ' || l.lanname
    FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
    WHERE p.oid = 'idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer)'::regprocedure;
SELECT outcome FROM idem_claim('bench-check', '{"a": 1}', 'bench-check');
SELECT coalesce(current_setting('idempotency.lease', true), 'unset');
SELECT pg_backend_pid() AS pid \gset
\setenv BACKEND :pid
\! grep -c 'idempotency[.]so' /proc/$BACKEND/maps || true
SQL
)
	[ "$got" = "sqled plpgsql
new
unset
0" ] || { echo "edition connections: expected sqled's PL/pgSQL idem_claim, outcome new, idempotency.lease unset and idempotency.so not mapped; got: $got" >&2; exit 1; }
	hashes="md5(string_agg(encode(SCHEMA.idem_request_hash($REQ_OF), 'hex'), ',' ORDER BY i)) FROM generate_series(1, 2000) i"
	c_md5=$(sql -d postgres -c "SELECT ${hashes//SCHEMA/public}")
	ed_md5=$(sql_ed -d postgres -c "SELECT ${hashes//SCHEMA/sqled}")
	[ "$c_md5" = "$ed_md5" ] || { echo "the edition's request hashes of 2000 requests differ from the C build's ($ed_md5 against $c_md5)" >&2; exit 1; }
fi

fill_keys()   # $1 $2: completed keys key_of($1) .. key_of($2) in idempotency_keys, as a completed claim leaves them
{
	sql -d postgres -c "INSERT INTO idempotency_keys (scope, key, status, response_code, token, created_at, updated_at,
	        expires_at, request_hash, response, due_at)
	    SELECT 'merchant-42', $KEY_OF, 'completed', 201, nextval('idempotency_token_seq'), now(), now(),
	        now() + interval '24 h', idem_request_hash($REQ_OF), jsonb_build_object('id', i), now() + interval '24 h'
	    FROM generate_series($1, $2) i"
}

fill_limit_keys()   # $1 $2: the same keys in the limit's limit_keys
{
	sql -d postgres -c "INSERT INTO limit_keys (scope, key, request_hash, response)
	    SELECT 'merchant-42', $KEY_OF, $LIMIT_HASH_OF, jsonb_build_object('id', i)
	    FROM generate_series($1, $2) i"
}

driver() { "$WORK/driver" --pg "$CONNINFO" --clients "$CLIENTS" --server-pids "$SERVER_PIDS,$REDIS_PID" "$@"; }

machine()
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); idempotency at ${IDEM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (with changes)')}"
	echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM, Linux $(uname -r), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "PostgreSQL: $(sql -d postgres -c 'SHOW server_version' | cut -d' ' -f1); $(sql -d postgres -F ', ' -c "SELECT 'fsync = ' || current_setting('fsync'), 'synchronous_commit = ' || current_setting('synchronous_commit'), 'full_page_writes = ' || current_setting('full_page_writes'), 'wal_level = ' || current_setting('wal_level'), 'shared_buffers = ' || current_setting('shared_buffers'), 'max_wal_size = ' || current_setting('max_wal_size'), 'checkpoint_timeout = ' || current_setting('checkpoint_timeout')"), autovacuum on, extension $(sql -d postgres -c "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'") preloaded, its expiry worker off during the rounds (idempotency.worker_databases = ''; the deferred work is measured after them)"
	[ "$WHAT" = edition ] && echo "SQL edition: $ED_SCRIPT (edition/build.sh at the same commit) in schema sqled of a second server (the same binaries and settings, shared_preload_libraries = 'pg_stat_statements' alone, no idempotency.* setting, the C build not created: checked before the rounds that an edition backend has not mapped idempotency.so and sees idempotency.lease unset), owned by postgres${ED_PATCHED:-}; its variants (ed_*) connect to it as app (a member of idempotency_app, not a superuser) with options='-c search_path=sqled', with their own copy of bench/schema.sql's tables; $(commas "$REPLAY_KEYS") completed keys for replays in each edition's table; server CPU counts both servers' processes for every variant (the idle one's background processes: a few ms a round)"
	[ "$WHAT" != scale ] && [ "$WHAT" != edition ] && echo "Redis: $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), 127.0.0.1, persistence defaults (RDB snapshots, no AOF: a SET is acknowledged before it reaches the disk)"
	echo "driver: bench/driver.c, $CLIENTS clients (threads, one connection each) over loopback TCP, prepared statements, no pipelining$([ "$WHAT" = edition ] && echo "; idem_execute's arguments both text (--text-args: \$4::text, \$5::text, VALUES (\$1, \$2::int)) for both builds, as the edition's VARIADIC anycompatiblearray needs one type")"
}

# ============================================================ --scale
if [ "$WHAT" = scale ]; then
	OUT=$WORK/report.txt
	# $1 keys: rounds of idem_claim replay, idem_execute new and the limit
	# new (its limit_keys holds as many keys, of the same distribution)
	measure_scale()
	{
		local n=$1 r
		driver --variant claim --mode replay --keys "$n" --seconds 2 --warmup 1 >/dev/null
		driver --variant execute --mode new --seconds 2 --warmup 1 >/dev/null
		driver --variant limit --mode new --seconds 2 --warmup 1 >/dev/null
		for r in $(seq "$ROUNDS"); do
			driver --variant claim --mode replay --keys "$n" --seconds "$RUN_SECONDS" --warmup "$WARMUP" | sed -n "s/^RESULT /$n /p"
			driver --variant execute --mode new --seconds "$RUN_SECONDS" --warmup "$WARMUP" | sed -n "s/^RESULT /$n /p"
			driver --variant limit --mode new --seconds "$RUN_SECONDS" --warmup "$WARMUP" | sed -n "s/^RESULT /$n /p"
		done
	}
	log "$SMALL completed keys"
	fill_keys 1 "$SMALL" >/dev/null
	fill_limit_keys 1 "$SMALL" >/dev/null
	sql -d postgres -c "VACUUM ANALYZE" -c CHECKPOINT
	small_size=$(sql -d postgres -c "SELECT pg_size_pretty(pg_total_relation_size('idempotency_keys'))")
	measure_scale "$SMALL" >"$WORK/scale.txt"
	log "growing to $LARGE completed keys"
	t0=$(date +%s)
	step=1000000
	for ((from = SMALL + 1; from <= LARGE; from += step)); do
		to=$((from + step - 1)); [ "$to" -gt "$LARGE" ] && to=$LARGE
		fill_keys "$from" "$to" >/dev/null
		fill_limit_keys "$from" "$to" >/dev/null
		log "  $to keys, $(( $(date +%s) - t0 )) s"
	done
	t1=$(date +%s)
	sql -d postgres -c "VACUUM ANALYZE idempotency_keys" -c "VACUUM ANALYZE limit_keys" -c CHECKPOINT
	t2=$(date +%s)
	large_size=$(sql -d postgres -c "SELECT pg_size_pretty(pg_total_relation_size('idempotency_keys'))")
	measure_scale "$LARGE" >>"$WORK/scale.txt"
	{
		echo "# bench/run.sh --scale"
		machine
		echo "fill: $(commas $((LARGE - SMALL))) completed keys by INSERT ... SELECT generate_series in $((t1 - t0)) s (into idempotency_keys and into the limit's limit_keys), VACUUM ANALYZE $((t2 - t1)) s; idempotency_keys $small_size at $(commas "$SMALL") keys, $large_size at $(commas "$LARGE") keys"
		echo "each figure: median of $ROUNDS runs of ${RUN_SECONDS} s after a warm-up; replays pick keys uniformly among all keys in the table; new keys are random UUIDs, for idem_execute and for the limit (payment + bare key row in one statement, limit_keys as full as idempotency_keys)"
		echo
		echo "| keys in table | pattern | tps | p50 ms | p99 ms | p99 vs $(commas "$SMALL") keys | other load (cores) |"
		echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"
		for v in "claim replay" "execute new" "limit new"; do
			for n in "$SMALL" "$LARGE"; do
				awk -v n="$n" -v v="$v" '$1 == n && ($2 " " $3) == v' "$WORK/scale.txt" >"$WORK/sel.txt"
				med() { awk -v c="$1" '{print $c}' "$WORK/sel.txt" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
				p99=$(med 7)
				[ "$n" = "$SMALL" ] && base=$p99
				case $v in
				"claim replay") label="idem_claim, replay (1 round trip)" ;;
				"execute new") label="idem_execute, new key (1 round trip)" ;;
				*) label="limit: payment + bare key row, one statement (1 round trip)" ;;
				esac
				printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$(commas "$n")" "$label" "$(commas "$(med 5)")" \
					"$(med 6)" "$p99" "$(awk -v a="$p99" -v b="$base" 'BEGIN {printf "%.2fx", a / b}')" "$(med 16)"
			done
		done
		echo
		echo "failed requests: $(awk '{s += $9} END {print s + 0}' "$WORK/scale.txt")"
		echo
		echo "raw runs (keys variant mode requests tps p50_ms p99_ms wal_bytes_per_req errors check new replay 409 server_cpu_us client_cpu_us other_cores):"
		sed 's/^/  /' "$WORK/scale.txt"
	} | tee "$OUT"
	if [ "$SAVE" = 1 ]; then
		mkdir -p "bench/results"
		cp "$OUT" "bench/results/scale-pg$PG_MAJOR.txt"
		log "saved bench/results/scale-pg$PG_MAJOR.txt"
	fi
	[ "$(awk '{s += $9} END {print s + 0}' "$WORK/scale.txt")" = 0 ]
	exit
fi

# ============================================================ default, --quick, --check
if [ "$WHAT" != check ]; then
	log "load $REPLAY_KEYS completed keys for replays (idempotency_keys, ref_keys, Redis)"
	fill_keys 1 "$REPLAY_KEYS" >/dev/null
	[ "$WHAT" = edition ] || sql -d postgres -c "INSERT INTO ref_keys (scope, key, status, response_code, token, created_at, updated_at,
	        expires_at, request_hash, response)
	    SELECT 'merchant-42', $KEY_OF, 'completed', 201, nextval('ref_token_seq'), now(), now(),
	        now() + interval '24 h', sha256(convert_to(($REQ_OF)::text, 'UTF8')), jsonb_build_object('id', i)
	    FROM generate_series(1, $REPLAY_KEYS) i" >/dev/null
	sql -d postgres -c "INSERT INTO limit_keys (scope, key, request_hash, response)
	    SELECT 'merchant-42', $KEY_OF, $LIMIT_HASH_OF, jsonb_build_object('id', i)
	    FROM generate_series(1, $REPLAY_KEYS) i" >/dev/null
	if [ "$WHAT" = edition ]; then
		# the same keys in the edition's table, hashed by the edition
		sql_ed -d postgres -c "INSERT INTO sqled.idempotency_keys (scope, key, status, response_code, token, created_at, updated_at,
		        expires_at, request_hash, response, due_at)
		    SELECT 'merchant-42', $KEY_OF, 'completed', 201, nextval('sqled.idempotency_token_seq'), now(), now(),
		        now() + interval '24 h', sqled.idem_request_hash($REQ_OF), jsonb_build_object('id', i), now() + interval '24 h'
		    FROM generate_series(1, $REPLAY_KEYS) i" >/dev/null
	else
		"$WORK/driver" --redis "127.0.0.1:$RPORT" --fill-redis "$REPLAY_KEYS"
	fi

fi
if [ "$WHAT" != check ] && [ "$WHAT" != edition ]; then
	# storage: keys written through the functions, one at a time, each with
	# a 100-byte response, in a database of their own
	log "storage: $STORAGE_KEYS keys through idem_claim / idem_complete and through the PL/pgSQL reference"
	sql -d postgres -c "CREATE DATABASE storage OWNER app" >/dev/null
	sql -d storage -c "CREATE EXTENSION idempotency" >/dev/null
	schema storage
	storage_fill()   # $1: claim function, $2: complete function
	{
		sql -U app -d storage -c "
		DO \$\$
		DECLARE
		    k text; resp jsonb;
		BEGIN
		    FOR i IN 1..$STORAGE_KEYS LOOP
		        k := $KEY_OF;
		        resp := jsonb_build_object('payment_id', i, 'status', 'succeeded', 'amount', 3000, 'currency', 'TWD');
		        resp := resp || jsonb_build_object('pad', repeat('x', 100 - length(resp::text) - 11));
		        IF length(resp::text) <> 100 THEN RAISE 'response is % bytes', length(resp::text); END IF;
		        PERFORM $1(k, $REQ_OF, 'merchant-42');
		        PERFORM $2(k, 201, resp, 'merchant-42');
		        IF i % 1000 = 0 THEN COMMIT; END IF;   -- keys commit in small batches, as traffic would
		    END LOOP;
		END \$\$"
	}
	storage_fill idem_claim idem_complete
	storage_fill ref_claim ref_complete
	sql -d storage -c "VACUUM ANALYZE"
	storage_bytes() { sql -d storage -c "SELECT round(pg_total_relation_size('$1') / $STORAGE_KEYS::numeric)"; }
	STORE_EXT=$(storage_bytes idempotency_keys)
	STORE_REF=$(storage_bytes ref_keys)
	STORE_EXT_HEAP=$(sql -d storage -c "SELECT round(pg_relation_size('idempotency_keys') / $STORAGE_KEYS::numeric)")
	sql -d storage -c "VACUUM FULL idempotency_keys" -c "VACUUM FULL ref_keys"
	STORE_EXT_FULL=$(storage_bytes idempotency_keys)
	STORE_REF_FULL=$(storage_bytes ref_keys)
	# the same keys written by idem_execute, one transaction each (its
	# short way writes a new key's row once); the statement returns the
	# 100-byte response as its row, {"r": ...}
	log "storage: $STORAGE_KEYS keys through idem_execute"
	sql -d storage -c "TRUNCATE idempotency_keys"
	sql -U app -d storage \
		-c "SET synchronous_commit = off" -c "
	DO \$\$
	DECLARE
	    k text; resp jsonb;
	BEGIN
	    FOR i IN 1..$STORAGE_KEYS LOOP
	        k := $KEY_OF;
	        resp := jsonb_build_object('payment_id', i, 'status', 'succeeded', 'amount', 3000, 'currency', 'TWD');
	        resp := resp || jsonb_build_object('pad', repeat('x', 100 - length(resp::text) - 11 - 7));
	        IF length(jsonb_build_object('r', resp)::text) <> 100 THEN RAISE 'response is % bytes', length(jsonb_build_object('r', resp)::text); END IF;
	        PERFORM idem_execute(k, $REQ_OF, 'merchant-42', 201, 'SELECT \$1::jsonb AS r', resp);
	        COMMIT;
	    END LOOP;
	END \$\$"
	sql -d storage -c "VACUUM ANALYZE idempotency_keys"
	STORE_EXEC=$(storage_bytes idempotency_keys)
	# the limit: the same keys as bare rows (scope, key, hash, the same
	# 100-byte response), inserted one by one, batches of 1,000 committed
	log "storage: $STORAGE_KEYS keys as the limit's bare rows"
	sql -U app -d storage -c "
	DO \$\$
	DECLARE
	    k text; resp jsonb;
	BEGIN
	    FOR i IN 1..$STORAGE_KEYS LOOP
	        k := $KEY_OF;
	        resp := jsonb_build_object('payment_id', i, 'status', 'succeeded', 'amount', 3000, 'currency', 'TWD');
	        resp := resp || jsonb_build_object('pad', repeat('x', 100 - length(resp::text) - 11));
	        INSERT INTO limit_keys (scope, key, request_hash, response) VALUES ('merchant-42', k, $LIMIT_HASH_OF, resp);
	        IF i % 1000 = 0 THEN COMMIT; END IF;
	    END LOOP;
	END \$\$"
	sql -d storage -c "VACUUM ANALYZE limit_keys"
	STORE_LIMIT=$(storage_bytes limit_keys)
	sql -d postgres -c "DROP DATABASE storage"
fi
sql -d postgres -c "VACUUM ANALYZE" -c CHECKPOINT
[ "$WHAT" != edition ] || sql_ed -d postgres -c "VACUUM ANALYZE" -c CHECKPOINT

# what runs, in order: variant:mode
if [ "$WHAT" = edition ]; then
	RUNS="floor:new limit:new claim:new ed_claim:new execute:new ed_execute:new
	      limit:replay claim:replay ed_claim:replay execute:replay ed_execute:replay
	      claim:contention ed_claim:contention execute:contention ed_execute:contention"
elif [ "$WHAT" = check ]; then
	RUNS="on_conflict:contention plpgsql:contention redis:contention claim:contention execute:contention"
else
	RUNS="floor:new on_conflict:new limit:new spi_floor:new spi_floor_rules:new spi_floor_explicit:new plpgsql:new redis:new claim:new execute:new
	      limit:replay spi_floor:replay spi_floor_rules:replay plpgsql:replay redis:replay claim:replay execute:replay
	      on_conflict:contention plpgsql:contention redis:contention claim:contention execute:contention"
fi
RAW=$WORK/raw.txt
: >"$RAW"
one_run()   # $1 variant:mode, $2 round ("w" for warm-up), $3 seconds, $4 warm-up seconds
{
	local v=${1%%:*} m=${1#*:} out conn=$CONNINFO
	# ed_X: variant X of the driver on the edition's connections
	case $v in ed_*) conn=$CONNINFO_ED ;; esac
	local extra=""
	[ "$WHAT" = edition ] && extra=--text-args
	out=$(driver --pg "$conn" $extra --redis "127.0.0.1:${RPORT:-0}" --variant "${v#ed_}" --mode "$m" --keys "$REPLAY_KEYS" \
		--tag "c$2$v" --seconds "$3" --warmup "$4" 2>&1 | sed "s/^RESULT ${v#ed_} /RESULT $v /") || true
	if ! grep -q '^RESULT ' <<<"$out"; then   # the driver itself failed
		out="ERROR driver: $(tr '\n' ' ' <<<"$out")
RESULT $v $m 0 0 0 0 0 1 FAILED 0 0 0 0 0 0"
	fi
	if [ "$2" != w ]; then
		sed -n "s/^RESULT /$2 /p" <<<"$out" >>"$RAW"
		sed -n "s/^CHECK /$2 $v: /p; s/^ERROR /$2 $v $m: ERROR /p" <<<"$out" >>"$WORK/notes.txt"
	fi
	sed -n 's/^RESULT //p; s/^CHECK /    exactly-once /p; s/^ERROR /    ERROR /p' <<<"$out" | sed 's/^/   /' >&2
}
: >"$WORK/notes.txt"
if [ "$WHAT" != check ]; then
	log "warm-up: every variant once, 2 s"
	for r in $RUNS; do one_run "$r" w 2 0 2>/dev/null; done
fi
# each round: the floor, every other run (in reverse order every second
# round), the floor again; a variant's ratio is to the mean of its round's floors
others=$(tr -s ' \n\t' '\n' <<<"$RUNS" | grep . | grep -v '^floor:' | tr '\n' ' ')
for round in $(seq "$ROUNDS"); do
	order=$others
	[ $((round % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$others" | grep . | tac | tr '\n' ' ')
	log "round $round of $ROUNDS (${RUN_SECONDS} s each)"
	if [ "$WHAT" != check ]; then one_run floor:new "$round" "$RUN_SECONDS" "$WARMUP"; fi
	for r in $order; do one_run "$r" "$round" "$RUN_SECONDS" "$WARMUP"; done
	if [ "$WHAT" != check ]; then one_run floor:new "$round" "$RUN_SECONDS" "$WARMUP"; fi
done

# ------------------------------------------------------------ deferred work
# A key completed by idem_complete stays due at its lease's end; the worker
# then moves it to its expiry, one update of due_at (not HOT: indexed) per
# key, in batches, off the request path.  The worker is off during the
# rounds, so that work is measured here, once, over every such key: one
# idem_expire() call in one backend (its wall time is CPU time).
if [ "$WHAT" != check ] && [ "$WHAT" != edition ]; then
	due_sql="SELECT count(*) FROM idempotency_keys WHERE status = 'completed' AND due_at < expires_at AND due_at <= now()"
	rekey_n=$(sql -d postgres -c "$due_sql")
	lsn0=$(sql -d postgres -c "SELECT pg_current_wal_insert_lsn()")
	t0=$(date +%s%N)
	sql -d postgres -c "SELECT idem_expire()" >/dev/null
	t1=$(date +%s%N)
	rekey_wal=$(sql -d postgres -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn0')")
	rekey_left=$(sql -d postgres -c "$due_sql")
	if [ "${rekey_n:-0}" -gt 0 ]; then
		awk -v n="$rekey_n" -v ns=$((t1 - t0)) -v wal="$rekey_wal" -v left="$rekey_left" 'BEGIN {
			printf "deferred: the worker'"'"'s move of %d keys completed by idem_complete to their expiry: %.1f us and %.0f WAL bytes per key (one idem_expire() call; %d left due)\n", n, ns / n / 1000, wal / n, left }' \
			>>"$WORK/notes.txt"
	fi
fi

# ------------------------------------------------------------ --edition: which functions, which statements
# After the rounds (the counters cost time of their own): each edition path
# again for 3 s with 2 clients, track_functions = all (C functions counted
# too: the check that the ed_ variants called sqled's functions, not the C
# build's) and pg_stat_statements.track = all (the statements the edition's
# PL/pgSQL runs, nested); then the C build's explicit pattern, to compare.
if [ "$WHAT" = edition ]; then
	log "edition: functions called and statements, per path (track_functions = all, pg_stat_statements.track = all)"
	for q in sql sql_ed; do
		$q -d postgres -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "ALTER SYSTEM SET track_functions = 'all'" \
			-c "ALTER SYSTEM SET pg_stat_statements.track = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
	done
	sleep 1
	W=$WORK/edition-where.txt
	{
		echo
		echo "Where the time goes (after the rounds: each path 3 s more with 2 clients, track_functions = all, pg_stat_statements.track = all; times are wall-clock inside the server, so per call they include the counters' own cost and any wait for a core):"
	} >"$W"
	for r in ed_claim:new ed_claim:replay ed_execute:new ed_execute:replay claim:new; do
		v=${r%%:*} m=${r#*:} conn=$CONNINFO q=sql
		case $v in ed_*) conn=$CONNINFO_ED q=sql_ed ;; esac
		$q -d postgres -c "SELECT pg_stat_reset()" -c "SELECT pg_stat_statements_reset()" >/dev/null
		out=$(driver --pg "$conn" --text-args --clients 2 --variant "${v#ed_}" --mode "$m" --keys "$REPLAY_KEYS" --tag "s$v" --seconds 3 --warmup 0 2>&1) || true
		sleep 1.5   # the backends' statistics reach shared memory when they exit
		n=$(sed -n 's/^RESULT [^ ]* [^ ]* \([0-9]*\) .*/\1/p' <<<"$out")
		{
			echo
			echo "$v $m: ${n:-0} requests; $(grep -c '^ERROR' <<<"$out") error lines$(grep -m1 '^ERROR' <<<"$out" | sed 's/^ERROR/, first:/')"
			echo
			echo "functions called (pg_stat_user_functions; total includes what they call, self does not):"
			echo
			echo "| function | language | calls | calls / request | total µs / call | self µs / call |"
			echo "| --- | --- | ---: | ---: | ---: | ---: |"
			$q -d postgres -F ' | ' -c "SELECT '| ' || f.schemaname || '.' || f.funcname, l.lanname, f.calls,
			        round(f.calls / greatest(${n:-0}, 1)::numeric, 2), round((f.total_time / f.calls * 1000)::numeric, 1),
			        round((f.self_time / f.calls * 1000)::numeric, 1) || ' |'
			    FROM pg_stat_user_functions f JOIN pg_proc p ON p.oid = f.funcid JOIN pg_language l ON l.oid = p.prolang
			    WHERE f.calls > 0 AND f.schemaname IN ('public', 'sqled') ORDER BY f.total_time DESC LIMIT 14"
			echo
			echo "statements (pg_stat_statements, top level and nested, by total time; share: of the top-level statements' time):"
			echo
			echo "| top level | calls / request | mean µs | share | statement |"
			echo "| --- | ---: | ---: | ---: | --- |"
			$q -d postgres -F ' | ' -c "WITH s AS (SELECT * FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'postgres')
			        AND query !~* 'pg_stat|pg_reload|ALTER SYSTEM|pg_current_wal'),
			    t AS (SELECT sum(total_exec_time) AS top FROM s WHERE toplevel)
			    SELECT '| ' || CASE WHEN toplevel THEN 'yes' ELSE 'nested' END, round(calls / greatest(${n:-0}, 1)::numeric, 2),
			        round((total_exec_time / calls * 1000)::numeric, 1), round((100 * total_exec_time / nullif(t.top, 0))::numeric, 1) || '%',
			        '\`' || left(regexp_replace(query, '\s+', ' ', 'g'), 150) || '\` |'
			    FROM s, t ORDER BY total_exec_time DESC LIMIT 16"
		} >>"$W"
	done
	for q in sql sql_ed; do
		$q -d postgres -c "ALTER SYSTEM RESET track_functions" -c "ALTER SYSTEM RESET pg_stat_statements.track" -c "SELECT pg_reload_conf()" >/dev/null
	done
fi

# ------------------------------------------------------------ report
# RAW: round variant mode requests tps p50 p99 wal errors check new replay 409 server_cpu client_cpu other_cores
median() { sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "-"}'; }
col() { awk -v v="$1" -v m="$2" -v c="$3" '$2 == v && $3 == m {print $c}' "$RAW" | median; }
ratio() {   # per round: tps / mean floor tps of that round; median over rounds
	[ "$1" = floor ] && { echo 1; return; }
	awk -v v="$1" -v m="$2" '$2 == "floor" {fs[$1] += $5; fn[$1]++} $2 == v && $3 == m {t[$1] = $5}
		END {for (r in t) if (fs[r] > 0) print t[r] / (fs[r] / fn[r])}' "$RAW" | median
}
# to the limit (the goals of issue 13 are stated against it): tps / the
# limit's tps of the same round, median over rounds; server CPU / the
# limit's (medians).  Same mode's limit; none in contention mode.
limit_ratio() {
	[ "$WHAT" = check ] || [ "$2" = contention ] && { echo -; return; }
	awk -v v="$1" -v m="$2" '$2 == "limit" && $3 == m {l[$1] = $5} $2 == v && $3 == m {t[$1] += $5; n[$1]++}
		END {for (r in t) if (l[r] > 0) print t[r] / n[r] / l[r]}' "$RAW" | median | awk '{if ($1 == "-") print "-"; else printf "%.2f\n", $1}'
}
limit_cpu() {
	[ "$WHAT" = check ] || [ "$2" = contention ] && { echo -; return; }
	local lm=$2
	[ "$1" = floor ] && lm=new
	awk -v a="$(col "$1" "$2" 14)" -v b="$(col limit "$lm" 14)" 'BEGIN {if (b > 0) printf "%.2f\n", a / b; else print "-"}'
}
label()
{
	case $1:$2 in
	floor:new) echo "floor: INSERT into payments, autocommit (1 round trip)" ;;
	on_conflict:new) echo "INSERT ... ON CONFLICT DO NOTHING: no request check, no stored response (1)" ;;
	on_conflict:contention) echo "INSERT ... ON CONFLICT DO NOTHING: duplicates get no response (1)" ;;
	plpgsql:new) echo "PL/pgSQL reference: BEGIN, ref_claim, INSERT, ref_complete, COMMIT (5)" ;;
	plpgsql:replay) echo "PL/pgSQL reference: ref_claim (1)" ;;
	plpgsql:contention) echo "PL/pgSQL reference (new 5, duplicate 3: BEGIN, ref_claim, COMMIT)" ;;
	redis:new) echo "Redis: SET NX PX lock, INSERT, SET EX response (3)" ;;
	redis:replay) echo "Redis: GET response, no request check (1)" ;;
	redis:contention) echo "Redis (new 3; duplicate SET NX + GET, 409 and retry after 1 ms while locked)" ;;
	claim:new) echo "extension: BEGIN, idem_claim, INSERT, idem_complete, COMMIT (5)" ;;
	claim:replay) echo "extension: idem_claim, request hash checked (1)" ;;
	claim:contention) echo "extension: idem_claim pattern (new 5, duplicate 3)" ;;
	execute:new) echo "extension: idem_execute (1)" ;;
	execute:replay) echo "extension: idem_execute, request hash checked (1)" ;;
	execute:contention) echo "extension: idem_execute (1)" ;;
	limit:new) echo "limit: one statement, payment + bare key row, no checks (1)" ;;
	limit:replay) echo "limit: SELECT hash, response by primary key, hash checked by the client (1)" ;;
	spi_floor:new) echo "SPI floor: idem_execute's statements alone, through SPI, in limit_keys (1)" ;;
	spi_floor:replay) echo "SPI floor: the key's row read through SPI, hash checked by no one (1)" ;;
	spi_floor_explicit:new) echo "SPI floor, explicit: BEGIN, 1-statement claim, INSERT, 1-statement complete, COMMIT (5)" ;;
	spi_floor_rules:new) echo "SPI floor under the rules: + request hashed by the server, search_path pinned (1)" ;;
	spi_floor_rules:replay) echo "SPI floor under the rules: + request hash checked by the server, search_path pinned (1)" ;;
	ed_*) echo "SQL edition: $(label "${1#ed_}" "$2" | sed 's/^extension: //')" ;;
	esac
}
OUT=$WORK/report.txt
{
	case $WHAT in
	check) echo "# bench/run.sh --check: exactly-once in contention mode ($RUN_SECONDS s per variant; no timing claims)" ;;
	quick) echo "# bench/run.sh --quick ($ROUNDS round x $RUN_SECONDS s: indicative only)" ;;
	edition) echo "# bench/run.sh --edition: the SQL edition on a server without the C library (as on a managed service) against the C build preloaded on another, same machine, same rounds ($ROUNDS x $RUN_SECONDS s)" ;;
	*) echo "# bench/run.sh" ;;
	esac
	machine
	[ "$WHAT" != check ] && echo "each run: ${WARMUP} s warm-up, then ${RUN_SECONDS} s measured; $ROUNDS round(s) after a 2 s warm-up pass, each round the floor, the other runs (order reversed every second round), the floor again; figures are medians over rounds (the floor's over all its runs); ratio = tps / mean floor tps of the same round, median over rounds"
	echo "WAL: pg_current_wal_insert_lsn() difference over the measured window / requests (all of the server's WAL in that window)"
	echo "CPU: server = PostgreSQL's and Redis's processes (from /proc, over the measured window), client = the driver's own (the application side of each round trip); per request. Other load: cores busy with anything else on the machine meanwhile (of $(nproc)): the noise"
	[ "$WHAT" != check ] && echo "vs limit: tps / the limit's tps of the same round and mode (median over rounds); server CPU / the limit's (medians; new keys and the floor: limit new, replays: limit replay)"
	echo
	echo "| variant (round trips) | mode | tps | ratio to floor | tps vs limit | p50 ms | p99 ms | WAL bytes / request | server CPU µs / request | server CPU vs limit | client CPU µs / request | other load (cores) |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	for r in $RUNS; do
		v=${r%%:*} m=${r#*:}
		lm=$m; [ "$v" = floor ] && lm=new
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(label "$v" "$m")" "$m" \
			"$(commas "$(col "$v" "$m" 5)")" \
			"$( [ "$WHAT" = check ] && echo - || printf '%.2f' "$(ratio "$v" "$m")")" \
			"$(limit_ratio "$v" "$lm")" \
			"$(col "$v" "$m" 6 | awk '{printf "%.2f", $1}')" "$(col "$v" "$m" 7 | awk '{printf "%.2f", $1}')" \
			"$(commas "$(col "$v" "$m" 8)")" "$(col "$v" "$m" 14)" "$(limit_cpu "$v" "$m")" "$(col "$v" "$m" 15)" "$(col "$v" "$m" 16)"
	done
	if [ "$WHAT" = edition ]; then
		echo
		echo "SQL edition against the C build (ratio: edition / C; per round, median over rounds):"
		echo
		echo "| pattern (round trips) | mode | C tps | edition tps | tps ratio | C server CPU µs | edition server CPU µs | server CPU ratio | C p50 ms | edition p50 ms | edition failed requests |"
		echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
		for r in claim:new execute:new claim:replay execute:replay claim:contention execute:contention; do
			v=${r%%:*} m=${r#*:}
			edr() { awk -v v="$v" -v m="$m" -v c="$1" '$2 == v && $3 == m {a[$1] = $c} $2 == "ed_" v && $3 == m {b[$1] = $c}
				END {for (r in b) if (a[r] > 0) print b[r] / a[r]}' "$RAW" | median | awk '{if ($1 == "-") print "-"; else printf "%.2f\n", $1}'; }
			printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(label "$v" "$m" | sed 's/^extension: //')" "$m" \
				"$(commas "$(col "$v" "$m" 5)")" "$(commas "$(col "ed_$v" "$m" 5)")" "$(edr 5)" \
				"$(col "$v" "$m" 14)" "$(col "ed_$v" "$m" 14)" "$(edr 14)" \
				"$(col "$v" "$m" 6 | awk '{printf "%.2f", $1}')" "$(col "ed_$v" "$m" 6 | awk '{printf "%.2f", $1}')" \
				"$(awk -v v="ed_$v" -v m="$m" '$2 == v && $3 == m {s += $9} END {print s + 0}' "$RAW")"
		done
		[ -s "$WORK/edition-where.txt" ] && cat "$WORK/edition-where.txt"
	fi
	echo
	echo "contention: 8 clients race 4 live keys, each key changing after 50 requests; exactly-once checked after every run:"
	sed -n 's/^\([0-9]*\) \([a-z_]*\): /  round \1, \2: /p' "$WORK/notes.txt"
	awk '$2 == "redis" && $3 == "contention" {printf "  Redis 409 answers (locked, no response yet; retried after 1 ms): %d in round %s\n", $13, $1}' "$RAW"
	echo "failed requests: $(awk '{s += $9} END {print s + 0}' "$RAW")"
	grep ' ERROR ' "$WORK/notes.txt" | sed 's/^/  /' || true
	if [ "$WHAT" != check ] && [ "$WHAT" != edition ]; then
		fwal=$(col floor new 8)
		echo
		lwal=$(col limit new 8)
		x() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "-"}'; }
		echo "WAL per new key: idem_execute $(col execute new 8) bytes = $(x "$(col execute new 8)" "$fwal")x the floor's, $(x "$(col execute new 8)" "$lwal")x the limit's; idem_claim pattern $(col claim new 8) bytes = $(x "$(col claim new 8)" "$fwal")x, $(x "$(col claim new 8)" "$lwal")x; PL/pgSQL reference $(col plpgsql new 8) bytes = $(x "$(col plpgsql new 8)" "$fwal")x, $(x "$(col plpgsql new 8)" "$lwal")x; limit $lwal bytes = $(x "$lwal" "$fwal")x the floor's (floor: $fwal bytes, the payment alone)"
		echo "storage per completed key ($(commas "$STORAGE_KEYS") keys, UUID keys, scope 'merchant-42', request hash, 100-byte response, written one by one through the functions, batches of 1,000 committed, then VACUUM): idempotency_keys $STORE_EXT bytes (table + indexes; heap $STORE_EXT_HEAP), $STORE_EXT_FULL after VACUUM FULL; written by idem_execute, one key per transaction: $STORE_EXEC bytes = $(x "$STORE_EXEC" "$STORE_LIMIT")x the limit's; PL/pgSQL reference's ref_keys $STORE_REF bytes, $STORE_REF_FULL after VACUUM FULL; the limit's limit_keys (scope, key, hash, response; primary key only): $STORE_LIMIT bytes"
		grep '^deferred:' "$WORK/notes.txt" || true
	fi
	echo
	echo "raw runs (round variant mode requests tps p50_ms p99_ms wal_bytes_per_req errors check new replay 409 server_cpu_us client_cpu_us other_cores):"
	sed 's/^/  /' "$RAW"
} | tee "$OUT"

if [ "$SAVE" = 1 ]; then
	mkdir -p "bench/results"
	name=run-pg$PG_MAJOR
	[ "$WHAT" = quick ] && name=quick-pg$PG_MAJOR
	[ "$WHAT" = edition ] && name=edition-pg$PG_MAJOR
	cp "$OUT" "bench/results/$name.txt"
	log "saved bench/results/$name.txt"
fi
! grep -q FAILED "$RAW" && [ "$(awk '{s += $9} END {print s + 0}' "$RAW")" = 0 ]
