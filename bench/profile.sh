#!/usr/bin/env bash
# bench/profile.sh: where the server's CPU goes, per path, in instructions
# (valgrind's callgrind: repeatable whatever else the machine runs; perf's
# hardware counters are not available on this kind of machine).  Run as root
# on Debian bookworm:
#
#   bash bench/profile.sh                 every path, 500 calls each (~10 min)
#   bash bench/profile.sh --calls 200 --paths "execute:new limit:new"
#   options: --calls N (measured calls per path) --warmup W (calls before them,
#            default 20) --paths "variant:mode ..." --no-build --save (writes
#            bench/results/profile-pgN.txt, the latest: git keeps the
#            earlier ones) --keep DIR (the callgrind files)
#   bash bench/profile.sh --edition --calls 100 --no-build
#            the SQL edition beside the C build: its plain script
#            (edition/build.sh) in schema sqled with its own copy of
#            bench/schema.sql's tables and replay keys; paths ed_claim:new,
#            ed_claim:replay, ed_claim_only:new, ed_execute:new,
#            ed_execute:replay run the driver's statements on connections
#            whose search_path is sqled (the default paths then: those and
#            the same of the C build), after the C build's paths, on the
#            server restarted without the C library (as on a managed
#            service); saved as edition-profile-pgN.txt
#
# A throwaway PostgreSQL 15 (test/lib/common.sh) is set up as bench/run.sh
# sets it up (bench/schema.sql, bench/plpgsql_reference.sql, 10,000 completed
# keys for replays), then restarted under callgrind.  For each path the load
# driver (bench/driver.c, 1 client, prepared statements, the statements
# bench/run.sh measures) makes W calls on one connection, then, on a second
# connection, W + N calls; the second backend's counts minus the first's,
# divided by N, are the cost of one call in a warm backend (connection start,
# the first calls' planning and SPI_prepare cancel out).  Printed per path:
# instructions per call, a split into the parts issue 13 asks about
# (inclusive counts of the functions named; they nest: SPI contains the
# executor, heap insert its WAL record), our own code (self instructions in
# idempotency.so), and the top inclusive functions.  Debian's postgres binary
# keeps only its exported symbols: a static function (exec_bind_message, say)
# shows as an address, its cost still inside its callers' inclusive counts.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib/common.sh

CALLS=500
WARM=20
KEYS=10000
PATHS="floor:new limit:new spi_floor:new spi_floor_rules:new claim_only:new claim:replay claim:new spi_floor_explicit:new execute:new execute:replay spi_floor:replay spi_floor_rules:replay plpgsql:new plpgsql:replay limit:replay"
BUILD=1
SAVE=0
KEEP=""
EDITION=0
ARGS=("$@")   # for bench_maybe_in_chroot (bench/chroot.sh)
while [ $# -gt 0 ]; do
	case $1 in
	--calls) CALLS=$2; shift ;;
	--warmup) WARM=$2; shift ;;
	--paths) PATHS=$2; shift ;;
	--no-build) BUILD=0 ;;
	--save) SAVE=1 ;;
	--keep) KEEP=$2; shift ;;
	--edition) EDITION=1 ;;
	-h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
. bench/chroot.sh
bench_maybe_in_chroot bench/profile.sh ${ARGS[@]+"${ARGS[@]}"}
if [ "$EDITION" = 1 ]; then
	case " ${ARGS[*]-} " in *" --paths "*) ;; *) PATHS="floor:new claim_only:new ed_claim_only:new claim:new ed_claim:new claim:replay ed_claim:replay execute:new ed_execute:new execute:replay ed_execute:replay" ;; esac
	bash edition/build.sh >/dev/null || exit 1
fi
log() { printf '== [%3ds] %s\n' "$SECONDS" "$*" >&2; }

apt_install gcc make libc6-dev procps $PG_PACKAGES \
	libpq-dev libssl-dev libhiredis-dev valgrind
# Under callgrind the server runs some 50 times slower; a call restamps its
# rows (IDEM_STAMP_SLACK_USECS, src/common.h, an UPDATE a native run
# makes only after a real wait) only when it slept that long off the CPU
# (src/stamp.c), which callgrind's slowness, on the CPU, is not; until issue
# 35 it was wall-clock time, so the build measured waits 500 ms, about 10 ms
# of native time, and still does, so that results compare.  (make install
# again, or the test command, for the ordinary build.)
if [ "$BUILD" = 1 ]; then
	log "build and install the extension (restamp slack 500 ms, for callgrind)"
	make -s PG_CONFIG="$PG_BIN/pg_config" clean >/dev/null &&
		make -s PG_CONFIG="$PG_BIN/pg_config" WERROR=1 COPT=-DIDEM_STAMP_SLACK_USECS=500000 >/dev/null &&
		make -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null ||
		{ echo "profile: the build failed" >&2; exit 1; }
fi
FLOOR=1
case " $PATHS " in *spi_floor*) ;; *) [ "$EDITION" = 1 ] && FLOOR=0 ;; esac   # the SPI floor only where a path needs it
[ "$FLOOR" = 1 ] && build_and_install_floor >/dev/null
make_workdir
cleanup() { local rc=$?; stop_server "$WORK/data"; rm -rf "$WORK"; exit "$rc"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
gcc -O2 -Wall -Wextra -Werror -pthread -I"$("$PG_BIN/pg_config" --includedir)" \
	bench/driver.c -o "$WORK/driver" -lpq -lhiredis -lcrypto

# --- set up as bench/run.sh does, on a normal server
PORT=$(free_port 57432)
CONF="synchronous_commit = on
full_page_writes = on
shared_buffers = 1GB
max_wal_size = 20GB
checkpoint_timeout = 1h
autovacuum = off"
start_server "$WORK/data" "$PORT" "$CONF"
sql() { as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" "$@"; }
# key_of(i), the request and the limit's hash: as in bench/run.sh
KEY_OF="lpad(to_hex((i::bigint * 2654435761) % 4294967296), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(i), 12, '0')"
REQ_OF="jsonb_build_object('order_id', $KEY_OF, 'amount', 3000, 'currency', 'TWD')"
LIMIT_HASH_OF="sha256(convert_to(format('{\"amount\":3000,\"currency\":\"TWD\",\"order_id\":\"%s\"}', $KEY_OF), 'UTF8'))"
log "set up: extension, tables, $KEYS completed keys"
sql -d postgres -c "CREATE EXTENSION idempotency" -c "CREATE ROLE app LOGIN IN ROLE idempotency_app" \
	-c "GRANT CREATE ON SCHEMA public TO app" >/dev/null
sql -U app -d postgres -f bench/schema.sql -f bench/plpgsql_reference.sql >/dev/null
[ "$FLOOR" = 1 ] && sql -d postgres -f bench/floor/floor.sql >/dev/null
sql -d postgres -c "INSERT INTO idempotency_keys (scope, key, status, response_code, token, created_at, updated_at,
        expires_at, request_hash, response, due_at)
    SELECT 'merchant-42', $KEY_OF, 'completed', 201, nextval('idempotency_token_seq'), now(), now(),
        now() + interval '24 h', idem_request_hash($REQ_OF), jsonb_build_object('id', i), now() + interval '24 h'
    FROM generate_series(1, $KEYS) i" \
	-c "INSERT INTO ref_keys (scope, key, status, response_code, token, created_at, updated_at,
        expires_at, request_hash, response)
    SELECT 'merchant-42', $KEY_OF, 'completed', 201, nextval('ref_token_seq'), now(), now(),
        now() + interval '24 h', sha256(convert_to(($REQ_OF)::text, 'UTF8')), jsonb_build_object('id', i)
    FROM generate_series(1, $KEYS) i" \
	-c "INSERT INTO limit_keys (scope, key, request_hash, response)
    SELECT 'merchant-42', $KEY_OF, $LIMIT_HASH_OF, jsonb_build_object('id', i)
    FROM generate_series(1, $KEYS) i" \
	-c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null
if [ "$EDITION" = 1 ]; then
	# as bench/run.sh --edition: the grants on idem_execute applied to the
	# signature the edition defines, when privileges.sql names the C build's
	cp edition/dist/idempotency-sql--0.4.0.sql "$WORK/tmp/edition.sql"
	sed -i 's/idem_execute(text, jsonb, text, integer, text, VARIADIC "any")/idem_execute(text, jsonb, text, integer, text, VARIADIC anycompatiblearray)/' "$WORK/tmp/edition.sql"
	# the edition's restamp threshold (its '10 ms', IDEM_STAMP_SLACK_USECS's
	# counterpart) raised as the C build's is above, to 500 ms: otherwise a
	# new key's figure moves by up to 70,000 instructions between runs, as
	# callgrind's slowness crosses it or not
	n=$(grep -c "'10 ms'::interval" "$WORK/tmp/edition.sql" || true)
	[ "$n" -gt 0 ] || { echo "profile: no '10 ms'::interval in the edition's script: its restamp threshold moved; update bench/profile.sh" >&2; exit 1; }
	sed -i "s/'10 ms'::interval/'500 ms'::interval/g" "$WORK/tmp/edition.sql"
	chown postgres "$WORK/tmp/edition.sql"
	sql -d postgres -c "CREATE SCHEMA sqled" -c "GRANT USAGE ON SCHEMA sqled TO idempotency_app" -c "GRANT CREATE ON SCHEMA sqled TO app" >/dev/null
	sql -d postgres -c "SET search_path = sqled" -f "$WORK/tmp/edition.sql" >/dev/null
	sql -U app -d postgres -c "SET search_path = sqled" -f bench/schema.sql >/dev/null
	sql -d postgres -c "INSERT INTO sqled.idempotency_keys (scope, key, status, response_code, token, created_at, updated_at,
	        expires_at, request_hash, response, due_at)
	    SELECT 'merchant-42', $KEY_OF, 'completed', 201, nextval('sqled.idempotency_token_seq'), now(), now(),
	        now() + interval '24 h', sqled.idem_request_hash($REQ_OF), jsonb_build_object('id', i), now() + interval '24 h'
	    FROM generate_series(1, $KEYS) i" -c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null
fi
stop_server "$WORK/data"

# --- the same server under callgrind (every process it forks: one file
# each); $@: more options for postgres
as_postgres mkdir "$WORK/cg"
start_callgrind()
{
	as_postgres setsid valgrind --tool=callgrind --callgrind-out-file="$WORK/cg/callgrind.out.%p" \
		"$PG_BIN/postgres" -D "$WORK/data" "$@" >>"$WORK/valgrind.log" 2>&1 &
	for _ in $(seq 600); do
		as_postgres pg_isready -q -h 127.0.0.1 -p "$PORT" && break
		sleep 0.5
	done
	as_postgres pg_isready -q -h 127.0.0.1 -p "$PORT" || { tail -n 20 "$WORK/valgrind.log" "$WORK/data/server.log"; exit 1; }
}
log "restart under callgrind"
start_callgrind
CONNINFO="host=127.0.0.1 port=$PORT dbname=postgres user=app"

label()
{
	case $1 in
	floor:new) echo "floor: INSERT INTO payments ... RETURNING id (autocommit)" ;;
	limit:new) echo "limit: WITH p AS (INSERT INTO payments ...) INSERT INTO limit_keys ... (autocommit)" ;;
	limit:replay) echo "limit replay: SELECT request_hash, response FROM limit_keys by primary key" ;;
	spi_floor:new) echo "SPI floor: spi_floor_execute (bench/floor): read, payment INSERT, key INSERT, through SPI" ;;
	spi_floor:replay) echo "SPI floor replay: spi_floor_execute finds the key's row" ;;
	spi_floor_explicit:new) echo "SPI floor, explicit: BEGIN; spi_floor_claim; INSERT; spi_floor_complete; COMMIT" ;;
	spi_floor_rules:new) echo "SPI floor under the rules: spi_floor_rules (bench/floor): the floor + request hashed by the server + search_path pins" ;;
	spi_floor_rules:replay) echo "SPI floor under the rules, replay: the stored hash checked by the server, one search_path pin" ;;
	claim_only:new) echo "idem_claim alone, new key (autocommit; the key is left processing)" ;;
	claim:replay) echo "idem_claim, replay (autocommit, read-only)" ;;
	claim:new) echo "explicit pattern, new key: BEGIN; idem_claim; INSERT; idem_complete; COMMIT" ;;
	execute:new) echo "idem_execute, new key" ;;
	execute:replay) echo "idem_execute, replay" ;;
	plpgsql:new) echo "PL/pgSQL reference, new key: BEGIN; ref_claim; INSERT; ref_complete; COMMIT" ;;
	plpgsql:replay) echo "PL/pgSQL reference, replay: ref_claim" ;;
	ed_*) echo "SQL edition: $(label "${1#ed_}")" ;;
	*) echo "$1" ;;
	esac
}

# run the driver for $2 calls of path $1; prints the callgrind file of its backend
profiled_run()
{
	local v=${1%%:*} m=${1#*:} out pid conn=$CONNINFO extra=""
	# ed_X: the driver's variant X on the SQL edition's connections
	case $v in ed_*) conn="$CONNINFO options='-c search_path=sqled'" v=${v#ed_} ;; esac
	[ "$EDITION" = 1 ] && extra=--text-args
	out=$("$WORK/driver" --pg "$conn" $extra --clients 1 --variant "$v" --mode "$m" --keys "$KEYS" \
		--requests "$2" --warmup 0 --tag "p$RANDOM") || { echo "driver failed: $out" >&2; return 1; }
	grep -q '^ERROR' <<<"$out" && { echo "$out" >&2; return 1; }
	pid=$(sed -n 's/^BACKENDS //p' <<<"$out")
	# the backend writes its file when it exits
	for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	echo "$WORK/cg/callgrind.out.$pid"
}

# callgrind files of the short (W calls) and long (W + N calls) runs ->
# the report of one path (bench/callgrind.awk)
report()   # $1 short file, $2 long file, $3 path
{
	awk -v n="$CALLS" -v warm="$WARM" -v top="${TOP:-18}" -v title="$3: $(label "$3")" -v syms="$WORK/syms.txt" \
		-v path="$3" -v totals="$WORK/totals.txt" -f bench/callgrind.awk "$1" "$2"
}

{
	echo "# bench/profile.sh --calls $CALLS --warmup $WARM"
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); idempotency at ${IDEM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}; $(nproc) cores; PostgreSQL $(sql -d postgres -c 'SHOW server_version' | cut -d' ' -f1), extension $(sql -d postgres -c "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"); $(valgrind --version) --tool=callgrind"
	echo "per path: one backend, prepared statements (bench/driver.c --clients 1), $CALLS calls after $WARM; counts are the backend's own (not the WAL writer's, not the client's)"
	[ "$EDITION" = 1 ] && echo "the edition's paths (ed_*): after the C build's, on the same server restarted with shared_preload_libraries = pg_stat_statements alone (no idempotency.* setting), so that their backends never load the C library and its settings are unset, as on a managed service (checked: no ed_ backend's file names idempotency.so); connections as app, a member of idempotency_app, search_path sqled"
} >"$WORK/report.txt"
nm -D --defined-only "$PG_BIN/postgres" | awk '$2 ~ /^[TtWw]$/' | sort >"$WORK/syms.txt"
: >"$WORK/totals.txt"
# the C build's paths first, on the server as set up (the library
# preloaded); then the edition's on the same server restarted without it,
# as on a managed service: shared_preload_libraries = pg_stat_statements
# alone and no idempotency.* setting, so no edition backend loads the C
# library and its settings are unset placeholders (checked per path: the
# backend's callgrind file names no idempotency.so)
ORDERED="$(tr ' ' '\n' <<<"$PATHS" | grep . | grep -v '^ed_' || true) $(tr ' ' '\n' <<<"$PATHS" | grep '^ed_' || true)"
restarted=0
for p in $ORDERED; do
	if [ "${p#ed_}" != "$p" ] && [ "$restarted" = 0 ]; then
		log "restart under callgrind without the C library (shared_preload_libraries = pg_stat_statements)"
		as_postgres pg_ctl -D "$WORK/data" -m fast -w stop >/dev/null
		start_callgrind -c shared_preload_libraries=pg_stat_statements
		restarted=1
	fi
	log "$p: $WARM calls, then $((WARM + CALLS)) calls, under callgrind"
	short=$(profiled_run "$p" "$WARM")
	long=$(profiled_run "$p" "$((WARM + CALLS))")
	if [ "$restarted" = 1 ] && grep -q 'idempotency[.]so' "$short" "$long"; then
		echo "profile: the backend of $p loaded idempotency.so (the edition is to run without the C library)" >&2
		exit 1
	fi
	report "$short" "$long" "$p" >>"$WORK/report.txt"
	[ -n "$KEEP" ] && mkdir -p "$KEEP" && cp "$short" "$KEEP/$p.short.callgrind" && cp "$long" "$KEEP/$p.long.callgrind"
done
# summary first: instructions per call, to the floor and to the limit
{
	sed -n 1,3p "$WORK/report.txt"
	echo
	echo "| path | instructions / call | vs floor | vs limit (new: limit new; replay: limit replay) |"
	echo "| --- | ---: | ---: | ---: |"
	awk -v paths="$PATHS" '{t[$1] = $2}
		END {n = split(paths, o, " "); for (i = 1; i <= n; i++) {p = o[i]; if (!(p in t)) continue; split(p, vm, ":"); l = (vm[2] == "replay") ? t["limit:replay"] : t["limit:new"]
			printf "| %s | %d | %s | %s |\n", p, t[p], t["floor:new"] ? sprintf("%.2f", t[p] / t["floor:new"]) : "-", l ? sprintf("%.2f", t[p] / l) : "-"}}' "$WORK/totals.txt"
	sed -n '4,$p' "$WORK/report.txt"
} >"$WORK/final.txt"
mv "$WORK/final.txt" "$WORK/report.txt"
cat "$WORK/report.txt"
if [ "$SAVE" = 1 ]; then
	mkdir -p bench/results
	name=profile-pg$PG_MAJOR
	[ "$EDITION" = 1 ] && name=edition-profile-pg$PG_MAJOR
	cp "$WORK/report.txt" "bench/results/$name.txt"
	log "saved bench/results/$name.txt"
fi
