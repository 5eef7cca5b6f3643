#!/usr/bin/env bash
# bench/batch.sh: claiming 100 new keys in one transaction, one call per key
# against one idem_claim_batch call.  Run as root after the extension is
# installed into the PostgreSQL of PG_BIN (default: 15's):
#
#   bash bench/batch.sh                 3 rounds x 10 s per variant
#   ROUNDS=1 SECONDS_EACH=4 bash bench/batch.sh
#   CLIENTS=2 bash bench/batch.sh       one client count only
#   bash bench/batch.sh --no-save    print only
#
# It builds and installs the extension first, with the restamp slack at
# 500 ms as bench/profile.sh does (kept so that results compare with the
# earlier ones: until issue 35 a 100-key insert that took longer than the
# usual 10 ms restamped every key; now only a call that sleeps that long
# does, src/stamp.c; make install again, or the test command, for the
# ordinary build).
# One throwaway server (fsync on, as installed), pgbench over its Unix
# socket, with each of CLIENTS connection counts (default "1 2": one
# consumer, then as many as the cores here, which the server and pgbench
# then share, so that keys/s follows CPU per key).  Each pgbench
# transaction claims 100 keys no earlier transaction used, each with a
# request of its own, and commits:
#   single         BEGIN; 100 x SELECT ... FROM idem_claim(...); COMMIT (simple protocol)
#   single_prep    the same with pgbench -M prepared (no parse or plan per call)
#   batch          one SELECT ... FROM idem_claim_batch(100 keys, 100 requests) (autocommit)
# Figures per variant, median over rounds: keys claimed per second, and
# server CPU per key (the postmaster's children's user + system time
# across the round, from /proc, over the keys claimed); then, with the
# server restarted under callgrind, instructions per key of each variant:
# one backend runs 5 transactions, another 25, and the difference is
# divided by the 2,000 keys between them (the host-independent figure).
# Writes bench/results/batch-pgN.txt unless --no-save.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-10}
CLIENTS=${CLIENTS:-1 2}
SAVE=1
[ "${1:-}" = --no-save ] && SAVE=0
MAJOR=$("$PG_BIN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')

make -s PG_CONFIG="$PG_BIN/pg_config" clean >/dev/null &&
	make -s PG_CONFIG="$PG_BIN/pg_config" COPT=-DIDEM_STAMP_SLACK_USECS=500000 >/dev/null &&
	make -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null ||
	{ echo "batch: the build failed" >&2; exit 1; }

WORK=$(mktemp -d /tmp/idem-batch.XXXXXX)
chown postgres "$WORK"
PORT=$((21000 + RANDOM % 2000))
pg() { runuser -u postgres -- env PATH="$PG_BIN:$PATH" "$@"; }
cleanup()
{
	pg pg_ctl -D "$WORK/data" -m fast -w -t 120 stop >/dev/null 2>&1 || true
	# processes under callgrind write their files as they end
	rm -rf "$WORK" 2>/dev/null || { sleep 3; rm -rf "$WORK"; }
}
trap cleanup EXIT

pg initdb -D "$WORK/data" -A trust --no-sync >/dev/null
cat >>"$WORK/data/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = ''
shared_buffers = 512MB
max_wal_size = 10GB
CONF
pg pg_ctl -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null
PSQL=(pg psql -X -q -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1)
"${PSQL[@]}" -c "CREATE EXTENSION idempotency" -c "CREATE SEQUENCE bench_keys CACHE 1000"

# the pgbench scripts: keys 'k<n>' from one sequence, a request per key
{
	echo "BEGIN;"
	for i in $(seq 100); do
		echo "SELECT outcome FROM idem_claim('k' || nextval('bench_keys'), jsonb_build_object('amount', $i), 'bench');"
	done
	echo "COMMIT;"
} >"$WORK/single.sql"
cat >"$WORK/batch.sql" <<'SQL'
SELECT count(*) FROM idem_claim_batch(
    ARRAY(SELECT 'k' || nextval('bench_keys') FROM generate_series(1, 100)),
    ARRAY(SELECT jsonb_build_object('amount', i) FROM generate_series(1, 100) i), 'bench');
SQL
chown postgres "$WORK"/*.sql

# user + system ticks of the postmaster's children that ended (backends
# end when pgbench disconnects), and of the postmaster itself
server_ticks()
{
	awk '{ print $14 + $15 + $16 + $17 }' "/proc/$(head -n 1 "$WORK/data/postmaster.pid")/stat"
}
TICK=$(getconf CLK_TCK)

run()
{
	local variant=$1 file=$2 mode=$3 before after out tps
	before=$(server_ticks)
	out=$(pg pgbench -n -h "$WORK" -p "$PORT" -c "$C" -j "$C" -T "$SECONDS_EACH" \
		-M "$mode" -f "$file" postgres 2>&1)
	# the backends end after pgbench: wait until the postmaster reaped them
	while [ "$(pg psql -X -At -h "$WORK" -p "$PORT" -d postgres -c \
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" != 0 ]; do
		sleep 0.1
	done
	sleep 0.2
	after=$(server_ticks)
	tps=$(printf '%s\n' "$out" | sed -nE 's/^tps = ([0-9.]+).*/\1/p' | head -n 1)
	[ -n "$tps" ] || { printf '%s\n' "$out" >&2; exit 1; }
	# keys per second, server CPU microseconds per key
	awk -v v="$variant" -v tps="$tps" -v t="$SECONDS_EACH" -v ticks=$((after - before)) -v hz="$TICK" \
		'BEGIN { keys = tps * 100; printf "%s %.0f %.2f\n", v, keys, ticks / hz * 1e6 / (keys * t) }' |
		sed "s/^/$C /"
}

RAW=$WORK/raw
for C in $CLIENTS; do
	for r in $(seq "$ROUNDS"); do
		run single "$WORK/single.sql" simple >>"$RAW"
		run single_prep "$WORK/single.sql" prepared >>"$RAW"
		run batch "$WORK/batch.sql" simple >>"$RAW"
		"${PSQL[@]}" -c "VACUUM ANALYZE idempotency_keys" >/dev/null
	done
done

# instructions per key under callgrind: a backend of 5 transactions and
# one of 25 of the variant's script, the difference over 2,000 keys
echo "autovacuum = off" >>"$WORK/data/postgresql.conf"
pg pg_ctl -D "$WORK/data" -m fast -w stop >/dev/null
mkdir "$WORK/cg" && chown postgres "$WORK/cg"
runuser -u postgres -- env -C "$WORK" setsid valgrind --tool=callgrind \
	--callgrind-out-file="$WORK/cg/callgrind.out.%p" "$PG_BIN/postgres" -D "$WORK/data" >"$WORK/callgrind.log" 2>&1 &
for _ in $(seq 600); do pg pg_isready -q -h "$WORK" -p "$PORT" && break; sleep 0.5; done
backend_ir()   # $1 script, $2 transactions, $3 protocol: the instructions of one backend running them
{
	local before f ir best=0
	before=$(ls "$WORK/cg")
	pg pgbench -n -h "$WORK" -p "$PORT" -c 1 -t "$2" -M "$3" -f "$1" postgres >/dev/null 2>&1
	# callgrind writes a backend's file when it exits: the largest new one is pgbench's
	sleep 2
	for f in "$WORK"/cg/callgrind.out.*; do
		grep -qx "${f##*/}" <<<"$before" && continue
		ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$f")
		[ "${ir:-0}" -gt "$best" ] && best=$ir
	done
	echo "$best"
}
IR_OF() { local a b; a=$(backend_ir "$1" 5 "$2"); b=$(backend_ir "$1" 25 "$2"); echo $(((b - a) / 2000)); }
IR_S=$(IR_OF "$WORK/single.sql" simple)
IR_P=$(IR_OF "$WORK/single.sql" prepared)
IR_B=$(IR_OF "$WORK/batch.sql" simple)

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
col() { awk -v n="$C" -v v="$1" -v c="$2" '$1 == n && $2 == v { print $(c + 1) }' "$RAW" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

REPORT=$WORK/report
{
	echo "# bench/batch.sh"
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo), load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "PostgreSQL: $(pg psql -X -At -h "$WORK" -p "$PORT" -d postgres -c 'SHOW server_version'), fsync on, synchronous_commit on, shared_buffers 512MB; pgbench over a Unix socket, $CLIENTS client(s), $ROUNDS rounds x $SECONDS_EACH s per variant, median shown"
	echo "each transaction claims 100 new keys (one sequence), each with its own request, and commits"
	echo
	for C in $CLIENTS; do
		S_KEYS=$(col single 2); S_CPU=$(col single 3)
		P_KEYS=$(col single_prep 2); P_CPU=$(col single_prep 3)
		B_KEYS=$(col batch 2); B_CPU=$(col batch 3)
		echo "$C client(s):"
		echo
		echo "| variant | keys/s | vs single | server CPU per key (us) | vs single |"
		echo "| --- | ---: | ---: | ---: | ---: |"
		echo "| 100 x idem_claim in one transaction (simple protocol) | $S_KEYS | 1.00x | $S_CPU | 1.00x |"
		echo "| 100 x idem_claim in one transaction (prepared) | $P_KEYS | $(ratio "$P_KEYS" "$S_KEYS")x | $P_CPU | $(ratio "$P_CPU" "$S_CPU")x |"
		echo "| idem_claim_batch of 100 keys (one call, autocommit) | $B_KEYS | $(ratio "$B_KEYS" "$S_KEYS")x | $B_CPU | $(ratio "$B_CPU" "$S_CPU")x |"
		echo
		echo "batch against the prepared single calls: $(ratio "$B_KEYS" "$P_KEYS")x the keys per second, $(ratio "$B_CPU" "$P_CPU")x the server CPU per key"
		echo
	done
	echo "instructions per key (callgrind, one backend, 25 transactions less 5): single $IR_S, prepared $IR_P ($(ratio "$IR_P" "$IR_S")x), batch $IR_B ($(ratio "$IR_B" "$IR_S")x; $(ratio "$IR_B" "$IR_P")x the prepared)"
	echo
	echo "raw rounds (clients variant keys_per_s server_cpu_us_per_key):"
	cat "$RAW"
} >"$REPORT"
cat "$REPORT"
if [ "$SAVE" = 1 ]; then
	cp "$REPORT" "bench/results/batch-pg$MAJOR.txt"
	echo "saved bench/results/batch-pg$MAJOR.txt"
fi
