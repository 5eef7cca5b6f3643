#!/usr/bin/env bash
#
# bench/restamp.sh: what a batch that waited pays to move its rows forward.
# A call that waits after writing rows counts their leases and expiries
# again from after the wait, in one UPDATE of every row it wrote (the C
# build's IDEM_STMT_RESTAMP, the edition's idem__restamp).  Here
# idem_claim_batch writes 9,999 new keys, then waits for a row another
# session holds (its last key in byte order, 'zzz', failed and so taken
# over); the holder lets go about 2 s after the batch began (the
# edition's batch takes up to 0.9 s to reach that key).  Measured:
# from the holder's COMMIT to the batch's answer (the rest of the batch,
# the restamp above all), with plan_cache_mode at its default and at
# force_generic_plan (which a DBA may set, and which the plan cache may
# also choose by itself from a statement's sixth run: a generic plan has
# the arrays as parameters); the same batch without the wait beside, also
# with force_custom_plan (which copies the arrays into each plan).  Both
# builds in one database of one throwaway server: the C build in public,
# the edition's plain script in schema sqled, each table holding 100,000
# keys of another scope, analyzed.
#
#   PG_BIN=/usr/lib/postgresql/15/bin bash bench/restamp.sh [--rounds N] [--no-save]
#
# The C build must be installed in PG_BIN's PostgreSQL (make install) and
# the edition built (make edition).  As root it runs the server as the
# postgres OS user.  Saves bench/results/restamp-pgN.txt (--no-save: print only).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pg_bin=${PG_BIN:-$(dirname "$(command -v pg_config)")}
rounds=3
save=1
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --no-save) save=0; shift ;;
        *) echo "usage: $0 [--rounds N] [--no-save]" >&2; exit 2 ;;
    esac
done
script=$here/../edition/dist/idempotency-sql--0.4.0.sql
[ -f "$script" ] || { echo "restamp: $script is missing: run make edition" >&2; exit 1; }

work=$(mktemp -d /tmp/idem-restamp.XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then
    chown postgres "$work"
    as_pg=(runuser -u postgres --)
fi
port=$((27500 + RANDOM % 1000))
stop() { "${as_pg[@]}" "$pg_bin/pg_ctl" stop -D "$work/data" -m fast >/dev/null 2>&1 || true; }
trap 'stop; rm -rf "$work"' EXIT

"${as_pg[@]}" "$pg_bin/initdb" -D "$work/data" -A trust >/dev/null
cat >>"$work/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$work'
shared_preload_libraries = 'idempotency'
idempotency.worker_databases = ''
CONF
"${as_pg[@]}" "$pg_bin/pg_ctl" start -D "$work/data" -l "$work/log" -w >/dev/null
psql() { "${as_pg[@]}" "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -d postgres "$@"; }
psql -c 'CREATE EXTENSION idempotency' -c 'CREATE SCHEMA sqled'
psql -c 'SET search_path = sqled' -f "$script" >/dev/null

# a table in use: 100,000 keys of another scope, analyzed (on an empty
# table the plan cache kept custom plans for the restamp)
for schema in public sqled; do
    psql -c "SET search_path = $schema" \
         -c "SELECT count(*) FROM generate_series(1, 100000, 10000) b,
             LATERAL idem_claim_batch(ARRAY(SELECT 'old-' || g FROM generate_series(b, b + 9999) g), scope => 'old')" \
         -c "ANALYZE idempotency_keys" >/dev/null
done

keys="ARRAY(SELECT 'k' || lpad(g::text, 5, '0') FROM generate_series(1, 9999) g) || ARRAY['zzz']"

# one round: build ($1: public or sqled), plan_cache_mode ($2), wait (yes
# or no); prints the ms from the holder's COMMIT (or, without a wait, from
# the batch's start) to the batch's answer
round() {
    local schema=$1 mode=$2 wait=$3
    psql -c "SET search_path = $schema" \
         -c "DELETE FROM idempotency_keys WHERE scope = 'rs'" \
         -c "SELECT idem_fail('zzz', 'rs', (SELECT token FROM idem_claim('zzz', scope => 'rs')), 500)" >/dev/null
    hold="$pg_bin/psql -X -q -At -h $work -p $port -d postgres -c \"SET search_path = $schema\" -c 'BEGIN' \
-c \"SELECT key FROM idempotency_keys WHERE key = 'zzz' FOR UPDATE\" -c 'SELECT pg_sleep(2)' \
-c 'SELECT extract(epoch FROM clock_timestamp())' -c 'ROLLBACK' | tail -1 >$work/released"
    {
        echo "SET search_path = $schema; SET plan_cache_mode = $mode;"
        [ "$wait" = yes ] && echo "\\! ($hold &); sleep 0.05"
        echo "SELECT extract(epoch FROM clock_timestamp()) AS started \\gset"
        echo "SELECT count(*) AS new FROM idem_claim_batch($keys, scope => 'rs') \\gset"
        echo "SELECT extract(epoch FROM clock_timestamp()) AS ended, :new AS new \\gset"
        echo "\\echo :started :ended :new"
    } | psql -At >"$work/out"
    read -r started ended new < <(tail -1 "$work/out")
    [ "$new" = 10000 ] || { echo "restamp: the batch answered $new keys, not 10000" >&2; exit 1; }
    if [ "$wait" = yes ]; then
        awk -v e="$ended" -v r="$(cat "$work/released")" 'BEGIN {
            if (e < r) { print "restamp: the batch answered before the holder let go" > "/dev/stderr"; exit 1 }
            printf "%.0f\n", (e - r) * 1000 }'
    else
        awk -v e="$ended" -v s="$started" 'BEGIN { printf "%.0f\n", (e - s) * 1000 }'
    fi
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
measure() { local i; for i in $(seq 1 "$rounds"); do round "$@"; done | median; }

rows=()
for schema in public sqled; do
    name=$([ "$schema" = public ] && echo "C build" || echo "SQL edition")
    rows+=("| $name | $(measure "$schema" auto no) | $(measure "$schema" force_custom_plan no) | $(measure "$schema" auto yes) | $(measure "$schema" force_generic_plan yes) |")
done
stop

out=$(
    echo "# bench/restamp.sh: idem_claim_batch of 10,000 keys whose last waits for another session's row"
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "machine: $(nproc) cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "PostgreSQL: $("$pg_bin/postgres" --version | awk '{print $3}'), default settings (fsync on), unix socket; median of $rounds rounds"
    echo
    echo "| build | batch, no wait: ms | the same, plan_cache_mode = force_custom_plan: ms | after the wait: ms | after the wait, plan_cache_mode = force_generic_plan: ms |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
)
echo "$out"
if [ "$save" = 1 ]; then
    major=$("$pg_bin/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
    echo "$out" >"$here/results/restamp-pg$major.txt"
    echo "saved: bench/results/restamp-pg$major.txt"
fi
