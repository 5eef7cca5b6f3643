#!/usr/bin/env bash
#
# bench/await.sh: how soon a claim waiting with await_result answers after
# the holder commits (issue 30).  Starts a throwaway server from PG_BIN (the
# extension installed there), runs bench/await.c's rounds with the library
# preloaded (waiters woken at the holder's commit) and without it (no shared
# memory: waiters find the result by reading the row every 10 ms), prints
# the medians and percentiles, and saves them to
# bench/results/await-pgN.txt (--no-save: print only).
#
#   PG_BIN=/usr/lib/postgresql/15/bin bash bench/await.sh [--rounds N] [--no-save]
#
# As root it runs the server as the postgres OS user.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pg_bin=${PG_BIN:-$(dirname "$(command -v pg_config)")}
rounds=500
save=1
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --no-save) save=0; shift ;;
        *) echo "usage: $0 [--rounds N] [--no-save]" >&2; exit 2 ;;
    esac
done

work=$(mktemp -d /tmp/idem-await.XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then
    chown postgres "$work"
    as_pg=(runuser -u postgres --)
fi
port=$((26500 + RANDOM % 1000))
stop() { "${as_pg[@]}" "$pg_bin/pg_ctl" stop -D "$work/data" -m fast >/dev/null 2>&1 || true; }
trap 'stop; rm -rf "$work"' EXIT

gcc -O2 -Wall -Wextra -o "$work/await" "$here/await.c" \
    -I"$("$pg_bin/pg_config" --includedir)" -L"$("$pg_bin/pg_config" --libdir)" -lpq
"${as_pg[@]}" "$pg_bin/initdb" -D "$work/data" -A trust >/dev/null
cat >>"$work/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$work'
idempotency.worker_databases = ''
CONF
conn="host=$work port=$port dbname=postgres"

# rounds of one mode: "from COMMIT sent" and "COMMIT round trip" per round (us)
measure() {
    local preload=$1
    stop
    sed -i '/^shared_preload_libraries/d' "$work/data/postgresql.conf"
    [ "$preload" = yes ] && echo "shared_preload_libraries = 'idempotency'" >>"$work/data/postgresql.conf"
    "${as_pg[@]}" "$pg_bin/pg_ctl" start -D "$work/data" -l "$work/log" -w >/dev/null
    "${as_pg[@]}" "$pg_bin/psql" -X -q -d "$conn" -c 'CREATE EXTENSION IF NOT EXISTS idempotency' >/dev/null
    "${as_pg[@]}" "$work/await" "$conn" "$rounds" 20 >"$work/rounds-$preload"
}

# median, p90, p99, max of column c (us -> ms)
summary() {
    awk -v c="$2" '{print $c}' "$1" | sort -n | awk '
        { v[NR] = $1 }
        END { printf "%.2f | %.2f | %.2f | %.2f", v[int(NR*0.5)+1]/1000, v[int(NR*0.9)+1]/1000, v[int(NR*0.99)+1]/1000, v[NR]/1000 }'
}
# the waiter's answer after the holder's COMMIT returned (may be < 0: it can come first)
after_commit() {
    awk '{print $1 - $2}' "$1" >"$1.after"
    summary "$1.after" 1
}

measure yes
measure no
stop

out=$(
    echo "# bench/await.sh: a claim with await_result => '5 s' waiting for the holder's commit"
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "machine: $(nproc) cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "PostgreSQL: $("$pg_bin/postgres" --version | awk '{print $3}'), default settings (fsync on), unix socket"
    echo "rounds: $rounds per mode; each: holder claims a fresh key, BEGIN, idem_complete; the waiter sends its claim; 20-29 ms later the holder sends COMMIT"
    echo
    echo "| mode | measured | median ms | p90 ms | p99 ms | max ms |"
    echo "| --- | --- | ---: | ---: | ---: | ---: |"
    echo "| preloaded (woken at commit) | COMMIT sent -> waiter's answer | $(summary "$work/rounds-yes" 1) |"
    echo "| preloaded (woken at commit) | COMMIT's own round trip | $(summary "$work/rounds-yes" 2) |"
    echo "| preloaded (woken at commit) | COMMIT returned -> waiter's answer | $(after_commit "$work/rounds-yes") |"
    echo "| not preloaded (reads every 10 ms) | COMMIT sent -> waiter's answer | $(summary "$work/rounds-no" 1) |"
    echo "| not preloaded (reads every 10 ms) | COMMIT returned -> waiter's answer | $(after_commit "$work/rounds-no") |"
    echo
    echo "every waiter answered replay"
)
echo "$out"
if [ "$save" = 1 ]; then
    major=$("$pg_bin/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
    echo "$out" >"$here/results/await-pg$major.txt"
    echo "saved: bench/results/await-pg$major.txt"
fi
